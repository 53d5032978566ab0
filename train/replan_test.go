package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// TestPlanFileReplanned: a plan whose caches exceed what --mem leaves them
// (a plan made by 'ssdgnn plan --mem X', which budgets the caches alone,
// read by train under the same X) is re-divided from its profile to fit;
// without the profile on disk PlanMemory refuses and names the budget that
// would fit. A profile sampled with other fanouts is flagged.
func TestPlanFileReplanned(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	n := d.NumNodes()
	big := MinimumBudget(d, o) + 64*n + 400*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: big, ProfileName: "replan"})
	if err != nil {
		t.Fatal(err)
	}
	planned := planCacheBytes(mp.Plan)
	if planned <= 0 || mp.Budget == nil {
		t.Fatalf("plan caches %d, budget %+v", planned, mp.Budget)
	}
	// The same budget reads the plan as it is.
	same, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: big, PlanFile: mp.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	if same.Replanned || same.Warning != "" || planCacheBytes(same.Plan) != planned {
		t.Fatalf("same budget: replanned %v, warning %q, caches %d (plan %d)", same.Replanned, same.Warning, planCacheBytes(same.Plan), planned)
	}
	// Room for half the plan's caches: re-divided to fit.
	small := big - (mp.Budget.Caches - planned) - planned/2
	re, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: small, PlanFile: mp.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	if !re.Replanned || re.Profile == nil || planCacheBytes(re.Plan) > re.Budget.Caches || planCacheBytes(re.Plan) >= planned {
		t.Fatalf("smaller budget: replanned %v, caches %d of room %d (plan %d)\nbig %+v\nsmall %+v", re.Replanned, planCacheBytes(re.Plan), re.Budget.Caches, planned, mp.Budget, re.Budget)
	}
	if re.Budget.MemBytes != small || re.Budget.Reserve+re.Budget.Fixed.Bytes+re.Budget.WorkingSet.Bytes+re.Budget.Caches != small {
		t.Errorf("budget arithmetic %+v", re.Budget)
	}
	// Other fanouts than the profile's: a warning.
	other := synthOpts()
	other.Fanouts = make([]int, len(other.Fanouts))
	for i := range other.Fanouts {
		other.Fanouts[i] = 3
	}
	w, err := PlanMemory(context.Background(), d, other, &MemPlanOptions{MemBytes: 0, PlanFile: mp.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.Warning, "fanouts") {
		t.Errorf("fanouts differ from the profile's: warning %q", w.Warning)
	}
	// Another batch selection than the profile's: a warning too.
	so := synthOpts().withDefaults()
	prof := &planner.Profile{Meta: planner.Meta{Fanouts: so.Fanouts, BatchSize: so.BatchSize, Mode: string(sample.ModePartition)}}
	so.Selection = sample.ModeRandom
	dev := &storage.DeviceProfile{RowBytes: 512, RandomReadsPerSec: 70000, SeqBytesPerSec: 1.2e9}
	plan := func(o *featurecache.Options) featurecache.ReadPlan {
		return featurecache.PlanReads(dev, storage.FileDevice, 512, o)
	}
	if w := profileMismatch("p", prof, &so, plan(nil)); !strings.Contains(w, "partition batches, training random") {
		t.Errorf("selection differs from the profile's: warning %q", w)
	}
	// Reads priced as training reads: no warning. Priced with another
	// merge cap (a profile from before the default changed), at another
	// merge gap (the disk probed again after profiling), or at the
	// default costs: a warning naming what differs.
	so = synthOpts().withDefaults()
	want := plan(nil)
	reads := func(p featurecache.ReadPlan) *planner.ReadModel {
		return &planner.ReadModel{GapRows: p.GapRows, MaxAmplification: p.MaxAmplification, Mode: "direct", CostSource: p.CostSource,
			RandomReadsPerSec: p.Profile.RandomReadsPerSec, SeqBytesPerSec: p.Profile.SeqBytesPerSec}
	}
	prof = &planner.Profile{Meta: planner.Meta{SamplePlan: sample.PlanVersion, Fanouts: so.Fanouts, BatchSize: so.BatchSize, Reads: reads(want)}}
	if w := profileMismatch("p", prof, &so, want); w != "" {
		t.Errorf("reads priced as training's: warning %q", w)
	}
	for _, c := range []struct {
		name  string
		edit  func(r *planner.ReadModel)
		train *featurecache.Options
		want  string
	}{
		{"older cap", func(r *planner.ReadModel) { r.MaxAmplification = 2 }, nil, "merge cap 2×, now 6×"},
		{"uncapped training", nil, &featurecache.Options{MaxReadAmplification: featurecache.UncappedReads}, "merge cap 6×, now none"},
		{"per-row training", nil, &featurecache.Options{CoalesceGap: featurecache.PerRowReads}, "merge gap " + strconv.FormatInt(want.GapRows, 10) + " rows, now 0"},
		{"probed again", func(r *planner.ReadModel) { r.GapRows++; r.RandomReadsPerSec = 60000 }, nil, "costs 60000 reads/s"},
		{"default costs", func(r *planner.ReadModel) { r.CostSource = "default" }, nil, "from default, now 70000 and 1200000000 from device.json"},
	} {
		r := reads(want)
		if c.edit != nil {
			c.edit(r)
		}
		prof.Meta.Reads = r
		if w := profileMismatch("p", prof, &so, plan(c.train)); !strings.Contains(w, c.want) {
			t.Errorf("%s: warning %q, want it to contain %q", c.name, w, c.want)
		}
	}
	if want.GapRows == 0 || want.MaxAmplification != featurecache.DefaultMaxReadAmplification {
		t.Fatalf("test device gives gap %d, cap %g", want.GapRows, want.MaxAmplification)
	}
	// Batches constructed another way (a profile from before partition
	// batches were cut evenly): a warning.
	prof.Meta.Reads = reads(want)
	prof.Meta.SamplePlan = 1
	if w := profileMismatch("p", prof, &so, want); !strings.Contains(w, "sample plan version 1, training 2") {
		t.Errorf("older batch construction: warning %q", w)
	}
	// Re-dividing counts the kept profile once, as reading a plan does.
	before := memacct.Read().Bytes[memacct.Profile]
	if _, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: small, PlanFile: mp.PlanPath}); err != nil {
		t.Fatal(err)
	}
	if got, want := memacct.Read().Bytes[memacct.Profile]-before, 8*n; got != want {
		t.Errorf("re-divided plan counted %d profile bytes, want %d (8 a node, once)", got, want)
	}
	// No profile to re-plan from: refused, naming what would fit.
	if err := os.RemoveAll(planner.ProfilePath(d.Dir(), "replan") + "/profile.json"); err != nil {
		t.Fatal(err)
	}
	// A budget whose caches' room is below the plan's even with the
	// working set at its least (micro-batches of the fewest targets).
	tiny := MinimumBudget(d, synthOpts()) + planned/4
	_, err = PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: tiny, PlanFile: mp.PlanPath})
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "plan again") {
		t.Errorf("no profile: %v", err)
	}
}

// TestPlanFileRepredicted: a plan made from whole batches (its profile
// counted whole batches), read under a budget that cuts batches into
// micro-batches, keeps its division and is re-predicted from the reads of
// the micro-batches: the same read model as a fresh profile recounted for
// that cut, and more read calls than whole batches predicted.
func TestPlanFileRepredicted(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	o.ScanBatches = 1 // micro-batches alone here; scans: TestReadModelOfScans
	n := d.NumNodes()
	big := MinimumBudget(d, o) + 64*n + 400*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: big, ProfileName: "repredict"})
	if err != nil {
		t.Fatal(err)
	}
	if mp.Plan.Reads == nil || mp.Plan.Reads.MicroBatchRows != 0 {
		t.Fatalf("the plan's read model %+v, want whole batches", mp.Plan.Reads)
	}
	const cut = 120
	co := synthOpts()
	co.MaxBatchRows, co.ScanBatches = cut, 1
	re, err := PlanMemory(context.Background(), d, co, &MemPlanOptions{MemBytes: big, PlanFile: mp.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	if !re.Remodeled || re.Replanned {
		t.Fatalf("remodeled %v, replanned %v, budget %+v", re.Remodeled, re.Replanned, re.Budget)
	}
	if re.Plan.Feature != mp.Plan.Feature || re.Plan.History != mp.Plan.History || re.Plan.Neighbor != mp.Plan.Neighbor {
		t.Errorf("division changed: feature %+v → %+v, history %+v → %+v", mp.Plan.Feature, re.Plan.Feature, mp.Plan.History, re.Plan.History)
	}
	w := co.withDefaults()
	po := &planner.ProfileOptions{Name: "fresh", Fanouts: w.Fanouts, BatchSize: w.BatchSize, Mode: w.Selection,
		Seed: w.Seed, Workers: w.Workers, Gather: w.buildOptions(0).Feature, NoFeatureBlock: true}
	fresh, err := planner.RunProfile(context.Background(), d, nil, po)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.RemodelReads(context.Background(), d, nil, po, splitRows(splitBound{rows: cut}), cut, 1, 0); err != nil {
		t.Fatal(err)
	}
	got, want := *re.Plan.Reads, *fresh.Meta.Reads
	wp, rp := mp.Plan.Predicted, re.Plan.Predicted
	t.Logf("whole batches: %d rows in %d reads, uncached device time %.4f s; micro-batches of ≤ %d rows: %d rows in %d reads, %.4f s; cached rows %.0f → %.0f",
		mp.Plan.Reads.Rows, mp.Plan.Reads.Reads, wp.NoCacheGatherSeconds, cut, got.Rows, got.Reads, rp.NoCacheGatherSeconds, wp.FeatRows, rp.FeatRows)
	if got.Reads != want.Reads || got.Rows != want.Rows || got.BytesRead != want.BytesRead || got.MicroBatchRows != cut {
		t.Errorf("re-predicted read model %+v, a fresh profile's %+v", got, want)
	}
	// Micro-batches' input sets overlap: more rows, more reads.
	if got.Rows <= mp.Plan.Reads.Rows || rp.NoCacheGatherSeconds <= wp.NoCacheGatherSeconds || rp.FeatRows < wp.FeatRows {
		t.Errorf("micro-batches: %d rows, %.4f s uncached, %.0f cached rows; whole batches %d, %.4f s, %.0f",
			got.Rows, rp.NoCacheGatherSeconds, rp.FeatRows, mp.Plan.Reads.Rows, wp.NoCacheGatherSeconds, wp.FeatRows)
	}
	// The same cut again: the recount saved by the last run is read back,
	// not counted again, and the plan is the same.
	var log bytes.Buffer
	co.Logger = slog.New(slog.NewTextHandler(&log, nil))
	again, err := PlanMemory(context.Background(), d, co, &MemPlanOptions{MemBytes: big, PlanFile: mp.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "saved recount reused") {
		t.Errorf("second run with the same cut did not reuse the recount:\n%s", log.String())
	}
	if !again.Remodeled || !reflect.DeepEqual(*again.Plan.Reads, *re.Plan.Reads) || again.Plan.Predicted != re.Plan.Predicted {
		t.Errorf("plan from the saved recount: reads %+v, predicted %+v; counted: %+v, %+v",
			*again.Plan.Reads, again.Plan.Predicted, *re.Plan.Reads, re.Plan.Predicted)
	}
}

// TestRemodelKey: the saved recount's key changes with every input of
// the recount and with the profile, and only with them.
func TestRemodelKey(t *testing.T) {
	d := smallSynth(t)
	p := &planner.Profile{Meta: planner.Meta{Name: "k", NumNodes: d.NumNodes(), Seed: 1}}
	po := &planner.ProfileOptions{Name: "k", Gather: &featurecache.Options{}}
	key := func(p *planner.Profile, po *planner.ProfileOptions, b splitBound, micro int64, scan, chunk int) string {
		t.Helper()
		k, err := remodelKey(d, p, po, b, micro, scan, chunk)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key(p, po, splitBound{rows: 100}, 100, 1, 0)
	if again := key(p, po, splitBound{rows: 100}, 100, 1, 0); again != base {
		t.Fatalf("same inputs, keys %s and %s", base, again)
	}
	other := *p
	other.Meta.Seed = 2
	seen := map[string]string{base: "base"}
	for name, k := range map[string]string{
		"rows bound":     key(p, po, splitBound{rows: 99}, 100, 1, 0),
		"dst bound":      key(p, po, splitBound{rows: 100, dst: 7}, 100, 1, 0),
		"micro rows":     key(p, po, splitBound{rows: 100}, 0, 1, 0),
		"scan":           key(p, po, splitBound{rows: 100}, 100, 2, 0),
		"chunk":          key(p, po, splitBound{rows: 100}, 100, 1, 16),
		"profile":        key(&other, po, splitBound{rows: 100}, 100, 1, 0),
		"merge gap":      key(p, &planner.ProfileOptions{Name: "k", Gather: &featurecache.Options{CoalesceGap: 3}}, splitBound{rows: 100}, 100, 1, 0),
		"read cap":       key(p, &planner.ProfileOptions{Name: "k", Gather: &featurecache.Options{MaxReadAmplification: 2}}, splitBound{rows: 100}, 100, 1, 0),
		"read size":      key(p, &planner.ProfileOptions{Name: "k", Gather: &featurecache.Options{MaxReadBytes: 1 << 20}}, splitBound{rows: 100}, 100, 1, 0),
		"no block":       key(p, &planner.ProfileOptions{Name: "k", Gather: &featurecache.Options{}, NoFeatureBlock: true}, splitBound{rows: 100}, 100, 1, 0),
		"partition name": key(p, &planner.ProfileOptions{Name: "k", Gather: &featurecache.Options{}, Partition: "q"}, splitBound{rows: 100}, 100, 1, 0),
	} {
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key %s, the same as %s's", name, k, prev)
		}
		seen[k] = name
	}
}

// TestBareMemDividesAsPlanFile: a bare train --mem divides the caches
// as 'ssdgnn plan' divides the same profile for the same cache budget
// (the plan bench ooc's configurations train with): on the profile's
// whole batches, where the feature cache's hits and the history's saved
// rows are counted alike, whether or not the budget cuts batches into
// micro-batches or reads them in streamed chunks. Before, the feature
// reads were recounted for training's batches first, which multiplied
// the feature cache's benefit by the cut and not the history's (failed
// before the fix: α 0.50 against 0.47 in the first case, α 0.90 and γ
// 0.70 against 0.74 and 0.25 in the third).
func TestBareMemDividesAsPlanFile(t *testing.T) {
	d := smallSynth(t)
	for _, c := range []struct {
		layers int
		cut    int64 // input rows per micro-batch (0: as the budget cuts)
		extra  int64 // bytes above the minimum budget
	}{{2, 300, 8 << 10}, {2, 120, 32 << 10}, {3, 0, 8 << 10}} {
		o := synthOpts()
		o.Layers, o.Fanouts, o.BatchSize = c.layers, []int{5, 5, 5}[:c.layers], 100
		o.MaxBatchRows, o.ScanBatches = c.cut, 1
		name := fmt.Sprintf("bare%d", c.layers)
		mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: MinimumBudget(d, o) + c.extra, ProfileName: name})
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.LoadProfile(d.Dir(), name)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := planner.Plan(p, &planner.PlanOptions{MemBytes: mp.Plan.Memory.MemBytes, Hidden: mp.Plan.Hidden,
			Indptr: d.Indptr(), Staleness: o.Staleness})
		if err != nil {
			t.Fatal(err)
		}
		got, want := mp.Plan, ref
		t.Logf("%+v: bare --mem α %.2f γ %.2f, the profile's plan α %.2f γ %.2f (reads of micro-batches of %d rows)",
			c, got.Alpha, got.NeighborFrac, want.Alpha, want.NeighborFrac, got.Reads.MicroBatchRows)
		if got.Alpha != want.Alpha || got.NeighborFrac != want.NeighborFrac || got.Feature.BudgetBytes != want.Feature.BudgetBytes ||
			got.History.BudgetBytes != want.History.BudgetBytes || got.Neighbor.BudgetBytes != want.Neighbor.BudgetBytes {
			t.Errorf("%+v: bare --mem divided α %.2f γ %.2f (feature %d, history %d, neighbour %d bytes), the profile's plan α %.2f γ %.2f (%d, %d, %d)",
				c, got.Alpha, got.NeighborFrac, got.Feature.BudgetBytes, got.History.BudgetBytes, got.Neighbor.BudgetBytes,
				want.Alpha, want.NeighborFrac, want.Feature.BudgetBytes, want.History.BudgetBytes, want.Neighbor.BudgetBytes)
		}
	}
}

// TestReplanDividesAsPlan: a plan file whose caches do not fit what --mem
// leaves them is re-divided (replan) on its profile's own counts, whole
// batches, as a bare --mem divides (TestBareMemDividesAsPlanFile) and as
// 'ssdgnn plan' would for that room; the recount for training's
// micro-batches then re-predicts the division it made. Re-dividing the
// profile after its feature reads were recounted for the cut leaned the
// division to the feature cache (the bias 0f8c426 removed from the bare
// path).
func TestReplanDividesAsPlan(t *testing.T) {
	d := smallSynth(t)
	for _, c := range []struct {
		layers int
		cut    int64 // input rows per micro-batch
	}{{2, 300}, {2, 120}} {
		opts := func() *Options {
			o := synthOpts()
			o.Layers, o.Fanouts, o.BatchSize = c.layers, []int{5, 5, 5}[:c.layers], 100
			o.MaxBatchRows, o.ScanBatches = c.cut, 1
			return o
		}
		o := opts()
		name := fmt.Sprintf("replandiv%d-%d", c.layers, c.cut)
		big := MinimumBudget(d, o) + 64*d.NumNodes() + 400*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes
		mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: big, ProfileName: name})
		if err != nil {
			t.Fatal(err)
		}
		// Room for half the plan's caches (the room at a budget depends
		// on the cut batches' working set: asked for, then taken).
		planned := planCacheBytes(mp.Plan)
		small := big
		var re *MemPlan
		for range 4 {
			if re, err = PlanMemory(context.Background(), d, opts(), &MemPlanOptions{MemBytes: small, PlanFile: mp.PlanPath}); err != nil {
				t.Fatal(err)
			}
			if re.Replanned {
				break
			}
			small -= re.Budget.Caches - planned/2
		}
		if !re.Replanned {
			t.Fatalf("%+v: not re-divided (caches %d of room %d)", c, planCacheBytes(re.Plan), re.Budget.Caches)
		}
		p, err := planner.LoadProfile(d.Dir(), name)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := planner.Plan(p, &planner.PlanOptions{MemBytes: re.Plan.Memory.MemBytes, Hidden: re.Plan.Hidden,
			Indptr: d.Indptr(), Staleness: o.Staleness, Decoupled: mp.Plan.Decoupled})
		if err != nil {
			t.Fatal(err)
		}
		got, want := re.Plan, ref
		t.Logf("%+v: re-divided α %.2f γ %.2f, the profile's plan α %.2f γ %.2f (reads of micro-batches of %d rows, recounted %v)",
			c, got.Alpha, got.NeighborFrac, want.Alpha, want.NeighborFrac, got.Reads.MicroBatchRows, got.Recounted)
		if got.Alpha != want.Alpha || got.NeighborFrac != want.NeighborFrac || got.Feature.BudgetBytes != want.Feature.BudgetBytes ||
			got.History.BudgetBytes != want.History.BudgetBytes || got.Neighbor.BudgetBytes != want.Neighbor.BudgetBytes {
			t.Errorf("%+v: re-divided α %.2f γ %.2f (feature %d, history %d, neighbour %d bytes), the profile's plan α %.2f γ %.2f (%d, %d, %d)",
				c, got.Alpha, got.NeighborFrac, got.Feature.BudgetBytes, got.History.BudgetBytes, got.Neighbor.BudgetBytes,
				want.Alpha, want.NeighborFrac, want.Feature.BudgetBytes, want.History.BudgetBytes, want.Neighbor.BudgetBytes)
		}
		if got.Reads.MicroBatchRows > 0 && !got.Recounted {
			t.Errorf("%+v: batches cut to %d rows, the plan's predictions not recounted for them", c, got.Reads.MicroBatchRows)
		}
	}
}
