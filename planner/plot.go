package planner

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ssdgnn/ssdgnn/internal/plotfile"
)

// PlotPlan writes a PNG of Eq. 5's benefit against α (like OUTRE Fig. 5)
// to path, atomically, with the chosen α marked.
func PlotPlan(res *PlanResult, path string) error {
	p, err := planPlot(res)
	if err != nil {
		return err
	}
	if err := plotfile.SavePNG(p, 6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	return nil
}

// planPlot builds PlotPlan's chart.
func planPlot(res *PlanResult) (*plot.Plot, error) {
	if res == nil || len(res.Curve) == 0 {
		return nil, fmt.Errorf("%w: empty plan", ErrInvalidOptions)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Memory split, %s (%s budget)", res.Dataset, fmtBytes(float64(res.Memory.MemBytes)))
	p.X.Label.Text = "α (feature cache share; history cache 1−α)"
	p.Y.Label.Text = "benefit (" + benefitUnit(res.Reads != nil) + ")" // the unit the plan's why line names
	pts := make(plotter.XYs, len(res.Curve))
	var top float64
	for i, c := range res.Curve {
		pts[i] = plotter.XY{X: c.Alpha, Y: c.Benefit}
		top = max(top, c.Benefit)
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return nil, fmt.Errorf("planner: plot: %w", err)
	}
	line.Color = color.RGBA{R: 200, A: 255}
	line.Width = vg.Points(1.5)
	p.Add(line)
	mark, err := plotter.NewLine(plotter.XYs{{X: res.Alpha, Y: 0}, {X: res.Alpha, Y: top}})
	if err != nil {
		return nil, fmt.Errorf("planner: plot: %w", err)
	}
	mark.Color = color.RGBA{G: 150, A: 255}
	mark.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(mark)
	p.Legend.Add("Eq. 5 benefit", line)
	p.Legend.Add(fmt.Sprintf("chosen α = %.2f", res.Alpha), mark)
	// The legend sits at the bottom, on the far side from the chosen α:
	// at the top it hid the curve, which is highest near its maximum.
	p.Legend.Top = false
	p.Legend.Left = res.Alpha > 0.5
	p.X.Min, p.X.Max, p.Y.Min = 0, 1, 0
	return p, nil
}

func fmtBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
