package train

import (
	"context"
	"testing"
)

// plannedRun trains eight epochs of smallSynth under a planned budget
// that holds both a feature and a history cache, and returns the report;
// edit (when set) changes the options first.
func plannedRun(t *testing.T, profile string, edit func(*Options)) *Report {
	t.Helper()
	d := smallSynth(t)
	n := d.NumNodes()
	o := synthOpts()
	o.Epochs = 8
	o.EvalEvery = 8
	if edit != nil {
		edit(o)
	}
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
	rep := plannedRun(t, "histpredict", nil)
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
	rep := plannedRun(t, "featpredict", nil)
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

// TestHistoryDrawsPredicted compares the neighbour ids the history keeps
// the sampler from drawing an epoch, measured as the profile's draws less
// the epoch's (from lists the dynamic cache did not serve, as the plan's
// HistSampledNeighbors counts them), with the plan's prediction, once
// the cache has settled, on three layers. Before the sampler counted its
// draws the comparison could only set the first hop below the reused
// nodes against the prediction's whole subtrees: 0.14–0.15 of it here
// (0.23 on the bench dataset). The difference measured 0.63–0.70 of the
// prediction over seeds 1–5, while the reused nodes measured 1.02–1.08 of
// theirs: the profile counts a hop-2 node's subtree under every hop-1
// parent that drew it, and reusing one parent saves nothing where another
// still draws it; it also leaves out the reused node's own deeper draws
// (docs/planner.md; the two were not measured apart). The band fails the
// lower bound and a prediction off by half.
func TestHistoryDrawsPredicted(t *testing.T) {
	// Three layers: with two, the first hop below a reused node is its
	// whole subtree and the lower bound is exact.
	rep := plannedRun(t, "drawpredict", func(o *Options) { o.Layers, o.Fanouts = 3, []int{5, 5, 5} })
	pr := rep.Plan.Predicted
	if pr.NoHistSampledIDs == 0 || pr.HistSampledNeighbors == 0 {
		t.Fatalf("the plan predicts no draws: %+v", pr)
	}
	got, per := settled(rep, func(e *EpochStats) float64 { return pr.NoHistSampledIDs - e.Measured.SampledIDs })
	t.Logf("seed %d: predicted %.0f ids not drawn an epoch (of %.0f without history), measured %v (epochs 2–7: %.0f, ratio %.2f)",
		*seedFlag, pr.HistSampledNeighbors, pr.NoHistSampledIDs, per, got, got/pr.HistSampledNeighbors)
	lb, _ := settled(rep, func(e *EpochStats) float64 { return e.Measured.HistGatherRows })
	t.Logf("the one-hop lower bound: %.0f (ratio %.2f)", lb, lb/pr.HistSampledNeighbors)
	ru, _ := settled(rep, func(e *EpochStats) float64 { return float64(e.Reused) })
	t.Logf("reused hop-1 nodes: %.0f, predicted %.0f (ratio %.2f)", ru, pr.HistReusedNodes, ru/pr.HistReusedNodes)
	if r := got / pr.HistSampledNeighbors; r < 0.5 || r > 1.5 {
		t.Errorf("%.0f ids not drawn an epoch after epoch 1, predicted %.0f (ratio %.2f, want 0.5–1.5)", got, pr.HistSampledNeighbors, r)
	}
	c := rep.PlanComparison
	if c == nil {
		t.Fatal("no comparison in the report")
	}
	for _, r := range c.Rows {
		if r.Quantity == "history: neighbour ids not drawn (the profile's draws less the epoch's)" {
			return
		}
	}
	t.Errorf("the comparison has no row for the draws: %+v", c.Rows)
}
