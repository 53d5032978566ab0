package train

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/planner"
)

// TestHistSkipsSampling: with history on, reused nodes are not expanded by
// the sampler, so it looks fewer neighbour lists up than --no-hist on the
// same seed.
func TestHistSkipsSampling(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	lookups := func(rep *Report) (n, storage, reused int64) {
		for _, e := range rep.Epochs {
			n += e.Lookups.Lookups
			storage += e.Lookups.Storage.Hits
			reused += e.Reused
		}
		return
	}
	o := synthOpts()
	o.NoHist = true
	exactN, exactS, _ := lookups(run(t, d, o))
	histN, histS, reused := lookups(run(t, d, synthOpts()))
	t.Logf("lookups: no-hist %d (storage %d), hist %d (storage %d), %d reused", exactN, exactS, histN, histS, reused)
	if reused == 0 || histN >= exactN || histS >= exactS {
		t.Errorf("history on: %d lookups (%d from storage) with %d reused, no-hist %d (%d)", histN, histS, reused, exactN, exactS)
	}
}

// TestPlanMemory: PlanMemory profiles and plans within the budget, New
// sizes the caches from the plan and stays within it, the report compares
// the prediction with the measured epochs; a budget below the tables fails
// before profiling, and explicit sizes that exceed the budget fail in New.
func TestPlanMemory(t *testing.T) {
	d := smallSynth(t)
	n := d.NumNodes()
	o := synthOpts()
	// The fanout bound is at least the profile's largest batch.
	ws := WorkingSet(d, o, nil)
	if ws.From != "fanouts" || ws.Bytes <= 0 || ws.InFlight != DefaultInFlight {
		t.Fatalf("working set without profile %+v", ws)
	}
	mem := 8*n + 200*d.FeatRowBytes() + ws.Bytes
	o.Epochs = 2
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: "memtest"}
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	if !mp.Created || mp.Profile == nil {
		t.Fatalf("plan %+v", mp)
	}
	if _, err := os.Stat(mp.PlanPath); err != nil {
		t.Fatal(err)
	}
	mp.Apply(o, mo)
	rep := run(t, d, o)
	if rep.Memory.TotalBytes > mem || rep.Memory.TotalBytes == 0 || rep.Plan == nil || rep.PlanComparison == nil || rep.PlanComparison.Epochs != 2 {
		t.Fatalf("memory %+v plan %v comparison %+v", rep.Memory, rep.Plan != nil, rep.PlanComparison)
	}
	if m := rep.Memory; m.WorkingSetBytes <= 0 || m.InFlight != DefaultInFlight || m.WorkingSetBytes != int64(m.InFlight)*m.BatchBytes ||
		m.BatchRows > ws.BatchRows || m.TotalBytes != m.FeatureBytes+m.HistoryBytes+m.NeighborBytes+m.WorkingSetBytes {
		t.Errorf("working set in the report %+v (fanout bound %+v)", m, ws)
	}
	if rep.Memory.FeatureBytes != rep.Plan.Feature.Bytes() && rep.Plan.Feature.Entries > 0 {
		t.Errorf("feature cache %d bytes, plan %d", rep.Memory.FeatureBytes, rep.Plan.Feature.Bytes())
	}
	// Reading the plan back gives the same plan and profile.
	mp2, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: mem, PlanFile: mp.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	if mp2.Created || mp2.Profile == nil || mp2.Plan.Alpha != mp.Plan.Alpha {
		t.Errorf("read plan: %+v", mp2)
	}

	_, err = PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: 4 * n})
	if !errors.Is(err, ErrBudget) || !errors.Is(err, planner.ErrBudget) {
		t.Errorf("tiny budget: %v", err)
	}
	// Room for the tables but not for one batch in flight: refused after
	// profiling, pointing at the batch size.
	_, err = PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: 8*n + 1000, ProfileName: "memtest-small"})
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "--batch-size") {
		t.Errorf("budget below the working set: %v", err)
	}
	o = synthOpts()
	o.MemBytes = 8*n + 1000
	if _, err := New(context.Background(), d, o); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "--batch-size") {
		t.Errorf("New with --mem below the working set: %v", err)
	}
	o = synthOpts()
	o.MemBytes, o.FeatCacheBytes = mem, 2*mem
	if _, err := New(context.Background(), d, o); !errors.Is(err, ErrBudget) {
		t.Errorf("explicit feature cache over --mem: %v", err)
	}
}
