package train

import (
	"context"
	"testing"
)

// plannedRun trains eight epochs of smallSynth under a planned budget
// that holds both a feature and a history cache, and returns the report.
func plannedRun(t *testing.T, profile string) *Report {
	t.Helper()
	d := smallSynth(t)
	n := d.NumNodes()
	o := synthOpts()
	o.Epochs = 8
	o.EvalEvery = 8
	ws := WorkingSet(d, o, nil)
	mem := MinimumBudget(d, o) + 8*n + 200*d.FeatRowBytes() + ws.Bytes + FixedState(d, o, nil).Bytes
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: profile}
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	mp.Apply(o, mo)
	rep := run(t, d, o)
	if rep.Plan == nil || rep.Plan.History.Entries == 0 || rep.Plan.Feature.Entries == 0 {
		t.Fatalf("no feature or no history cache planned: %+v", rep.Plan)
	}
	return rep
}

// settled returns x of every epoch of rep and its mean over epochs 2 and
// later, once the history cache has settled.
func settled(rep *Report, x func(e *EpochStats) float64) (mean float64, per []float64) {
	var sum float64
	for i := range rep.Epochs {
		e := &rep.Epochs[i]
		per = append(per, x(e))
		if e.Epoch >= 2 {
			sum += x(e)
		}
	}
	return sum / float64(len(rep.Epochs)-2), per
}

// TestHistoryReusePredicted compares the hop-1 nodes reused per epoch,
// once the cache has settled (epochs 2–7: epoch 0 starts empty and epoch 1
// inherits a cache epoch 0 filled completely), with the plan's prediction
// (planner's validity model). The model once credited every appearance
// and measured about half of its prediction on the bench dataset; the
// band below is wide because a 3,000-node graph has 6 batches an epoch.
func TestHistoryReusePredicted(t *testing.T) {
	rep := plannedRun(t, "histpredict")
	pred := rep.Plan.Predicted.HistReusedNodes
	got, per := settled(rep, func(e *EpochStats) float64 { return float64(e.Reused) })
	t.Logf("seed %d: predicted %.0f reused hop-1 nodes an epoch, measured %v (epochs 2–7: %.0f, ratio %.2f)", *seedFlag, pred, per, got, got/pred)
	if got < 0.7*pred || got > 1.4*pred {
		t.Errorf("reused %.0f an epoch after epoch 1, predicted %.0f (ratio %.2f, want 0.7–1.4)", got, pred, got/pred)
	}
}

// TestFeatureHitsPredicted compares the feature cache's hits per epoch
// after epoch 1 with the plan's prediction: the cached nodes' counts in
// the profile's held-out epoch, thinned by the rows the history removes.
// The nodes of largest profiled count are gathered less often in any
// other epoch (training's epochs sample afresh, and history shifts even
// epoch 0's draws), and the history removes rows the cache would serve:
// the profiled counts alone, unthinned, predicted 1.5 times what the
// bench dataset's epochs measured. Here the new prediction measured
// 0.91–1.08 over seeds 1–5, the old one 0.76–0.77, which fails the band;
// the rows asked of the cache measured 1.04–1.08 of theirs.
func TestFeatureHitsPredicted(t *testing.T) {
	rep := plannedRun(t, "featpredict")
	pred := rep.Plan.Predicted.FeatRows
	got, per := settled(rep, func(e *EpochStats) float64 { return e.Measured.FeatRows })
	t.Logf("seed %d: predicted %.0f feature-cache hits an epoch, measured %v (epochs 2–7: %.0f, ratio %.2f)", *seedFlag, pred, per, got, got/pred)
	if got < 0.8*pred || got > 1.25*pred {
		t.Errorf("%.0f feature-cache hits an epoch after epoch 1, predicted %.0f (ratio %.2f, want 0.8–1.25)", got, pred, got/pred)
	}
	// The rows asked of the cache: the profile's, less the history's
	// share (the keep both predictions are thinned by).
	pred = rep.Plan.Predicted.GatherRows
	got, per = settled(rep, func(e *EpochStats) float64 { return e.Measured.GatherRows })
	t.Logf("predicted %.0f rows asked of the feature cache an epoch (of %.0f without history), measured %v (epochs 2–7: %.0f, ratio %.2f)",
		pred, rep.Plan.Predicted.NoHistGatherRows, per, got, got/pred)
	if got < 0.85*pred || got > 1.15*pred {
		t.Errorf("%.0f rows asked an epoch after epoch 1, predicted %.0f (ratio %.2f, want 0.85–1.15)", got, pred, got/pred)
	}
}
