package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage/importer"
)

// TestUntilValid checks that Run stops after the first evaluation whose
// valid accuracy reaches the target, and reports when; and that an
// unreachable target trains every epoch.
func TestUntilValid(t *testing.T) {
	d := smallSynth(t)
	for _, tc := range []struct {
		target float64
		reach  bool
	}{{0.5, true}, {1, false}} {
		tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Epochs: 4, BatchSize: 100, Seed: *seedFlag, UntilValid: tc.target})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := tr.Run(context.Background())
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rep.ReachedValid != tc.reach {
			t.Fatalf("target %v: reached %v, want %v (valid %v)", tc.target, rep.ReachedValid, tc.reach, rep.FinalValid)
		}
		if !tc.reach {
			if len(rep.Epochs) != 4 {
				t.Errorf("unreachable target: %d epochs, want 4", len(rep.Epochs))
			}
			continue
		}
		last := rep.Epochs[len(rep.Epochs)-1]
		if rep.EpochsToTarget != len(rep.Epochs) || last.ValidAcc < tc.target || rep.SecondsToTarget != last.ElapsedSec {
			t.Errorf("report %+v, last epoch %+v", rep.UntilReport, last)
		}
		for _, e := range rep.Epochs[:len(rep.Epochs)-1] {
			if e.ValidAcc >= tc.target {
				t.Errorf("epoch %d reached %v but training went on", e.Epoch, e.ValidAcc)
			}
		}
	}
	if err := (&Options{UntilValid: 1.5}).Validate(); err == nil {
		t.Error("UntilValid 1.5 accepted")
	}
	if err := (&Options{EvalMode: "exact"}).Validate(); err == nil {
		t.Error("EvalMode exact accepted")
	}
}

// TestUntilValidResumed: resuming, with --until-valid, a checkpoint whose
// evaluations already reached the target trains nothing more and
// reports the checkpoint's epoch; it trained another epoch and reported
// the target reached there.
func TestUntilValidResumed(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 3, dir
	first := run(t, d, o)
	target := first.Epochs[0].ValidAcc // reached at epoch 0
	if target <= 0 {
		t.Fatalf("epoch 0's valid accuracy %v", target)
	}
	o = synthOpts()
	o.Epochs, o.Resume, o.UntilValid = 6, dir, target
	rep := run(t, d, o)
	if !rep.ReachedValid || rep.EpochsToTarget != 1 || rep.SecondsToTarget != first.Epochs[0].ElapsedSec || len(rep.Epochs) != 3 {
		t.Errorf("resumed with a target its checkpoint reached at epoch 0: %+v, %d epochs; want reached after 1 epoch, %v s, nothing trained",
			rep.UntilReport, len(rep.Epochs), first.Epochs[0].ElapsedSec)
	}
}

// TestUntilValidWithoutValidNodes: --until-valid on a dataset whose valid
// split is empty is refused before training, naming the split. Its valid
// accuracy is 0 at every evaluation, so the target was silently never
// reached and every epoch ran.
func TestUntilValidWithoutValidNodes(t *testing.T) {
	d := dataset(t, "novalid", func(dir string) error {
		src := t.TempDir()
		var edges, feats, labels strings.Builder
		for v := range 60 {
			fmt.Fprintf(&edges, "%d %d\n", v, (v*7+1)%60)
			fmt.Fprintf(&feats, "%d,%d\n", v%3, v%5)
			fmt.Fprintf(&labels, "%d\n", v%3)
		}
		for name, b := range map[string]string{"e.txt": edges.String(), "f.csv": feats.String(), "l.txt": labels.String()} {
			if err := os.WriteFile(filepath.Join(src, name), []byte(b), 0o644); err != nil {
				return err
			}
		}
		_, err := importer.ImportEdgeList(filepath.Join(src, "e.txt"), dir, &importer.Options{
			FeatFile: filepath.Join(src, "f.csv"), LabelFile: filepath.Join(src, "l.txt"), SplitFrac: [3]float64{0.6, 0, 0.4}, Seed: 1})
		return err
	})
	if n := len(d.ValidIdx()); n != 0 {
		t.Fatalf("valid split of %d nodes, want none", n)
	}
	o := &Options{Model: ModelSAGE, Hidden: 4, Epochs: 3, BatchSize: 8, Fanouts: []int{2, 2}, Seed: 1, UntilValid: 0.5}
	_, err := New(context.Background(), d, o)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "valid_idx.npy") {
		t.Fatalf("New: %v, want ErrInvalidOptions naming valid_idx.npy", err)
	}
	// Without the target it trains, and reports the test accuracy of
	// an epoch at the best (every valid accuracy is 0).
	o.UntilValid = 0
	rep := run(t, d, o)
	if rep.BestValid != 0 || rep.TestAtBest != rep.Epochs[0].TestAcc {
		t.Errorf("best valid %v (test %v), epoch 0 test %v", rep.BestValid, rep.TestAtBest, rep.Epochs[0].TestAcc)
	}
}

// TestBestValidFirstEpoch: the test accuracy at the best valid accuracy
// is an evaluated epoch's, the earliest on ties, also when every valid
// accuracy is 0 (an empty valid split): it was 0 then whatever the test
// accuracy (`import edgelist --split-frac 0.6,0,0.4`, 3 epochs: "best
// valid 0.00% (test 0.00%)" beside "final ... test 31.25%").
func TestBestValidFirstEpoch(t *testing.T) {
	for _, tc := range []struct {
		name            string
		epochs          []EpochStats
		bestValid, test float64
	}{
		{"all valid 0", []EpochStats{{Epoch: 0, Evaluated: true, TestAcc: 0.3125}, {Epoch: 1, Evaluated: true, TestAcc: 0.25}}, 0, 0.3125},
		{"not evaluated first", []EpochStats{{Epoch: 0, TestAcc: 0.9}, {Epoch: 1, Evaluated: true, ValidAcc: 0.1, TestAcc: 0.2}, {Epoch: 2, Evaluated: true, ValidAcc: 0.1, TestAcc: 0.3}}, 0.1, 0.2},
		{"rises", []EpochStats{{Epoch: 0, Evaluated: true, ValidAcc: 0.2, TestAcc: 0.1}, {Epoch: 1, Evaluated: true, ValidAcc: 0.5, TestAcc: 0.4}, {Epoch: 2, Evaluated: true, ValidAcc: 0.3, TestAcc: 0.6}}, 0.5, 0.4},
	} {
		tr := &Trainer{epochStats: tc.epochs}
		rep := &Report{}
		tr.finish(rep)
		if rep.BestValid != tc.bestValid || rep.TestAtBest != tc.test {
			t.Errorf("%s: best valid %v (test %v), want %v (test %v)", tc.name, rep.BestValid, rep.TestAtBest, tc.bestValid, tc.test)
		}
	}
}
