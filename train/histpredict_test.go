package train

import (
	"context"
	"testing"
)

// TestHistoryReusePredicted trains eight epochs under a planned budget
// with the history cache and compares the hop-1 nodes reused per epoch,
// once the cache has settled (epochs 2–7: epoch 0 starts empty and epoch 1
// inherits a cache epoch 0 filled completely), with the plan's prediction
// (planner's validity model). The model once credited every appearance
// and measured about half of its prediction on the bench dataset; the
// band below is wide because a 3,000-node graph has 6 batches an epoch.
func TestHistoryReusePredicted(t *testing.T) {
	d := smallSynth(t)
	n := d.NumNodes()
	o := synthOpts()
	o.Epochs = 8
	o.EvalEvery = 8
	ws := WorkingSet(d, o, nil)
	mem := MinimumBudget(d, o) + 8*n + 200*d.FeatRowBytes() + ws.Bytes + FixedState(d, o, nil).Bytes
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: "histpredict"}
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	mp.Apply(o, mo)
	rep := run(t, d, o)
	if rep.Plan == nil || rep.Plan.History.Entries == 0 {
		t.Fatalf("no history cache planned: %+v", rep.Plan)
	}
	pred := rep.Plan.Predicted.HistReusedNodes
	var sum float64
	var per []int64
	for _, e := range rep.Epochs {
		per = append(per, e.Reused)
		if e.Epoch >= 2 {
			sum += float64(e.Reused)
		}
	}
	got := sum / float64(len(rep.Epochs)-2)
	t.Logf("seed %d: predicted %.0f reused hop-1 nodes an epoch, measured %v (epochs 2–7: %.0f, ratio %.2f)", *seedFlag, pred, per, got, got/pred)
	if got < 0.7*pred || got > 1.4*pred {
		t.Errorf("reused %.0f an epoch after epoch 1, predicted %.0f (ratio %.2f, want 0.7–1.4)", got, pred, got/pred)
	}
}
