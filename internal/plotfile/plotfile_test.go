package plotfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// TestSavePNG: a PNG whatever the extension; a failed write leaves no
// file and no temporary one.
func TestSavePNG(t *testing.T) {
	dir := t.TempDir()
	p := plot.New()
	p.Title.Text = "t"
	path := filepath.Join(dir, "curves.out")
	if err := SavePNG(p, 2*vg.Inch, 2*vg.Inch, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("not a PNG: %v %q", err, b[:min(len(b), 8)])
	}
	if err := SavePNG(p, 2*vg.Inch, 2*vg.Inch, filepath.Join(dir, "none", "x.png")); err == nil {
		t.Error("a missing directory accepted")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want the one plot", len(ents))
	}
}
