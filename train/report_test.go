package train

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummary: the summary line quotes accuracies only when an epoch was
// evaluated; an interrupted run before any evaluation printed "final
// valid 0.00% test 0.00%; best valid 0.00%".
func TestSummary(t *testing.T) {
	base := Report{Model: ModelConfig{Kind: ModelSAGE, Layers: 2}, Params: 10, Options: Options{Epochs: 3, EvalEvery: 100}, ElapsedSec: 1}
	for _, tc := range []struct {
		name   string
		epochs []EpochStats
		want   string
	}{
		{"none", nil, "no epoch completed (--epochs 3)"},
		{"not due", []EpochStats{{Epoch: 0}, {Epoch: 1}}, "2 epochs trained, not evaluated: no evaluation yet (--eval-every 100)"},
		{"cut evaluation", []EpochStats{{Epoch: 0, EvalPending: true}}, "not evaluated: interrupted during epoch 0's evaluation, which --resume runs first"},
		{"evaluated", []EpochStats{{Epoch: 0, Evaluated: true, ValidAcc: 0.5, TestAcc: 0.25}}, "final valid 50.00% test 25.00%; best valid 50.00% (test 25.00%)"},
	} {
		rep := base
		rep.Epochs = tc.epochs
		for _, e := range tc.epochs {
			if e.Evaluated {
				rep.FinalValid, rep.FinalTest, rep.BestValid, rep.TestAtBest = e.ValidAcc, e.TestAcc, e.ValidAcc, e.TestAcc
			}
		}
		got := Summary(&rep)
		if !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "model sage, 2 layers, 10 parameters; ") {
			t.Errorf("%s: %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
}

// TestPlotDrawsSinglePoints: a series of one point (a one-epoch run, or
// one evaluation under --eval-every) is drawn; lines alone drew nothing,
// and a one-epoch --plot was an empty chart with its legend.
func TestPlotDrawsSinglePoints(t *testing.T) {
	rep := &Report{Model: ModelConfig{Kind: ModelSAGE}, Epochs: []EpochStats{{Epoch: 0, Loss: 2, TrainAcc: 0.2, Evaluated: true, ValidAcc: 0.5, TestAcc: 0.55, ElapsedSec: 0.4}}}
	path := filepath.Join(t.TempDir(), "p.png")
	if err := Plot(rep, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Coloured pixels left of the legend (top right): only data is
	// coloured; axes and text are grey.
	b := img.Bounds()
	colored := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Min.X+b.Dx()*4/5; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != g || g != bl {
				colored++
			}
		}
	}
	if colored == 0 {
		t.Error("one epoch's points are not drawn")
	}
}
