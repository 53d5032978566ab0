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
