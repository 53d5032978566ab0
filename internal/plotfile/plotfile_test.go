package plotfile

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
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

// TestSaveGridPNG: panels in rows make one PNG of the size asked; ragged
// rows and no panels are errors that leave no file.
func TestSaveGridPNG(t *testing.T) {
	dir := t.TempDir()
	a, b := plot.New(), plot.New()
	path := filepath.Join(dir, "grid.png")
	if err := SaveGridPNG([][]*plot.Plot{{a, b}}, 4*vg.Inch, 2*vg.Inch, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 2*cfg.Height {
		t.Fatalf("grid image: %v, %d x %d, want twice as wide as high", err, cfg.Width, cfg.Height)
	}
	for _, bad := range [][][]*plot.Plot{nil, {{a, b}, {a}}} {
		if err := SaveGridPNG(bad, 4*vg.Inch, 2*vg.Inch, filepath.Join(dir, "bad.png")); err == nil {
			t.Errorf("%d rows accepted", len(bad))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.png")); !os.IsNotExist(err) {
		t.Errorf("a refused grid left a file: %v", err)
	}
}

// TestNiceTicks: labelled ticks 1, 2 or 5 times a power of ten apart,
// within the range, labelled in the shortest form.
func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 290, []string{"0", "50", "100", "150", "200", "250"}},
		{0, 1, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{0, 75000, []string{"0", "20000", "40000", "60000"}},
		{3, 3, []string{"3"}},
	} {
		var got []string
		for _, tk := range (NiceTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
			if tk.Value < tc.lo || tk.Value > tc.hi {
				t.Errorf("[%g, %g]: tick %g outside", tc.lo, tc.hi, tk.Value)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("[%g, %g]: labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}
