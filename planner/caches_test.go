package planner

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
)

// featNodes is the nodes c holds, ascending.
func featNodes(c *featurecache.Cache) []int64 {
	var s []int64
	for v, slot := range c.Slots() {
		if slot >= 0 {
			s = append(s, int64(v))
		}
	}
	return s
}

// predicted is the plan's set of a cache with k entries: the first k of
// the order its prediction summed over, ascending.
func predicted(order []int64, k int64) []int64 {
	s := slices.Clone(order[:min(k, int64(len(order)))])
	slices.Sort(s)
	return s
}

func counted(before, after memacct.Snapshot) CacheBytes {
	d := func(p memacct.Purpose) int64 { return after.Bytes[p] - before.Bytes[p] }
	return CacheBytes{Feature: d(memacct.FeatureCache), History: d(memacct.HistoryCache), Neighbor: d(memacct.NeighborCache)}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

// TestBuildCachesArePlanned profiles a small graph, plans several budgets
// and builds the caches from each plan, with the full profile and with
// what ForTraining keeps of it. The caches hold the plan's predicted
// sets (the first Entries nodes of the order Plan summed over); what
// Plan predicted per epoch is what those nodes' profile counts add up to;
// and memacct counts exactly the plan's bytes for each cache, and nothing
// once they are closed.
func TestBuildCachesArePlanned(t *testing.T) {
	d := testDataset(t)
	n := d.NumNodes()
	p, err := RunProfile(context.Background(), d, nil, &ProfileOptions{Fanouts: []int{5, 5}, BatchSize: 64, Seed: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	const hidden = 8
	// β is measured (Eq. 3: sampling against gather seconds), so it
	// varies from run to run and with it the split; a fixed β makes the
	// plans, and which caches they include, the same in every run.
	const beta = 0.25
	var sawFeat, sawHist, sawNbr bool
	for _, mem := range []int64{TableBytes(n, true) + 16<<10, TableBytes(n, true) + 40<<10, TableBytes(n, true) + 100<<10, TableBytes(n, true) + 200<<10, TableBytes(n, true) + 300<<10} {
		res, err := Plan(p, &PlanOptions{MemBytes: mem, Hidden: hidden, Indptr: d.Indptr(), Beta: beta})
		if err != nil {
			t.Fatal(err)
		}
		featOrder, histOrder := rank(p.featScores(), int64(len(p.Feat))), rank(p.ComputeHistScores(res.Beta), int64(len(p.Feat)))
		// Below the nodes with a positive score the caches fill their
		// capacity, so their bytes are the plan's exactly.
		if res.Feature.Entries > int64(len(featOrder)) || res.History.Entries > int64(len(histOrder)) {
			t.Fatalf("budget %d: plan %d feature / %d history entries, only %d / %d nodes with a positive score: use a smaller budget",
				mem, res.Feature.Entries, res.History.Entries, len(featOrder), len(histOrder))
		}
		t.Logf("budget %d: α %.2f, γ %.2f: %d feature rows, %d history entries, %d neighbour lists", mem, res.Alpha, res.NeighborFrac, res.Feature.Entries, res.History.Entries, res.Neighbor.Entries)
		sawFeat = sawFeat || res.Feature.Entries > 0
		sawHist = sawHist || res.History.Entries > 0
		sawNbr = sawNbr || res.Neighbor.Entries > 0
		for _, tc := range []struct {
			name string
			p    *Profile
		}{{"profile", p}, {"kept profile", p.ForTraining(res.Beta)}} {
			before := memacct.Read()
			c, err := BuildCaches(context.Background(), d, &BuildOptions{Plan: res, Profile: tc.p, HistWidth: hidden})
			if err != nil {
				t.Fatal(err)
			}
			built := counted(before, memacct.Read())
			feat := featNodes(c.Feature)
			var hist []int64
			if c.History != nil {
				hist = c.History.Candidates()
			}
			if want := predicted(featOrder, res.Feature.Entries); !slices.Equal(feat, want) {
				t.Errorf("budget %d, %s: feature cache holds %d nodes %v, plan predicted %d %v", mem, tc.name, len(feat), feat, len(want), want)
			}
			if want := predicted(histOrder, res.History.Entries); !slices.Equal(hist, want) {
				t.Errorf("budget %d, %s: history cache holds %d nodes %v, plan predicted %d %v", mem, tc.name, len(hist), hist, len(want), want)
			}
			// The prediction is what the built caches' nodes saved in the
			// profiling epoch (the feature cache's in the held-out epoch,
			// less the share of rows the history removes).
			var featRows, histGather, histSample, histReused float64
			for _, v := range feat {
				featRows += float64(p.FeatHeldOut[v])
			}
			for _, v := range hist {
				h := p.histHit(int(v))
				histGather += float64(p.HistGather[v]) * h
				histSample += float64(p.HistSample[v]) * h
				histReused += p.histHitsPerEpoch(int(v))
			}
			keep := 1 - histGather/float64(p.Meta.GatheredRows)
			featRows *= keep
			pr := res.Predicted
			if rows := float64(p.Meta.Reads.Rows); pr.NoHistGatherRows != rows || !near(pr.GatherRows, rows*keep) ||
				!near(pr.FeatureBytesSaved, (featRows+rows*(1-keep))*float64(p.Meta.FeatRowBytes)) {
				t.Errorf("budget %d, %s: %g rows asked of the cache of %g, %g bytes saved; the profile's %g rows, keep %g",
					mem, tc.name, pr.GatherRows, pr.NoHistGatherRows, pr.FeatureBytesSaved, rows, keep)
			}
			if !near(featRows, pr.FeatRows) || !near(histGather, pr.HistGatherRows) || !near(histSample, pr.HistSampledNeighbors) || !near(histReused, pr.HistReusedNodes) {
				t.Errorf("budget %d, %s: built caches' profile counts: %g feature rows, %g gather rows, %g sampled neighbours, %g reused; plan predicted %+v",
					mem, tc.name, featRows, histGather, histSample, histReused, pr)
			}
			want := CacheBytes{Feature: res.Feature.Bytes(), History: res.History.Bytes(), Neighbor: res.Neighbor.Bytes()}
			if built != want || c.Counted != want {
				t.Errorf("budget %d, %s: memacct counted %+v (Counted %+v), plan %+v", mem, tc.name, built, c.Counted, want)
			}
			if est := (&BuildOptions{Plan: res, Profile: tc.p, HistWidth: hidden}).Estimate(d); est != want {
				t.Errorf("budget %d, %s: Estimate %+v, plan %+v", mem, tc.name, est, want)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if left := counted(before, memacct.Read()); left != (CacheBytes{}) {
				t.Errorf("budget %d, %s: %+v bytes still counted after Close", mem, tc.name, left)
			}
		}
	}
	if !sawFeat || !sawHist || !sawNbr {
		t.Errorf("the budgets never planned a feature (%v), history (%v) or neighbour (%v) cache", sawFeat, sawHist, sawNbr)
	}
}

// TestBuildCachesFloat32Tie: two history scores that differ in float64
// but round to the same float32 (16777216 and 16777216.5). The history
// cache ranks float32 scores, ties towards the smaller id, so with room
// for one candidate it holds node 0; Plan must predict that node, not
// node 1 (whose float64 score is larger), and so predict no sampled
// neighbours saved.
func TestBuildCachesFloat32Tie(t *testing.T) {
	d := testDataset(t)
	n := d.NumNodes()
	hs, hg := make([]uint32, n), make([]uint32, n)
	hs[1], hg[0], hg[1] = 1, 1<<24, 1<<24
	p := handProfile(make([]uint32, n), hs, hg, 0.5)
	p.Meta.FeatRowBytes = d.FeatRowBytes()
	// Tables plus one 21-byte slot of width 1 (and no feature row).
	res, err := Plan(p, &PlanOptions{MemBytes: TableBytes(n, true) + 21, Hidden: 1, Decoupled: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.History.Entries != 1 || res.Predicted.HistSampledNeighbors != 0 || res.Predicted.HistGatherRows != 1<<24 {
		t.Fatalf("plan: history %+v, predicted %+v; want node 0 (1 entry, 0 sampled neighbours, 2^24 gather rows)", res.History, res.Predicted)
	}
	c, err := BuildCaches(context.Background(), d, &BuildOptions{Plan: res, Profile: p, HistWidth: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.History.Candidates(); !slices.Equal(got, []int64{0}) {
		t.Errorf("history cache holds %v, want [0]", got)
	}
}

// TestSizes: explicit sizes, then the plan's, then the defaults.
func TestSizes(t *testing.T) {
	const n, width = 1000, 4
	pl := &PlanResult{Feature: CacheSplit{BudgetBytes: 100}, History: CacheSplit{BudgetBytes: 200, Entries: 3}, Neighbor: CacheSplit{BudgetBytes: 300}}
	noHist := &PlanResult{Feature: CacheSplit{BudgetBytes: 100}, History: CacheSplit{BudgetBytes: 4 * n}}
	// Room for a fifth of the nodes: 4·N + 200 slots of 4·4 + 17 bytes.
	def := int64(4*n + 200*(4*width+17))
	for _, tc := range []struct {
		name string
		o    BuildOptions
		want Sizes
	}{
		{"no plan", BuildOptions{HistWidth: width}, Sizes{History: def, HistoryOn: true}},
		{"no plan, no history", BuildOptions{}, Sizes{}},
		{"no plan, explicit", BuildOptions{FeatureBytes: 7, HistoryBytes: 8, NeighborBytes: 9, HistWidth: width}, Sizes{7, 8, 9, true}},
		{"plan", BuildOptions{Plan: pl, HistWidth: width}, Sizes{100, 200, 300, true}},
		{"plan, overridden", BuildOptions{Plan: pl, FeatureBytes: 7, HistoryBytes: 8, NeighborBytes: -1, HistWidth: width}, Sizes{7, 8, 0, true}},
		{"plan, off", BuildOptions{Plan: pl, FeatureBytes: -1, HistoryBytes: -1, HistWidth: width}, Sizes{0, 0, 300, false}},
		{"plan gives history nothing", BuildOptions{Plan: noHist, HistWidth: width}, Sizes{Feature: 100}},
		{"plan gives history nothing, explicit", BuildOptions{Plan: noHist, HistoryBytes: 8, HistWidth: width}, Sizes{Feature: 100, History: 8, HistoryOn: true}},
		{"history width 0", BuildOptions{Plan: pl, HistoryBytes: 8}, Sizes{Feature: 100, Neighbor: 300}},
	} {
		if got := tc.o.Sizes(n); got != tc.want {
			t.Errorf("%s: Sizes = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
