package planner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/sample"
)

// TestHeldOutIsNextEpoch: a profile's held-out counts are the feature
// counts of the epoch after the profiled ones, exactly what a profile of
// one more epoch adds to Feat, in both batch modes; and RemodelReads
// with whole batches, each read alone, counts them again unchanged.
func TestHeldOutIsNextEpoch(t *testing.T) {
	ctx := context.Background()
	d := testDataset(t)
	mp := memParts(t, d, 30)
	for _, mode := range []sample.Mode{sample.ModeRandom, sample.ModePartition} {
		t.Run(string(mode), func(t *testing.T) {
			o := &ProfileOptions{Name: "h", Fanouts: []int{5, 5}, BatchSize: 64, Mode: mode, PartsPerBatch: 4, Seed: 7, Workers: 2}
			one, err := RunProfile(ctx, d, mp, o)
			if err != nil {
				t.Fatal(err)
			}
			o2 := *o
			o2.PresampleEpochs = 2
			two, err := RunProfile(ctx, d, mp, &o2)
			if err != nil {
				t.Fatal(err)
			}
			if one.Meta.HeldOutEpoch != 1 || two.Meta.HeldOutEpoch != 2 {
				t.Fatalf("held-out epochs %d and %d, want 1 and 2", one.Meta.HeldOutEpoch, two.Meta.HeldOutEpoch)
			}
			var differ int
			for v := range one.Feat {
				if want := two.Feat[v] - one.Feat[v]; one.FeatHeldOut[v] != want {
					t.Fatalf("node %d: held-out count %d, the second epoch's %d", v, one.FeatHeldOut[v], want)
				}
				if one.FeatHeldOut[v] != one.Feat[v] {
					differ++
				}
			}
			if differ == 0 || one.Meta.SumFeatHeldOut != sum(one.FeatHeldOut) || one.Meta.SumFeatHeldOut == 0 {
				t.Fatalf("held-out counts equal the profiled ones at every node (%d differ) or sum %d is not theirs",
					differ, one.Meta.SumFeatHeldOut)
			}
			held := slices.Clone(one.FeatHeldOut)
			whole := func(b *sample.Batch, visit func([]int64)) { visit(b.Nodes()) }
			if err := one.RemodelReads(ctx, d, mp, o, whole, 0, 1, 0); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(one.FeatHeldOut, held) {
				t.Errorf("RemodelReads of whole batches changed the held-out counts")
			}
		})
	}
}

// TestPlanHeldOutThinned is TestPlanHand's profile with held-out counts
// and 20 rows gathered an epoch: the feature cache's benefit is its
// nodes' held-out counts, chosen by Feat, times the share of rows the
// history leaves.
func TestPlanHeldOutThinned(t *testing.T) {
	p := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
	p.FeatHeldOut = []uint32{2, 3, 0, 0}
	p.Meta.HeldOutEpoch, p.Meta.GatheredRows = 1, 20
	res, err := Plan(p, &PlanOptions{MemBytes: 81, Hidden: 1, Step: 0.5, Decoupled: true})
	if err != nil {
		t.Fatal(err)
	}
	// α=0: 2 embeddings (nodes 2 and 0: 4+1), no rows: 5.
	// α=½: rows of nodes 0 and 1 (held out 2+3) × (1 − 4/20), embedding
	// of node 2 (4): 5·0.8 + 4 = 8.
	// α=1: rows of nodes 0, 1, 2 (2+3+0), no embeddings: 5.
	if got := benefits(res); !slices.Equal(got, []float64{5, 8, 5}) || res.Alpha != 0.5 {
		t.Fatalf("curve %v, α %v", got, res.Alpha)
	}
	if pr := res.Predicted; pr.FeatRows != 4 || pr.HistGatherRows != 4 || pr.FeatureBytesSaved != 80 || pr.NoHistSampledIDs != 0 {
		t.Errorf("predicted %+v", pr)
	}
	// The profile's draws from lists the dynamic cache did not serve
	// become the plan's base for the history's draws; the dynamic
	// cache's are left out.
	p.Meta.Lookups.Global.Sampled, p.Meta.Lookups.Dynamic.Sampled, p.Meta.Lookups.Storage.Sampled = 7, 100, 30
	if res, err = Plan(p, &PlanOptions{MemBytes: 81, Hidden: 1, Step: 0.5, Decoupled: true}); err != nil {
		t.Fatal(err)
	} else if got := res.Predicted.NoHistSampledIDs; got != 37 {
		t.Errorf("no-history draws %v, want 37", got)
	}
}

// rowsOf is c's rows by quantity: predicted, measured.
func rowsOf(c Comparison) map[string][2]float64 {
	got := map[string][2]float64{}
	for _, r := range c.Rows {
		got[r.Quantity] = [2]float64{r.Predicted, r.Measured}
	}
	return got
}

// TestCompareGatherRows: with the rows asked of the feature cache on both
// sides, the comparison measures the rows the history kept from the
// gather as the profile's rows less the epoch's, and counts them in the
// feature bytes saved; without them it falls back on the hop-2 draws
// skipped, and says they are no bound. Measured.FeatureBytesSaved is the
// feature cache's hit bytes alone.
func TestCompareGatherRows(t *testing.T) {
	res := &PlanResult{FeatRowBytes: 4, Predicted: Predicted{FeatRows: 10, HistGatherRows: 25, NoHistGatherRows: 100, GatherRows: 80,
		FeatureBytesSaved: (10 + 20) * 4}}
	m := Measured{FeatRows: 10, HistGatherRows: 5, GatherRows: 70, FeatureBytesSaved: 10 * 4}
	want := map[string][2]float64{
		"rows asked of the feature cache":                                  {80, 70},
		"history: rows not gathered (the profile's rows less the epoch's)": {20, 30},
		"feature bytes saved":                                              {120, (10 + 30) * 4},
	}
	got := rowsOf(Compare(res, m))
	for q, w := range want {
		if got[q] != w {
			t.Errorf("%s: predicted, measured %v, want %v", q, got[q], w)
		}
	}
	m.GatherRows = 0
	fallback := rowsOf(Compare(res, m))
	for q, w := range map[string][2]float64{
		"history: rows not gathered (measured: hop-2 draws skipped, no bound)": {25, 5},
		"feature bytes saved (history's part measured as hop-2 draws)":         {120, (10 + 5) * 4},
	} {
		if fallback[q] != w {
			t.Errorf("without the measured rows: %s: predicted, measured %v, want %v", q, fallback[q], w)
		}
	}
}

// TestCompareSampledIDs: with the profile's and the epoch's draws
// counted, the history's part of the neighbour bytes is measured as their
// difference (not the one-hop lower bound), the neighbour cache's bytes
// get their own row, and Compare averages the epochs' draws.
func TestCompareSampledIDs(t *testing.T) {
	res := &PlanResult{Predicted: Predicted{HistSampledNeighbors: 300, NeighborCacheBytes: 1000, NoHistSampledIDs: 2000,
		NeighborBytesSaved: 1000 + 300*4}}
	epochs := []Measured{
		{SampledIDs: 1700, NeighborCacheBytes: 900, IDBytes: 4, NeighborBytesSaved: 900 + 50*4},
		{SampledIDs: 1800, NeighborCacheBytes: 700, IDBytes: 4, NeighborBytesSaved: 700 + 50*4},
	}
	want := map[string][2]float64{
		"neighbour cache: list bytes served":                                      {1000, 800},
		"history: neighbour ids not drawn (the profile's draws less the epoch's)": {300, 250},
		"neighbour bytes saved":                                                   {1000 + 300*4, 800 + 250*4},
	}
	got := rowsOf(Compare(res, epochs...))
	for q, w := range want {
		if got[q] != w {
			t.Errorf("%s: predicted, measured %v, want %v", q, got[q], w)
		}
	}
	// A plan from a profile without the draws keeps the lower bound.
	res.Predicted.NoHistSampledIDs = 0
	for _, r := range Compare(res, epochs...).Rows {
		if r.Quantity == "neighbour bytes saved (history's part measured one hop deep: a lower bound)" && r.Measured == 800+50*4 {
			return
		}
	}
	t.Error("without the profile's draws the comparison has no lower-bound row")
}

// TestNbrModelBenefit: the neighbour cache is worth β × the neighbours
// sampled from the lists it serves (min(mean fanout, degree) per lookup;
// the whole list where a fanout takes every neighbour), in admission
// order (largest degree first); its bytes served stay the lists' bytes.
func TestNbrModelBenefit(t *testing.T) {
	p := handProfile([]uint32{0, 0, 0}, []uint32{0, 0, 0}, []uint32{0, 0, 0}, 1)
	p.Nbr = []uint32{4, 2, 1}
	o := &PlanOptions{Indptr: []int64{0, 1, 6, 16}} // degrees 1, 5, 10
	for _, tc := range []struct {
		fanouts []int
		want    []float64
	}{
		{[]int{2, 4}, []float64{0, 0.5 * 1 * 3, 0.5*1*3 + 0.5*2*3, 0.5*1*3 + 0.5*2*3 + 0.5*4*1}},
		{[]int{-1, 4}, []float64{0, 0.5 * 1 * 10, 0.5*1*10 + 0.5*2*5, 0.5*1*10 + 0.5*2*5 + 0.5*4*1}},
	} {
		p.Meta.Fanouts = tc.fanouts
		m, err := newNbrModel(p, o, 3, 4, 1, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.benefit, tc.want) || !slices.Equal(m.bytes, []float64{0, 40, 80, 96}) {
			t.Errorf("fanouts %v: benefit %v, bytes %v; want %v, [0 40 80 96]", tc.fanouts, m.benefit, m.bytes, tc.want)
		}
	}
}

// TestProfileSummaryFeatureBlock: the reads line does not print the
// feature block's rows as a part of the rows read from storage, and says
// its loads are not counted. It printed "130183 rows from storage (37125
// from the feature block) in 503 reads, 120.9 MiB read" on a relabelled
// 50k-node graph, where the 37,125 were not among the 130,183 and the
// block's loads read another 25.6 MB an epoch (train's load stage).
func TestProfileSummaryFeatureBlock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		block     int64
		want, not []string
	}{
		{"block", 37, []string{"120 rows from storage and 37 from the feature block (its loads not counted here) in 9 reads"}, []string{"(37 from"}},
		{"none", 0, []string{"120 rows from storage in 9 reads"}, []string{"feature block"}},
	} {
		p := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
		p.Meta.Reads = &ReadModel{Rows: 120, BlockRows: tc.block, Reads: 9, BytesRead: 4096, Mode: "buffered", RandomReadsPerSec: 1000, SeqBytesPerSec: 1 << 20, CostSource: "default"}
		var buf bytes.Buffer
		if err := WriteProfileSummary(&buf, p); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s: summary lacks %q:\n%s", tc.name, w, buf.String())
			}
		}
		for _, w := range tc.not {
			if strings.Contains(buf.String(), w) {
				t.Errorf("%s: summary has %q:\n%s", tc.name, w, buf.String())
			}
		}
	}
}
