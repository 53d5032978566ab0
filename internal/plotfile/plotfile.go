// Package plotfile writes a gonum plot to a PNG file atomically
// (internal/atomicfile): the image is rendered in memory, then written
// under a temporary name, synced and renamed, so that a full disk or an
// interrupt never leaves a truncated image that still reads as a PNG. The
// format is PNG whatever the file's extension.
package plotfile

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
)

// SavePNG renders p at w × h and writes it to path.
func SavePNG(p *plot.Plot, w, h vg.Length, path string) error {
	wt, err := p.WriterTo(w, h, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// SaveGridPNG renders plots, rows of panels with aligned axes, at w × h
// and writes them to path as one image.
func SaveGridPNG(plots [][]*plot.Plot, w, h vg.Length, path string) error {
	if len(plots) == 0 || len(plots[0]) == 0 {
		return fmt.Errorf("plot: no panels")
	}
	img := vgimg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	for i, row := range plots {
		if len(row) != t.Cols {
			return fmt.Errorf("plot: row %d has %d panels, row 0 has %d", i, len(row), t.Cols)
		}
	}
	canvases := plot.Align(plots, t, dc)
	for i, row := range plots {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// NiceTicks is a plot.Ticker whose labelled ticks are 1, 2 or 5 times a
// power of ten apart, about Major of them (default 5), labelled in the
// shortest form ("250", "0.5"); gonum's default labelled only 0 and 250
// on a 0–290 axis, as "0.00" and "250.00".
type NiceTicks struct{ Major int }

// Ticks implements plot.Ticker.
func (n NiceTicks) Ticks(lo, hi float64) []plot.Tick {
	want := n.Major
	if want <= 0 {
		want = 5
	}
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', -1, 64)}}
	}
	raw := (hi - lo) / float64(want)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{2, 5, 10} { // the nice step nearest raw's
		if math.Abs(math.Log(m*mag/raw)) < math.Abs(math.Log(step/raw)) {
			step = m * mag
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi*(1+1e-12); i++ {
		v := i * step
		// Round off the float error of i*step at the step's precision.
		prec := max(0, -int(math.Floor(math.Log10(step))))
		v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'f', prec, 64), 64)
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		if mid := v + step/2; mid < hi {
			ticks = append(ticks, plot.Tick{Value: mid}) // unlabelled minor tick
		}
	}
	return ticks
}

// BarLabels writes text(v) centred above bar i (at x = i) of height v,
// for bar charts on NominalX axes.
func BarLabels(p *plot.Plot, vals []float64, text func(float64) string) error {
	xys := make(plotter.XYs, len(vals))
	labels := make([]string, len(vals))
	for i, v := range vals {
		xys[i] = plotter.XY{X: float64(i), Y: v}
		labels[i] = text(v)
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YBottom
	}
	l.Offset = vg.Point{Y: vg.Points(2)}
	p.Add(l)
	return nil
}
