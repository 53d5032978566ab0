package train

import (
	"context"
	"testing"
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
