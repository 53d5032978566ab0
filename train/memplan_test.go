package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// TestHistSkipsSampling: with history on, reused nodes are not expanded by
// the sampler, so it looks fewer neighbour lists up than --no-hist on the
// same seed.
func TestHistSkipsSampling(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	lookups := func(rep *Report) (n, storage, reused int64) {
		for _, e := range rep.Epochs {
			// The sampling workers' own time is recorded, history or not.
			if !(e.Stages.Sample > 0) {
				t.Errorf("epoch %d: sample stage %v s", e.Epoch, e.Stages.Sample)
			}
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
	mem := MinimumBudget(d, o) + 8*n + 200*d.FeatRowBytes() + ws.Bytes + FixedState(d, o, nil).Bytes
	o.Epochs = 2
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: "memtest"}
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	if !mp.Created || mp.Profile == nil {
		t.Fatalf("plan %+v", mp)
	}
	// The profile measured its batches' destinations per input row, and
	// the working set estimates with it (never above the bound).
	if r := mp.Profile.Meta.MaxDstPerRow; !(r > 0 && r <= 1) {
		t.Errorf("profile's destinations per row %v", r)
	}
	if _, err := os.Stat(mp.PlanPath); err != nil {
		t.Fatal(err)
	}
	if mp.Budget.Fixed.GatherSlotBytes != featurecache.GatherSlotBytes(d, &featurecache.Options{IODepth: GatherDepth(mem)}) {
		t.Errorf("read slots %d bytes: want GatherDepth(%d) = %d's", mp.Budget.Fixed.GatherSlotBytes, mem, GatherDepth(mem))
	}
	mp.Apply(o, mo)
	if w := o.withDefaults(); w.FeatIODepth != GatherDepth(mem) {
		t.Errorf("after Apply training reads at depth %d, the budget counted %d", w.FeatIODepth, GatherDepth(mem))
	}
	rep := run(t, d, o)
	// Two epochs, history on: the comparison leaves out epoch 0, whose
	// history cache starts empty, and says so.
	if rep.Memory.TotalBytes > mem || rep.Memory.TotalBytes == 0 || rep.Plan == nil || rep.PlanComparison == nil || rep.PlanComparison.Epochs != 1 ||
		!strings.Contains(rep.PlanComparison.Note, "epoch 0 left out") {
		t.Fatalf("memory %+v plan %v comparison %+v", rep.Memory, rep.Plan != nil, rep.PlanComparison)
	}
	if m := rep.Memory; m.WorkingSetBytes <= 0 || m.InFlight != DefaultInFlight || m.WorkingSetBytes != int64(m.InFlight)*m.BatchBytes+m.DynamicBytes+m.SamplerBytes+m.GatherBytes+m.FeatureBlockBytes+m.StreamBytes || m.GatherBytes <= 0 ||
		m.BatchRows > ws.BatchRows || m.FixedBytes != FixedState(d, o, nil).Bytes || m.FixedBytes <= 0 ||
		m.ReserveBytes != RuntimeReserve(mem) ||
		m.TotalBytes != m.FeatureBytes+m.HistoryBytes+m.NeighborBytes+m.WorkingSetBytes+m.FixedBytes+m.ReserveBytes {
		t.Errorf("working set in the report %+v (fanout bound %+v)", m, ws)
	}
	// The built cache holds at most the planned rows (the profiled policy
	// caches only nodes the profile saw).
	if rep.Memory.FeatureBytes > rep.Plan.Feature.Bytes() && rep.Plan.Feature.Entries > 0 {
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
	// With the plan given no profiling epoch runs: its room is not asked
	// for. A budget between the two minimums passes the minimum (the plan
	// may be re-divided for it), and the one below both names the plan's.
	least := synthOpts()
	least.InFlight = 1
	noProf, withProf := minimumBudgetWith(d, least, 0, false), minimumBudgetWith(d, least, 0, true)
	t.Logf("minimum with a plan file %d, with profiling %d", noProf, withProf)
	if noProf > withProf {
		t.Errorf("minimum with a plan file %d above the one with profiling %d", noProf, withProf)
	}
	if noProf < withProf {
		if _, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: noProf, PlanFile: mp.PlanPath}); err != nil && strings.Contains(err.Error(), "below the minimum") {
			t.Errorf("--mem %d (the plan file's minimum) refused: %v", noProf, err)
		}
	}
	if _, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: noProf - 1, PlanFile: mp.PlanPath}); err == nil ||
		!strings.Contains(err.Error(), "minimum of "+ibytesUp(noProf)) || !strings.Contains(err.Error(), "the saved profile read back") {
		t.Errorf("--mem one byte below the plan file's minimum: %v", err)
	}
	// A plan for another dataset, or one edited past what a plan can
	// hold, is refused naming the file (not as a checkpoint mismatch).
	for _, tc := range []struct {
		edit func(p *planner.PlanResult)
		is   error
		want string
	}{
		{func(p *planner.PlanResult) { p.NumNodes++ }, ErrPlanMismatch, fmt.Sprintf("is for %d nodes", n+1)},
		{func(p *planner.PlanResult) { p.FeatRowBytes++ }, ErrPlanMismatch, "feature rows of"},
		{func(p *planner.PlanResult) { p.Alpha = 7 }, planner.ErrBadPlan, `field "alpha" is 7`},
	} {
		p := *mp.Plan
		tc.edit(&p)
		path := filepath.Join(t.TempDir(), "plan.json")
		if err := p.Save(path); err != nil {
			t.Fatal(err)
		}
		_, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: mem, PlanFile: path})
		if !errors.Is(err, tc.is) || errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("edited plan: %v, want %v naming %s and %q", err, tc.is, path, tc.want)
		}
	}
	// A plan divided for other embeddings than training keeps: a warning
	// naming both widths. plan's default width is train's.
	if planner.DefaultHidden != DefaultHidden {
		t.Errorf("plan's default hidden width %d, train's %d", planner.DefaultHidden, DefaultHidden)
	}
	wide := *mp.Plan
	wide.Hidden = 4 * synthOpts().Hidden
	widePath := filepath.Join(t.TempDir(), "plan.json")
	if err := wide.Save(widePath); err != nil {
		t.Fatal(err)
	}
	wp, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: mem, PlanFile: widePath})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("embeddings of width %d, this training's are %d wide", wide.Hidden, synthOpts().Hidden); !strings.Contains(wp.Warning, want) {
		t.Errorf("plan for wider embeddings: warning %q, want %q", wp.Warning, want)
	}

	_, err = PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: 4 * n})
	if !errors.Is(err, ErrBudget) || !errors.Is(err, planner.ErrBudget) || !strings.Contains(err.Error(), "minimum of "+ibytesUp(MinimumBudget(d, synthOpts()))) {
		t.Errorf("tiny budget: %v", err)
	}
	// Just above the minimum: batches are cut into micro-batches, and
	// training runs inside the budget.
	// On this tiny graph the 24 MiB reserve floor alone exceeds what a
	// split could save; lower it to reach budgets that split batches.
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	so := synthOpts()
	so.BatchSize, so.Epochs = 400, 1
	small := MinimumBudget(d, so) + 64<<10
	smo := &MemPlanOptions{MemBytes: small, ProfileName: "memtest-small"}
	smp, err := PlanMemory(context.Background(), d, so, smo)
	if err != nil {
		t.Fatalf("budget just above the minimum: %v", err)
	}
	if smp.Budget == nil || smp.Budget.MaxBatchRows <= 0 || smp.Budget.MicroBatches < 2 {
		t.Fatalf("budget just above the minimum planned no micro-batches: %+v", smp.Budget)
	}
	smp.Apply(so, smo)
	srep := run(t, d, so)
	if e := srep.Epochs[0]; e.MicroBatches <= e.Batches || srep.Memory.TotalBytes > small {
		t.Errorf("small budget: %d batches as %d micro-batches, memory %+v of %d", e.Batches, e.MicroBatches, srep.Memory, small)
	}
	// Below the minimum: refused before anything is built, naming it.
	o = synthOpts()
	o.MemBytes = 8*n + 1000
	if _, err := New(context.Background(), d, o); !errors.Is(err, ErrBudget) {
		t.Errorf("New with --mem below the minimum: %v", err)
	}
	o = synthOpts()
	o.BatchSize = so.BatchSize
	o.MemBytes, o.FeatCacheBytes = small, 2*mem
	if _, err := New(context.Background(), d, o); !errors.Is(err, ErrBudget) {
		t.Errorf("explicit feature cache over --mem: %v", err)
	}
}

func TestKeptProfile(t *testing.T) {
	if keptProfile(nil, 1) != nil {
		t.Fatal("keptProfile(nil) != nil")
	}
	a := []uint32{1}
	p := &planner.Profile{Meta: planner.Meta{NumNodes: 1}, Feat: a, HistSample: a, HistGather: a, Nbr: a, HistAppear: a, HistHits: a}
	k := keptProfile(p, 2)
	if k.Meta.NumNodes != 1 || k.Feat == nil || len(k.HistScores) != 1 || k.HistSample != nil || k.HistGather != nil || k.Nbr != nil || k.HistAppear != nil || k.HistHits != nil {
		t.Errorf("keptProfile = %+v", k)
	}
	// The kept scores are the plan's ranking: (β·S + G) × hits/appearances.
	if k.HistScores[0] != float32((2*1+1)*1.0) {
		t.Errorf("kept history score %v, want (2·1+1)·1/1 = 3", k.HistScores[0])
	}
	if p.Nbr == nil {
		t.Error("keptProfile changed its argument")
	}
}

// TestWorkingSetDynamic: in partition selection the working set reserves
// one per worker of the profile's largest macro-batch neighbour cache
// (sample.MacroCachesHeld; TestMacroCachesAlive checks it) beside
// the batches in flight; random selection reserves none. Each sampling
// worker's batch is bounded at the most targets a batch of the selection
// holds (sample.MaxBatchTargets: partition batches may exceed BatchSize).
func TestWorkingSetDynamic(t *testing.T) {
	d := smallSynth(t)
	const dyn = 12345
	p := &planner.Profile{Meta: planner.Meta{BatchSize: 50, Fanouts: []int{5, 5}, Batches: 4, MaxBatchRows: 700, MaxDynamicBytes: dyn}}
	for _, tc := range []struct {
		sel     sample.Mode
		workers int
		want    int64
	}{
		{sample.ModeRandom, 2, 0},
		{sample.ModePartition, 2, 2 * dyn},
		{sample.ModePartition, 5, 5 * dyn},
	} {
		o := synthOpts()
		o.Selection, o.Workers = tc.sel, tc.workers
		ws := WorkingSet(d, o, p)
		if ws.From != "profile" || ws.BatchRows != 700 || ws.DynamicBytes != tc.want || ws.SamplerBytes != int64(tc.workers)*sample.WorkerBytesBound(int64(sample.MaxBatchTargets(o.BatchSize, tc.sel)), o.Fanouts, d.NumNodes(), d.NumEdges(), o.Source) ||
			ws.Bytes != int64(ws.InFlight)*ws.BatchBytes+tc.want+ws.SamplerBytes+ws.GatherBytes || ws.GatherBytes <= 0 {
			t.Errorf("%s, %d workers: %+v, want %d dynamic bytes", tc.sel, tc.workers, ws, tc.want)
		}
	}
}

// TestPlanMemoryReusesProfile: without a plan file, PlanMemory plans from
// the profile an earlier run saved when it matches, so two runs with the
// same options and seed plan the same caches (β included) and train
// alike; the saved profile stays whole-batch when a budget cuts batches;
// Reprofile, or another seed, profiles again.
func TestPlanMemoryReusesProfile(t *testing.T) {
	d := smallSynth(t)
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	big := func(o *Options) int64 {
		return MinimumBudget(d, o) + 8*d.NumNodes() + 200*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes + FixedState(d, o, nil).Bytes
	}
	small := func(o *Options) int64 { return MinimumBudget(d, o) + 64<<10 }
	for _, c := range []struct {
		name  string
		batch int
		mem   func(*Options) int64
		micro bool
	}{
		{"whole batches", 50, big, false},
		{"micro-batches", 400, small, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := func() *Options {
				o := synthOpts()
				o.BatchSize, o.Epochs = c.batch, 1
				return o
			}
			mem := c.mem(opts())
			name := "reuse-" + strings.ReplaceAll(c.name, " ", "-")
			plan := func(o *Options, reprofile bool) (*MemPlan, []byte) {
				t.Helper()
				mo := &MemPlanOptions{MemBytes: mem, ProfileName: name, Reprofile: reprofile}
				mp, err := PlanMemory(context.Background(), d, o, mo)
				if err != nil {
					t.Fatal(err)
				}
				js, err := os.ReadFile(mp.PlanPath)
				if err != nil {
					t.Fatal(err)
				}
				mp.Apply(o, mo)
				return mp, js
			}
			o1 := opts()
			first, js1 := plan(o1, true)
			if !first.Created || first.Reused {
				t.Fatalf("Reprofile: created %v reused %v", first.Created, first.Reused)
			}
			if got := first.Budget.MicroBatches >= 2; got != c.micro {
				t.Fatalf("budget cuts %d micro-batches, want cut %v", first.Budget.MicroBatches, c.micro)
			}
			saved, err := planner.LoadProfile(d.Dir(), name)
			if err != nil {
				t.Fatal(err)
			}
			if saved.Meta.Reads == nil || saved.Meta.Reads.MicroBatchRows != 0 {
				t.Fatalf("saved profile's reads %+v, want whole batches", saved.Meta.Reads)
			}
			o2 := opts()
			second, js2 := plan(o2, false)
			if !second.Reused || !second.Created {
				t.Fatalf("second run: created %v reused %v", second.Created, second.Reused)
			}
			if string(js1) != string(js2) || first.Plan.Beta != second.Plan.Beta {
				t.Fatalf("plans differ:\n%s\n%s", js1, js2)
			}
			r1, r2 := run(t, d, o1), run(t, d, o2)
			if l1, l2 := r1.Epochs[0].Loss, r2.Epochs[0].Loss; l1 != l2 || r1.Epochs[0].ValidAcc != r2.Epochs[0].ValidAcc {
				t.Errorf("same seed, reused profile: loss %v and %v, valid %v and %v", l1, l2, r1.Epochs[0].ValidAcc, r2.Epochs[0].ValidAcc)
			}
			// With the saved profile reused, the profiling epoch's room is
			// not asked for: the minimum without it plans.
			least := opts()
			least.InFlight = 1
			noProf, withProf := minimumBudgetWith(d, least, 0, false), minimumBudgetWith(d, least, 0, true)
			if noProf < withProf {
				if _, err := PlanMemory(context.Background(), d, opts(), &MemPlanOptions{MemBytes: noProf, ProfileName: name}); err != nil && strings.Contains(err.Error(), "below the minimum") {
					t.Errorf("--mem %d (the minimum with the saved profile) refused: %v", noProf, err)
				}
			}
			if _, err := PlanMemory(context.Background(), d, opts(), &MemPlanOptions{MemBytes: noProf - 1, ProfileName: name}); err == nil || !strings.Contains(err.Error(), "below the minimum") {
				t.Errorf("--mem one byte below the minimum with the saved profile: %v", err)
			}
			o3 := opts()
			o3.Seed++
			third, _ := plan(o3, false)
			if third.Reused || !third.Created {
				t.Errorf("another seed reused the profile")
			}
		})
	}
}

// TestInFlightChosenByBudget: with Options.InFlight left 0, a budget under
// which two batches in flight would be cut into micro-batches and one
// would not trains with one, whole; a roomy budget keeps two; an explicit
// InFlight is kept. CacheShare agrees with PlanMemory's division.
func TestInFlightChosenByBudget(t *testing.T) {
	d := smallSynth(t)
	defer func(f int64) { reserveFloor = f }(reserveFloor)
	reserveFloor = 1 << 20
	opts := func() *Options {
		o := synthOpts()
		// Not streamed: on this small graph a batch's input set nears
		// all nodes, so the streamed cut's destination bound
		// (batchDst) would cut batches that the rows bound keeps whole.
		o.BatchSize, o.Epochs, o.StreamInput = 400, 1, StreamInputOff
		return o
	}
	const name = "inflight"
	roomy := MinimumBudget(d, opts()) + 8*d.NumNodes() + 4000*d.FeatRowBytes() + 2*WorkingSet(d, opts(), nil).Bytes + FixedState(d, opts(), nil).Bytes
	mp, err := PlanMemory(context.Background(), d, opts(), &MemPlanOptions{MemBytes: roomy, ProfileName: name, Reprofile: true})
	if err != nil {
		t.Fatal(err)
	}
	if ws := mp.Budget.WorkingSet; ws.InFlight != DefaultInFlight || mp.Budget.MicroBatches != 1 {
		t.Fatalf("roomy budget: %d in flight, %d micro-batches", ws.InFlight, mp.Budget.MicroBatches)
	}
	p, err := planner.LoadProfile(d.Dir(), name)
	if err != nil {
		t.Fatal(err)
	}
	// The least budget under which one batch in flight is whole.
	one := opts().withDataset(d, p)
	one.InFlight = 1
	two := one
	two.InFlight = 2
	var mem int64
	for m := MinimumBudget(d, &one); m < roomy; m += 4 << 10 {
		// The read slots at the depth PlanMemory gives m.
		one.FeatIODepth, two.FeatIODepth = GatherDepth(m), GatherDepth(m)
		if b, err := divide(d, &one, p, m); err == nil && b.MicroBatches == 1 {
			mem = m
			break
		}
	}
	if mem == 0 {
		t.Fatal("no budget below the roomy one keeps one batch in flight whole")
	}
	if b, err := divide(d, &two, p, mem); err == nil && b.MicroBatches <= 1 {
		t.Fatalf("at %d bytes two batches in flight are whole too: nothing to choose", mem)
	}
	o := opts()
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: name}
	mp, err = PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	if ws := mp.Budget.WorkingSet; ws.InFlight != 1 || mp.Budget.MicroBatches != 1 {
		t.Fatalf("tight budget: %d in flight, %d micro-batches; want 1 whole", ws.InFlight, mp.Budget.MicroBatches)
	}
	mp.Apply(o, mo)
	if o.InFlight != 1 {
		t.Fatalf("Apply left InFlight %d", o.InFlight)
	}
	rep := run(t, d, o)
	if e := rep.Epochs[0]; rep.Memory.InFlight != 1 || rep.Memory.TotalBytes > mem || e.MicroBatches > e.Batches {
		t.Errorf("trained with %d in flight, %d of %d bytes, %d batches as %d micro-batches", rep.Memory.InFlight, rep.Memory.TotalBytes, mem, e.Batches, e.MicroBatches)
	}
	// Asked for two: kept, and cut.
	o = opts()
	o.InFlight = 2
	mp, err = PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: name})
	if err != nil {
		t.Fatal(err)
	}
	if ws := mp.Budget.WorkingSet; ws.InFlight != 2 || mp.Budget.MicroBatches < 2 {
		t.Errorf("explicit two in flight: %d in flight, %d micro-batches", ws.InFlight, mp.Budget.MicroBatches)
	}
	// A plan file whose caches two in flight would leave short, with
	// batches whole either way: one in flight keeps the plan.
	w := opts().withDataset(d, p)
	two2, err := budgetFor(d, &w, p, roomy, true, 0)
	if err != nil || w.InFlight != 2 || two2.MicroBatches != 1 {
		t.Fatalf("roomy budget, no plan: %v, %d in flight, %d micro-batches", err, w.InFlight, two2.MicroBatches)
	}
	w = opts().withDataset(d, p)
	short, err := budgetFor(d, &w, p, roomy, true, two2.Caches+1)
	if err != nil || w.InFlight != 1 || short.WorkingSet.InFlight != 1 || short.Caches <= two2.Caches || short.MicroBatches != 1 {
		t.Errorf("plan's caches %d over two in flight's %d: %v, %d in flight, caches %d", two2.Caches+1, two2.Caches, err, w.InFlight, short.Caches)
	}
	w = opts().withDataset(d, p)
	if b, err := budgetFor(d, &w, p, roomy, true, short.Caches+1); err != nil || w.InFlight != 1 || b.Caches != short.Caches {
		t.Errorf("plan's caches fit neither: %v, %d in flight (one leaves more)", err, w.InFlight)
	}
	// CacheShare is the caches' share PlanMemory divides, in flight
	// chosen or given.
	for _, m := range []int64{roomy, mem} {
		for _, inFlight := range []int{0, 2} {
			o := opts()
			o.InFlight = inFlight
			share, err := CacheShare(d, o, p, m)
			if err != nil {
				t.Fatal(err)
			}
			mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: m, ProfileName: name})
			if err != nil {
				t.Fatal(err)
			}
			if share != mp.Budget.Caches || share <= 0 {
				t.Errorf("--mem %d, in flight %d: CacheShare %d, PlanMemory's caches %d", m, inFlight, share, mp.Budget.Caches)
			}
		}
	}
}

// TestPlanMemoryFewerWorkers: on many cores the sampling workers alone
// (each holds a batch under construction) can pass --mem. Left to the
// budget (Workers 0), PlanMemory takes fewer of them rather than refuse,
// and Apply hands that count to training; named explicitly, the count
// stands and the budget refuses. (Seen on a 16-core GPU machine: a 1.5 GiB
// dataset under --mem 1GiB was refused with a minimum of 2.4 GiB.)
func TestPlanMemoryFewerWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	d := smallSynth(t)
	o := synthOpts()
	o.Epochs, o.Workers = 1, 0 // left to the budget
	at := func(w int) int64 {
		l := *o
		l.Workers = w
		if l.InFlight == 0 {
			l.InFlight = 1
		}
		return MinimumBudget(d, &l)
	}
	mem, all := at(3), at(16)
	if all <= mem {
		t.Fatalf("minimum %d with 16 workers, %d with 3: workers cost nothing?", all, mem)
	}
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: "workers"}
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatalf("--mem %d (16 workers need %d): %v", mem, all, err)
	}
	w := mp.Budget.Fixed.Workers
	if w < 1 || w >= 16 {
		t.Fatalf("budget counted %d workers, want 1..15", w)
	}
	mp.Apply(o, mo)
	if o.Workers != w {
		t.Fatalf("after Apply training samples with %d workers, the budget counted %d", o.Workers, w)
	}
	if rep := run(t, d, o); rep.Memory.TotalBytes > mem {
		t.Errorf("trained at %d bytes, budget %d", rep.Memory.TotalBytes, mem)
	}
	// Below one worker's minimum the refusal names that minimum, not the
	// one with a worker per core.
	o2 := synthOpts()
	o2.Workers = 0
	_, err = PlanMemory(context.Background(), d, o2, &MemPlanOptions{MemBytes: at(1) - 1, ProfileName: "workers"})
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "minimum of "+ibytesUp(at(1))) {
		t.Errorf("--mem one byte below one worker's minimum %d: %v", at(1), err)
	}
	named := synthOpts()
	named.Workers = 16
	if _, err := PlanMemory(context.Background(), d, named, &MemPlanOptions{MemBytes: mem, ProfileName: "workers"}); !errors.Is(err, ErrBudget) {
		t.Errorf("--workers 16 under --mem %d (minimum %d): %v, want ErrBudget", mem, all, err)
	}
}

// footprint is a backend that reports host memory of its own.
type footprint struct {
	kernels.Backend
	bytes int64
}

func (f footprint) HostBytes() int64 { return f.bytes }

// TestLessBackend: a backend's own host memory (a GPU driver's context) is
// taken out of the budget before planning; a backend without it, or no
// budget, leaves mem as it is; a budget the backend fills is refused.
func TestLessBackend(t *testing.T) {
	be, err := cpu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, tc := range []struct {
		name      string
		be        kernels.Backend
		mem, want int64
		note, err bool
	}{
		{"cpu", be, 1 << 30, 1 << 30, false, false},
		{"no budget", footprint{be, 200 << 20}, 0, 0, false, false},
		{"nothing held", footprint{be, 0}, 1 << 30, 1 << 30, false, false},
		{"driver", footprint{be, 200 << 20}, 1 << 30, 824 << 20, true, false},
		{"fills it", footprint{be, 1 << 30}, 1 << 30, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note, err := LessBackend(tc.be, tc.mem)
			if (err != nil) != tc.err || (tc.err && !errors.Is(err, ErrBudget)) {
				t.Fatalf("err %v", err)
			}
			if got != tc.want || (note != "") != tc.note {
				t.Errorf("LessBackend(%d) = %d, %q; want %d (note %v)", tc.mem, got, note, tc.want, tc.note)
			}
		})
	}
}

// TestWorkersChosenByBudget: with Options.Workers left 0, a budget under
// which a worker per core (16) cuts batches into micro-batches, or leaves
// room for one in flight only, trains with fewer workers that keep them
// whole with two in flight; given workers are kept.
func TestWorkersChosenByBudget(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	d, opts, roomy, p := workersFixture(t, "workers-budget")
	at := func(workers int, m int64) (*Budget, *Options) {
		o := opts().withDataset(d, p)
		o.Workers, o.FeatIODepth = workers, GatherDepth(m)
		b, err := budgetFor(d, &o, p, m, true, 0)
		if err != nil {
			return nil, &o
		}
		return b, &o
	}
	// The least budget under which one worker keeps two batches whole.
	var mem int64
	for m := int64(1 << 20); m < roomy; m += 16 << 10 {
		if b, _ := at(1, m); b != nil && b.MicroBatches == 1 && b.WorkingSet.InFlight == 2 {
			mem = m
			break
		}
	}
	if mem == 0 {
		t.Fatal("no budget below the roomy one keeps two batches whole with one worker")
	}
	if b, _ := at(16, mem); b != nil && b.MicroBatches == 1 && b.WorkingSet.InFlight == 2 {
		t.Fatalf("at %d bytes 16 workers keep two batches whole too: nothing to choose", mem)
	}
	o := opts().withDataset(d, p)
	o.FeatIODepth = GatherDepth(mem)
	b, err := budgetWorkers(d, &o, p, mem, true, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if b.MicroBatches != 1 || b.WorkingSet.InFlight != 2 || o.Workers < 1 || o.Workers >= 16 || b.Fixed.Workers != o.Workers || o.InFlight != 2 {
		t.Errorf("chosen: %d workers (budget's %d), %d micro-batches, %d in flight (o %d); want fewer than 16, whole, two",
			o.Workers, b.Fixed.Workers, b.MicroBatches, b.WorkingSet.InFlight, o.InFlight)
	}
	// The most such workers: one more would not keep two whole.
	if more, _ := at(o.Workers+1, mem); more != nil && more.MicroBatches == 1 && more.WorkingSet.InFlight == 2 {
		t.Errorf("%d workers chosen, but %d also keep two batches whole", o.Workers, o.Workers+1)
	}
	// Given: kept.
	g := opts().withDataset(d, p)
	g.Workers, g.FeatIODepth = 16, GatherDepth(mem)
	if _, err := budgetWorkers(d, &g, p, mem, true, 0, false); err == nil && g.Workers != 16 {
		t.Errorf("given 16 workers, budget chose %d", g.Workers)
	}
}

// TestPlanComparisonResumed: after a mid-epoch resume, the comparison with
// the plan leaves the partial epoch out (it ran only its last batches, and
// averaged as a whole epoch pulled every figure down) and says so.
func TestPlanComparisonResumed(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	mem := MinimumBudget(d, o) + 8*d.NumNodes() + 200*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes + FixedState(d, o, nil).Bytes
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: "resumetest"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o.Epochs, o.CheckpointDir, o.BatchSize = 4, dir, 20
	mp.Apply(o, &MemPlanOptions{MemBytes: mem})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	epochs := 0
	o.OnEpoch = func(EpochStats) { epochs++ }
	o.Progress = cancelAfter{fn: func(n int64) {
		if epochs == 1 && n == 3 {
			cancel() // epoch 1, after a few batches
		}
	}}
	rep := runInterrupted(t, ctx, d, o)
	o.Resume, o.Progress, o.OnEpoch = dir, nil, nil
	rep = run(t, d, o)
	// The report lists the checkpoint's epochs too: epoch 0, then the
	// resumed epoch 1 and the whole epochs 2 and 3.
	if len(rep.Epochs) != 4 || rep.Epochs[0].ResumedAt != 0 || rep.Epochs[1].ResumedAt == 0 || rep.Epochs[2].ResumedAt != 0 ||
		rep.Epochs[1].Batches+rep.Epochs[1].ResumedAt != rep.Epochs[2].Batches {
		t.Fatalf("resumed epochs %+v", rep.Epochs)
	}
	c := rep.PlanComparison
	if c == nil || c.Epochs != 2 || !strings.Contains(c.Note, fmt.Sprintf("epoch 1 left out: resumed at batch %d", rep.Epochs[1].ResumedAt)) {
		t.Errorf("comparison %+v, want epochs 2 and 3 compared and the partial epoch 1 left out", c)
	}
}

// TestProfileMinimumBudget: a profiling epoch alone never needs more than
// the training that profiles first (MinimumBudget counts the same epoch
// beside the model and fixed state), fewer sampling workers need less and
// more profiled epochs more (the appearance log), and the reserve floor
// stays (sweep 26, P8: ssdgnn profile was OOM-killed where train refused).
func TestProfileMinimumBudget(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	one, two := *o, *o
	one.Workers, two.Workers = 1, 2
	p1, p2 := ProfileMinimumBudget(d, &one, 1), ProfileMinimumBudget(d, &two, 1)
	if !(p1 < p2) || p2 > MinimumBudget(d, &two) || p1 < reserveFloor {
		t.Errorf("profile minimum %d (1 worker), %d (2 workers), training's %d, floor %d", p1, p2, MinimumBudget(d, &two), reserveFloor)
	}
	if p3 := ProfileMinimumBudget(d, &two, 3); !(p3 > p2) {
		t.Errorf("3 profiled epochs need %d, 1 needs %d", p3, p2)
	}
}

// TestMemAboveMachine: a budget above the machine's memory is said, with
// both sizes; one within it, or unknown sizes, are not.
func TestMemAboveMachine(t *testing.T) {
	for _, tc := range []struct {
		mem, total int64
		want       string
	}{
		{100 << 30, 23 << 30, "--mem 100 GiB exceeds this machine's memory (23 GiB)"},
		{23 << 30, 23 << 30, ""},
		{1 << 30, 23 << 30, ""},
		{0, 23 << 30, ""},
		{100 << 30, 0, ""},
	} {
		if got := memAboveMachine(tc.mem, tc.total); tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("mem %d, total %d: %q, want %q", tc.mem, tc.total, got, tc.want)
		}
	}
	if got := MemAboveMachine(1 << 60); memstat.Total() > 0 && got == "" {
		t.Error("--mem 1 EiB not said to exceed this machine's memory")
	}
}

// TestPlanComparisonNoHist: a plan with a history cache compared with a
// training that has history off says so, instead of listing the history's
// predictions against nothing as if they were misses.
func TestPlanComparisonNoHist(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	mem := MinimumBudget(d, o) + 8*d.NumNodes() + 200*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes + FixedState(d, o, nil).Bytes
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: "nohisttest"})
	if err != nil {
		t.Fatal(err)
	}
	if mp.Plan.History.Entries == 0 {
		t.Skip("the plan has no history cache")
	}
	o = synthOpts()
	o.Epochs, o.NoHist = 2, true
	mp.Apply(o, &MemPlanOptions{MemBytes: mem})
	rep := run(t, d, o)
	if c := rep.PlanComparison; c == nil || !strings.Contains(c.Note, "history off") || strings.Contains(c.Note, "history cache starts empty") {
		t.Errorf("comparison %+v: want the note to say history is off, not that it starts empty", c)
	}
}

// TestPlanProfileSavedAgain: a plan records the run that made its profile;
// read with the profile saved again under the name since (another
// training's --mem re-profiles into "train"), training warns that the
// plan was divided for other counts, and not when it is the same profile
// (sweep 26, T17: the old plan was read with the new counts silently).
func TestPlanProfileSavedAgain(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	mem := MinimumBudget(d, o) + 8*d.NumNodes() + 200*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes + FixedState(d, o, nil).Bytes
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if mp.Plan.ProfileID == "" {
		t.Fatal("the plan records no profile id")
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := mp.Plan.Save(path); err != nil {
		t.Fatal(err)
	}
	warning := func() string {
		mp, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{PlanFile: path})
		if err != nil {
			t.Fatal(err)
		}
		return mp.Warning
	}
	if w := warning(); strings.Contains(w, "saved again") {
		t.Errorf("the plan's own profile: %q", w)
	}
	p, err := planner.LoadProfile(d.Dir(), "again")
	if err != nil {
		t.Fatal(err)
	}
	p.Meta.RunID = "0123456789abcdef"
	if err := p.Save(d.Dir()); err != nil {
		t.Fatal(err)
	}
	if w := warning(); !strings.Contains(w, `profile "again" has been saved again`) {
		t.Errorf("profile saved again: warning %q", w)
	}
}

// TestSamplingMinimumCountsNeighborCache: rr's and profile's least memory
// holds the global neighbour cache they build (--neighbor-cache); without
// it, rr --neighbor-cache 512MiB passed the fit in a 64 MiB cgroup and was
// OOM-killed (review 26, R6).
func TestSamplingMinimumCountsNeighborCache(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	nc := *o
	nc.NeighborCacheBytes = 64 << 20
	if got, base := SamplingMinimumBudget(d, &nc), SamplingMinimumBudget(d, o); got < base+nc.NeighborCacheBytes {
		t.Errorf("sampling least %d with a 64 MiB neighbour cache, %d without", got, base)
	}
	if got, base := ProfileMinimumBudget(d, &nc, 1), ProfileMinimumBudget(d, o, 1); got < base+nc.NeighborCacheBytes {
		t.Errorf("profile least %d with a 64 MiB neighbour cache, %d without", got, base)
	}
}

// TestStreamedBatchesWholeWithRoom: with the streamed input layer, a
// budget with room keeps batches whole where 2·rows/(1+fanout₀) would cut
// them: the destination estimate is the profile's measured ratio
// (batchDst), and the room the caches leave raises the bound beyond it
// (Budget.MaxBatchDst); the plan's read model predicts the reads of that
// cut exactly (no cache, no history). Before, under --mem 2GiB on this
// 50,000-node graph every batch was cut in two, and training differed
// from the unbudgeted run (sweep 26, T16).
func TestStreamedBatchesWholeWithRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and trains a 50,000-node graph")
	}
	d := dataset(t, "room50k", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: 50000, Seed: 1}, nil)
		return err
	})
	train := func(noRoom bool) (*MemPlan, EpochStats, int64) {
		testNoDstRoom = noRoom
		defer func() { testNoDstRoom = false }()
		opts := func() *Options {
			return &Options{Model: ModelSAGE, Epochs: 1, Seed: 5, NoHist: true, StreamInput: StreamInputOn, Workers: 2,
				Selection: sample.ModeRandom, FeatCacheBytes: -1, NeighborCacheBytes: -1, EvalEvery: 100}
		}
		mp, err := PlanMemory(context.Background(), d, opts(), &MemPlanOptions{MemBytes: 2 << 30, ProfileName: fmt.Sprintf("room%v", noRoom)})
		if err != nil {
			t.Fatal(err)
		}
		o := opts()
		mp.Apply(o, nil)
		var dst int64
		defer func() { testBatchDone = nil }()
		testBatchDone = func(hb *hostBatch, last bool) { dst = max(dst, int64(hb.blocks[0].NumDst)) }
		return mp, run(t, d, o).Epochs[0], dst
	}
	mp, e, dst := train(true)
	if formula := 2*mp.Budget.MaxBatchRows/11 + 1; dst <= formula {
		t.Errorf("%d destinations at most, within the formula's %d: the test shows nothing", dst, formula)
	}
	if e.MicroBatches != 0 {
		t.Errorf("without the room: %d micro-batches, want whole batches (the profile's ratio)", e.MicroBatches)
	}
	mp, e, _ = train(false)
	if mp.Budget.MaxBatchDst == 0 || e.MicroBatches != 0 {
		t.Errorf("room for %d destinations: %d micro-batches, want whole batches", mp.Budget.MaxBatchDst, e.MicroBatches)
	}
	if r := mp.Plan.Reads; r == nil || float64(r.Reads) != e.Measured.GatherReads || float64(r.BytesRead) != e.Measured.GatherBytesRead {
		t.Errorf("read model %+v, training %.0f reads, %.0f bytes", r, e.Measured.GatherReads, e.Measured.GatherBytesRead)
	}
}

// TestWorkersCutIndependentOfCores: where every worker count cuts batches
// into micro-batches, the cut (the rows a micro-batch may hold) is the one
// a single core's plan makes, so the results, which depend on the cut
// through the micro-batches' dropout masks, do not depend on the cores.
// Four cores used to keep four workers when the estimate's micro-batch
// count tied with one worker's, and cut each batch of the 50,000-node
// test graph under --mem 64MiB into 8 micro-batches instead of 4
// (a different loss and accuracy than with GOMAXPROCS=1).
func TestWorkersCutIndependentOfCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	d, opts, roomy, p := workersFixture(t, "workers-cut")
	plan := func(cores int, m int64) (*Budget, int) {
		runtime.GOMAXPROCS(cores)
		o := opts().withDataset(d, p)
		o.FeatIODepth = GatherDepth(m)
		b, err := budgetWorkers(d, &o, p, m, true, 0, true)
		if err != nil {
			return nil, 0
		}
		return b, o.Workers
	}
	cut := 0
	for m := int64(1 << 20); m < roomy; m += 32 << 10 {
		b4, w4 := plan(4, m)
		if b4 == nil || b4.MicroBatches <= 1 {
			continue
		}
		b1, _ := plan(1, m)
		if b1 == nil {
			t.Fatalf("%d bytes: four cores plan %d workers, one core none", m, w4)
		}
		cut++
		if b4.MaxBatchRows != b1.MaxBatchRows || b4.MicroBatches != b1.MicroBatches {
			t.Errorf("%d bytes: four cores: %d workers, ≥%d micro-batches of ≤%d rows; one core: ≥%d of ≤%d",
				m, w4, b4.MicroBatches, b4.MaxBatchRows, b1.MicroBatches, b1.MaxBatchRows)
		}
	}
	if cut == 0 {
		t.Fatal("no budget cut batches: nothing checked")
	}
	t.Logf("%d budgets that cut batches checked", cut)
}

// workersFixture is the set-up of the worker-count tests: the small
// graph, RuntimeReserve's floor lowered to 1 MiB for the test, options of
// 400-target batches without streamed input or --workers, a budget roomy
// enough for whole batches, and the profile PlanMemory takes under it
// (saved as name).
func workersFixture(t *testing.T, name string) (d *storage.Dataset, opts func() *Options, roomy int64, p *planner.Profile) {
	t.Helper()
	d = smallSynth(t)
	floor := reserveFloor
	t.Cleanup(func() { reserveFloor = floor })
	reserveFloor = 1 << 20
	opts = func() *Options {
		o := synthOpts()
		o.BatchSize, o.Epochs, o.StreamInput, o.Workers = 400, 1, StreamInputOff, 0
		return o
	}
	roomy = 4 * (MinimumBudget(d, opts()) + 8*d.NumNodes() + 4000*d.FeatRowBytes() + 2*WorkingSet(d, opts(), nil).Bytes + FixedState(d, opts(), nil).Bytes)
	if _, err := PlanMemory(context.Background(), d, opts(), &MemPlanOptions{MemBytes: roomy, ProfileName: name, Reprofile: true}); err != nil {
		t.Fatal(err)
	}
	p, err := planner.LoadProfile(d.Dir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return d, opts, roomy, p
}

// TestPlanMemorySourceAuto: a budget below the minimum of the neighbour
// reads auto chose (batched: their buffers are the budget's) but above the
// mapping's is planned through the mapping when the source was auto's
// (MemPlan.SourceMmap, Apply sets it), and refused naming the batched
// minimum when --source was given; below both, the refusal names the
// mapping's, the lower, at which auto's choice then fits. Before, in a
// 72 MiB cgroup `train --mem 20MiB` named 71.6 MiB and `--mem 71.6MiB`
// named 94.7 MiB (auto chose batched reads for the smaller page-cache room).
func TestPlanMemorySourceAuto(t *testing.T) {
	d := smallSynth(t)
	opts := func(src sample.Source) *Options {
		o := synthOpts()
		o.Epochs, o.InFlight, o.Workers, o.Source = 1, 1, 1, src
		return o
	}
	least := func(src sample.Source) int64 {
		o := opts(src).withDataset(d, nil)
		return minimumBudgetWith(d, &o, 0, true)
	}
	batched, mapped := least(sample.SourceBatch), least(sample.SourceMmap)
	if mapped >= batched {
		t.Fatalf("least budget %d through the mapping, %d batched: the test needs batched reads to cost more", mapped, batched)
	}
	mem := (mapped + batched) / 2
	_, err := PlanMemory(context.Background(), d, opts(sample.SourceBatch), &MemPlanOptions{MemBytes: mem, ProfileName: "src-given"})
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "minimum of "+ibytesUp(batched)) {
		t.Errorf("--source batch under %d (batched minimum %d): %v", mem, batched, err)
	}
	mp, err := PlanMemory(context.Background(), d, opts(sample.SourceBatch), &MemPlanOptions{MemBytes: mem, ProfileName: "src-auto", SourceAuto: true})
	if err != nil {
		t.Fatalf("auto's batched reads under %d (the mapping's minimum %d): %v", mem, mapped, err)
	}
	o := opts(sample.SourceBatch)
	mp.Apply(o, nil)
	if !mp.SourceMmap || o.Source != sample.SourceMmap {
		t.Errorf("planned with SourceMmap %v, training reads with %v", mp.SourceMmap, o.Source)
	}
	if rep := run(t, d, o); rep.Memory.TotalBytes > mem {
		t.Errorf("trained at %d bytes, budget %d", rep.Memory.TotalBytes, mem)
	}
	_, err = PlanMemory(context.Background(), d, opts(sample.SourceBatch), &MemPlanOptions{MemBytes: mapped - 1, ProfileName: "src-none", SourceAuto: true})
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "minimum of "+ibytesUp(mapped)) {
		t.Errorf("auto under %d (the mapping's minimum %d): %v", mapped-1, mapped, err)
	}
}
