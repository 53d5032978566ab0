package train

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/storage"
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

// TestPlotAccuracyInPercent: loss and accuracy have panels of their own,
// accuracy in percent on 0–100. On one shared axis (before) a loss of 4.5
// flattened the accuracies, fractions below 1, to the bottom.
func TestPlotAccuracyInPercent(t *testing.T) {
	rep := &Report{Model: ModelConfig{Kind: ModelSAGE}}
	for i, l := range []float64{4.5, 3.1, 2.2} {
		rep.Epochs = append(rep.Epochs, EpochStats{Epoch: i, Loss: l, TrainAcc: 0.1 * float64(i+1), Evaluated: true,
			ValidAcc: 0.3 * float64(i+1), TestAcc: 0.29 * float64(i+1), ElapsedSec: float64(i + 1)})
	}
	lp, ap, err := curvePanels(rep)
	if err != nil {
		t.Fatal(err)
	}
	if ap.Y.Min != 0 || ap.Y.Max != 100 || ap.Y.Label.Text != "accuracy (%)" {
		t.Errorf("accuracy panel spans [%g, %g] labelled %q, want [0, 100] in percent", ap.Y.Min, ap.Y.Max, ap.Y.Label.Text)
	}
	if lp.Y.Max < 4.5 || lp.Y.Max > 6 {
		t.Errorf("loss panel's top %g: want the losses (up to 4.5) to fill it", lp.Y.Max)
	}
	if err := Plot(rep, filepath.Join(t.TempDir(), "p.png")); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointLine: the report says which model the checkpoint holds
// (the last epoch's, or an interrupted epoch's batches) and, when the
// best valid epoch is another, that that one is not kept. The summary
// quoted the best epoch's test accuracy and nothing said the checkpoint
// infer reads is another epoch's model.
func TestCheckpointLine(t *testing.T) {
	ev := func(e int, v, te float64) EpochStats {
		return EpochStats{Epoch: e, Evaluated: true, ValidAcc: v, TestAcc: te}
	}
	for _, tc := range []struct {
		name            string
		epochs          []EpochStats
		ckEpochs, ckBat int
		best            int
		want, not       string
	}{
		{"last is best", []EpochStats{ev(0, 0.5, 0.4), ev(1, 0.6, 0.55)}, 2, 0, 1,
			"the model after epoch 1 (valid 60.00% test 55.00%)", "not kept"},
		{"best earlier", []EpochStats{ev(0, 0.7, 0.65), ev(1, 0.6, 0.55)}, 2, 0, 0,
			"the model after epoch 1 (valid 60.00% test 55.00%); the best valid epoch, 0 (valid 70.00% test 65.00%), is not kept", ""},
		{"mid-epoch", []EpochStats{ev(0, 0.7, 0.65)}, 1, 3, 0,
			"the model after epoch 0 and 3 batches of epoch 1; the best valid epoch, 0 (valid 70.00% test 65.00%), is not kept", "(valid 70.00% test 65.00%);"},
		{"first epoch cut", nil, 0, 2, -1, "the model after 2 batches of epoch 0", "best"},
	} {
		rep := Report{Epochs: tc.epochs, Checkpoint: "ck/" + CheckpointFile, CheckpointEpochs: tc.ckEpochs, CheckpointBatches: tc.ckBat, BestEpoch: tc.best}
		if tc.best >= 0 {
			rep.BestValid, rep.TestAtBest = tc.epochs[tc.best].ValidAcc, tc.epochs[tc.best].TestAcc
		}
		got := CheckpointLine(&rep)
		if !strings.HasPrefix(got, "checkpoint ck/"+CheckpointFile+": ") || !strings.Contains(got, tc.want) || (tc.not != "" && strings.Contains(got, tc.not)) {
			t.Errorf("%s: %q, want it to contain %q (and not %q)", tc.name, got, tc.want, tc.not)
		}
	}
	if got := CheckpointLine(&Report{}); got != "" {
		t.Errorf("no checkpoint: %q, want none", got)
	}
}

// TestNoEpochsIsEmptyList: a run interrupted before its first epoch ends
// reports "epochs": [] and writes "epoch_stats": [] in its checkpoint, not
// null (which readers that iterate the list, jq '.epochs[]', refuse).
func TestNoEpochsIsEmptyList(t *testing.T) {
	d := smallSynth(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := synthOpts()
	o.CheckpointDir = t.TempDir()
	rep := runInterrupted(t, ctx, d, o)
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"epochs":[]`)) {
		t.Errorf("report: epochs not an empty list: %.200s", b)
	}
	ck, err := readCheckpoint(o.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.close()
	if ck.meta.EpochStats == nil {
		t.Error(`checkpoint META: "epoch_stats" is null, want []`)
	}
}

// TestEpochRowCountsEveryStage: the table's read rows and read bytes sum
// every stage of the epoch's accounting delta. They left out "load",
// which within an epoch holds the macro batches' list loads and the
// feature block's rows: on a 50k-node relabelled graph 29.4 MB of an
// epoch's 155.7 MB of preads (strace) were missing from "read bytes".
func TestEpochRowCountsEveryStage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stages []storage.StageStats
	}{
		{"gather and sample", []storage.StageStats{{Stage: "gather", Rows: 7, BytesRead: 1 << 20}, {Stage: "sample", Rows: 5, BytesRead: 3 << 10}}},
		{"with load", []storage.StageStats{{Stage: "gather", Rows: 7, BytesRead: 1 << 20}, {Stage: "load", Rows: 11, BytesRead: 5 << 20}, {Stage: "sample", Rows: 5}}},
		{"load only", []storage.StageStats{{Stage: "load", Rows: 3, BytesRead: 2 << 30}}},
	} {
		var rows, read int64
		for _, s := range tc.stages {
			rows, read = rows+s.Rows, read+s.BytesRead
		}
		var buf bytes.Buffer
		if err := WriteEpochRow(&buf, EpochStats{Storage: tc.stages, IOReadBytes: -1}); err != nil {
			t.Fatal(err)
		}
		f := strings.Split(buf.String(), "\t")
		// epoch loss train valid test wall Sa Ga Tr Co overlap | read rows, read bytes
		if got, want := f[11], strconv.FormatInt(rows, 10); got != want {
			t.Errorf("%s: read rows %s, want %s", tc.name, got, want)
		}
		if got, want := f[12], humanize.IBytes(uint64(read)); got != want {
			t.Errorf("%s: read bytes %s, want %s", tc.name, got, want)
		}
	}
}

// TestMeasuredFeatureBytesSaved: an epoch's measured feature bytes saved
// are its feature-cache hits' bytes, at most the rows it asked of the
// cache. They added the hop-2 draws the history skipped × row bytes, a
// count of draws, not rows: on a 50k-node gen graph (SAGE 10,10, --mem
// 200MiB) 154.7 MB an epoch, more than the 85.7 MB a whole epoch asks
// without any cache or history.
func TestMeasuredFeatureBytesSaved(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	o.Epochs, o.FeatCacheBytes, o.EvalMode = 2, 64<<10, EvalSampled
	rep := run(t, d, o)
	rowBytes := float64(d.FeatRowBytes())
	var draws float64
	for _, e := range rep.Epochs {
		m := e.Measured
		draws += m.HistGatherRows
		if m.FeatRows <= 0 {
			t.Fatalf("epoch %d: no feature-cache hits: the test checks nothing", e.Epoch)
		}
		if m.FeatureBytesSaved != m.FeatRows*rowBytes || m.FeatureBytesSaved > m.GatherRows*rowBytes {
			t.Errorf("epoch %d: feature bytes saved %v, want the %v hits × %v bytes, at most the %v rows asked", e.Epoch, m.FeatureBytesSaved, m.FeatRows, rowBytes, m.GatherRows)
		}
	}
	if draws == 0 {
		t.Fatal("the history skipped no draws: the test does not tell the two counts apart")
	}
}
