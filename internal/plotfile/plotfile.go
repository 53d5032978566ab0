// Package plotfile writes a gonum plot to a PNG file atomically
// (internal/atomicfile): the image is rendered in memory, then written
// under a temporary name, synced and renamed, so that a full disk or an
// interrupt never leaves a truncated image that still reads as a PNG. The
// format is PNG whatever the file's extension.
package plotfile

import (
	"bytes"
	"fmt"

	"gonum.org/v1/plot"
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
