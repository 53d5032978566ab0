package train

import (
	"fmt"

	"github.com/ssdgnn/ssdgnn/storage"
)

// UntilReport says whether training reached Options.UntilValid and when.
type UntilReport struct {
	// TargetValid is Options.UntilValid (0: no target).
	TargetValid float64 `json:"target_valid_acc,omitempty"`
	// ReachedValid is set when an evaluation's valid accuracy reached
	// TargetValid; EpochsToTarget is then the epochs trained by then
	// (those of a resumed checkpoint included) and SecondsToTarget the
	// training time by then, evaluation included (EpochStats.ElapsedSec).
	ReachedValid    bool    `json:"reached_valid"`
	EpochsToTarget  int     `json:"epochs_to_target,omitempty"`
	SecondsToTarget float64 `json:"seconds_to_target,omitempty"`
}

// untilReached records es in rep when it reaches Options.UntilValid and
// reports whether Run should stop; stopping early writes the checkpoint
// the end of training would have.
func (t *Trainer) untilReached(rep *Report, es EpochStats) (bool, error) {
	o := &t.o
	rep.TargetValid = o.UntilValid
	if o.UntilValid <= 0 || !es.Evaluated || es.ValidAcc < o.UntilValid {
		return false, nil
	}
	rep.ReachedValid, rep.EpochsToTarget, rep.SecondsToTarget = true, es.Epoch+1, es.ElapsedSec
	if o.CheckpointDir != "" && t.epoch != o.Epochs {
		if err := t.saveCheckpoint(rep); err != nil {
			return true, err
		}
	}
	return true, nil
}

// reachedBefore records in rep the first epoch of a resumed checkpoint
// whose evaluation already reached Options.UntilValid, and reports
// whether there was one: training has then nothing left to do (a resumed
// run trained on and reported the target reached at its own first epoch).
func (t *Trainer) reachedBefore(rep *Report) bool {
	o := &t.o
	if o.UntilValid <= 0 {
		return false
	}
	for _, es := range t.epochStats {
		if es.Evaluated && es.ValidAcc >= o.UntilValid {
			rep.TargetValid = o.UntilValid
			rep.ReachedValid, rep.EpochsToTarget, rep.SecondsToTarget = true, es.Epoch+1, es.ElapsedSec
			return true
		}
	}
	return false
}

// CheckUntilValid refuses Options.UntilValid on a dataset whose valid
// split holds no labelled node: its valid accuracy is reported as 0 at
// every evaluation, so the target could never be reached and training
// ran every epoch as if it had not been asked to stop. New checks it;
// train calls it too before it prints anything about the run, as
// CheckResume.
func CheckUntilValid(d *storage.Dataset, o *Options) error {
	if o.UntilValid <= 0 {
		return nil
	}
	labels := d.Labels()
	for _, v := range d.ValidIdx() {
		if labels[v] >= 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: --until-valid %v: dataset %s has no labelled validation node (%s holds %d nodes), so its valid accuracy can never reach the target",
		ErrInvalidOptions, o.UntilValid, d.Dir(), storage.FileValid, len(d.ValidIdx()))
}
