package planner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// rangeMemParts is memParts with PartRange: its parts are contiguous id
// ranges, as a relabelled dataset's are, so training serves each macro
// batch's own rows from the dynamic feature block.
type rangeMemParts struct {
	*sample.MemPartitions
	lo []int64 // part q is [lo[q], lo[q+1])
}

func (r rangeMemParts) PartRange(q int) (int64, int64, bool) { return r.lo[q], r.lo[q+1], true }

func newRangeMemParts(t *testing.T, d *storage.Dataset, k int) rangeMemParts {
	mp := memParts(t, d, k)
	lo := make([]int64, k+1)
	lo[k] = d.NumNodes()
	for q := k - 1; q >= 0; q-- {
		lo[q] = lo[q+1]
		for _, v := range mp.Members(q) {
			lo[q] = min(lo[q], v)
		}
	}
	return rangeMemParts{MemPartitions: mp, lo: lo}
}

// TestReadModelIsTheGather: the profile's read model plans exactly the
// reads the gather issues. Each profiled batch's rows, less those the
// feature block serves, gathered again through a cache-less featurecache
// with the same read options, make exactly Meta.Reads' read calls and
// bytes; FeatSingle sums to its single reads, Feat to its rows (one
// epoch), and the block's rows are counted in neither.
func TestReadModelIsTheGather(t *testing.T) {
	d := testDataset(t)
	mp := memParts(t, d, 30)
	rp := newRangeMemParts(t, d, 30)
	part := make([]int32, d.NumNodes())
	for q := range 30 {
		for _, v := range mp.Members(q) {
			part[v] = int32(q)
		}
	}
	for _, tc := range []struct {
		name  string
		mode  sample.Mode
		parts sample.Partitions
		gap   int64
		amp   float64
		block bool
	}{
		{"random, one read per row", sample.ModeRandom, nil, featurecache.PerRowReads, 0, false},
		{"random, merged", sample.ModeRandom, nil, 8, featurecache.UncappedReads, false},
		{"random, merged under a cap", sample.ModeRandom, nil, 8, 1.5, false},
		{"partition, feature block", sample.ModePartition, rp, 8, 0, true},
		{"partition, ids not ranges", sample.ModePartition, mp, 8, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gather := &featurecache.Options{Mode: storage.ReadBuffered, CoalesceGap: tc.gap, MaxReadAmplification: tc.amp}
			so := sample.Options{Fanouts: []int{5, 5}, BatchSize: 64, Mode: tc.mode, PartsPerBatch: 4, Seed: 3, Workers: 2}
			p, err := RunProfile(context.Background(), d, tc.parts, &ProfileOptions{Fanouts: so.Fanouts, BatchSize: so.BatchSize,
				Mode: so.Mode, PartsPerBatch: so.PartsPerBatch, Seed: so.Seed, Workers: so.Workers, Gather: gather})
			if err != nil {
				t.Fatal(err)
			}
			r := p.Meta.Reads
			if r == nil || !r.usable() || p.FeatSingle == nil {
				t.Fatalf("no read model: %+v", r)
			}

			fo := *gather
			fo.Stage = d.Accounting().Stage("replay " + tc.name)
			fc, err := featurecache.New(context.Background(), d, 0, &fo)
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			// One more cache-less gather per thinned level.
			thin := make([]*featurecache.Cache, len(ThinKeep))
			for k := range thin {
				to := *gather
				to.Stage = d.Accounting().Stage(fmt.Sprintf("replay %s thinned %d", tc.name, k))
				if thin[k], err = featurecache.New(context.Background(), d, 0, &to); err != nil {
					t.Fatal(err)
				}
				defer thin[k].Close()
			}
			s, err := sample.New(d, tc.parts, &so)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			it := s.Epoch(context.Background(), 0)
			defer it.Close()
			var rows, blockRows int64
			for {
				b, err := it.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				ids := slices.Clone(b.Nodes())
				if tc.block {
					own := it.Plan().MacroParts[b.Macro]
					ids = slices.DeleteFunc(ids, func(v int64) bool { return slices.Contains(own, int(part[v])) })
					blockRows += int64(len(b.Nodes()) - len(ids))
				}
				rows += int64(len(ids))
				if err := fc.Gather(ids, make([]byte, int64(len(ids))*d.FeatRowBytes())); err != nil {
					t.Fatal(err)
				}
				for k, keep := range ThinKeep {
					kept := slices.DeleteFunc(slices.Clone(ids), func(v int64) bool { return thinHash(v) >= thinLimit(keep) })
					if err := thin[k].Gather(kept, make([]byte, int64(len(kept))*d.FeatRowBytes())); err != nil {
						t.Fatal(err)
					}
				}
				b.Release()
			}
			var got storage.StageStats
			for _, st := range d.Accounting().Snapshot() {
				if st.Stage == "replay "+tc.name {
					got = st
				}
			}
			t.Logf("%d rows (%d from the block) in %d reads (%d alone), %d bytes; the gather: %d reads, %d bytes",
				r.Rows, r.BlockRows, r.Reads, r.SingleReads, r.BytesRead, got.ReadCalls, got.BytesRead)
			if r.Rows != rows || r.BlockRows != blockRows || r.Reads != got.ReadCalls || r.BytesRead != got.BytesRead {
				t.Errorf("model: %d rows, %d block rows, %d reads, %d bytes; gather: %d rows, %d block rows, %d reads, %d bytes",
					r.Rows, r.BlockRows, r.Reads, r.BytesRead, rows, blockRows, got.ReadCalls, got.BytesRead)
			}
			if len(r.Thinned) != len(ThinKeep) {
				t.Fatalf("%d thinned levels, want %d", len(r.Thinned), len(ThinKeep))
			}
			for k, keep := range ThinKeep {
				var want storage.StageStats
				for _, st := range d.Accounting().Snapshot() {
					if st.Stage == fmt.Sprintf("replay %s thinned %d", tc.name, k) {
						want = st
					}
				}
				if lv := r.Thinned[k]; lv.Keep != keep || lv.Reads != want.ReadCalls || lv.Bytes != want.BytesRead {
					t.Errorf("thinned level %d: %+v; the gather of the kept rows: keep %g, %d reads, %d bytes", k, lv, keep, want.ReadCalls, want.BytesRead)
				}
			}
			if tc.block != (blockRows > 0) {
				t.Errorf("block %v, %d block rows", tc.block, blockRows)
			}
			if sum(p.FeatSingle) != uint64(r.SingleReads) || sum(p.Feat) != uint64(r.Rows) || p.Meta.SumFeatSingle != uint64(r.SingleReads) {
				t.Errorf("Σ FeatSingle %d, Σ Feat %d: want %d single reads, %d rows", sum(p.FeatSingle), sum(p.Feat), r.SingleReads, r.Rows)
			}
			switch {
			case tc.gap == featurecache.PerRowReads && (r.Reads != r.Rows || r.SingleReads != r.Reads):
				t.Errorf("one read per row: %d reads, %d alone, %d rows", r.Reads, r.SingleReads, r.Rows)
			case tc.gap > 0 && r.Reads >= r.Rows:
				t.Errorf("gap %d merged nothing: %d reads of %d rows", tc.gap, r.Reads, r.Rows)
			}
		})
	}
}

// costedProfile is a profile of n nodes whose read model says every node
// was needed feat[v] times and read alone single[v] of them, with no
// history: a random read costs what 9 rows cost sequentially.
func costedProfile(feat, single []uint32) *Profile {
	n := int64(len(feat))
	var rows, singles uint64
	for v := range feat {
		rows += uint64(feat[v])
		singles += uint64(single[v])
	}
	const rb = 64
	m := &ReadModel{RandomReadsPerSec: 1000, SeqBytesPerSec: 9 * rb * 1000, Rows: int64(rows), SingleReads: int64(singles),
		SingleBytes: int64(singles) * rb, Reads: int64(singles) + 1, BytesRead: int64(rows) * rb, CostSource: "test"}
	return &Profile{Meta: Meta{Name: "costed", NumNodes: n, FeatRowBytes: rb, PresampleEpochs: 1, IDBytes: 4, Beta: 1, Reads: m},
		Feat: feat, FeatSingle: single, HistSample: make([]uint32, n), HistGather: make([]uint32, n), Nbr: make([]uint32, n)}
}

// TestPlanPricesSingleReads: with the read model, a row read on its own
// outranks rows needed as often that ride in merged reads, and even some
// needed more often; the predicted reads and bytes left are the profile's
// less the cached nodes' single reads and bytes; with no cache they are
// the profile's.
func TestPlanPricesSingleReads(t *testing.T) {
	// Node 0: needed 10 times, always inside merged reads. Node 1: 10
	// times, always alone. Node 2: 30 times, merged. Node 3: 4 times,
	// alone. A single read costs 1 + 9 = 10 merged rows.
	feat := []uint32{10, 10, 30, 4}
	single := []uint32{0, 10, 0, 4}
	p := costedProfile(feat, single)
	if got, want := p.featScores(), []uint32{10, 100, 30, 40}; !slices.Equal(got, want) {
		t.Fatalf("scores %v, want %v", got, want)
	}
	rm := p.Meta.Reads
	for _, tc := range []struct {
		rows       int64
		want       []int64 // the nodes cached, in rank order
		reads, mib float64
	}{
		{0, nil, float64(rm.Reads), float64(rm.BytesRead)},
		{1, []int64{1}, float64(rm.Reads - 10), float64(rm.BytesRead - 10*64)},
		{2, []int64{1, 3}, float64(rm.Reads - 14), float64(rm.BytesRead - 14*64)},
		{3, []int64{1, 3, 2}, float64(rm.Reads - 14), float64(rm.BytesRead - 44*64)},
	} {
		mem := TableBytes(4, false) + tc.rows*64
		res, err := Plan(p, &PlanOptions{MemBytes: mem, Hidden: -1, Decoupled: true})
		if err != nil {
			t.Fatal(err)
		}
		order := rank(p.featScores(), res.Feature.Entries)
		pr := res.Predicted
		t.Logf("%d rows: cache %v, %.0f reads and %.0f bytes left of %d and %d, %.4fs of %.4fs", tc.rows, order,
			pr.GatherReads, pr.GatherBytesRead, rm.Reads, rm.BytesRead, pr.GatherSeconds, pr.NoCacheGatherSeconds)
		if res.Feature.Entries != tc.rows || !slices.Equal(order, tc.want) {
			t.Errorf("%d rows: cache %v (%d entries), want %v", tc.rows, order, res.Feature.Entries, tc.want)
		}
		if pr.GatherReads != tc.reads || pr.GatherBytesRead != tc.mib || res.Reads != rm {
			t.Errorf("%d rows: %.0f reads, %.0f bytes left; want %.0f, %.0f", tc.rows, pr.GatherReads, pr.GatherBytesRead, tc.reads, tc.mib)
		}
		if want := rm.Seconds(tc.reads, tc.mib); math.Abs(pr.GatherSeconds-want) > 1e-12 {
			t.Errorf("%d rows: %v s, want %v", tc.rows, pr.GatherSeconds, want)
		}
		c := Compare(res, Measured{GatherReads: tc.reads, GatherBytesRead: tc.mib})
		if last := c.Rows[len(c.Rows)-1]; last.Unit != "s" || math.Abs(last.Ratio-1) > 1e-12 {
			t.Errorf("comparison of the predicted reads with themselves: %+v", last)
		}
	}
	// Without the read model every row counts alike: node 2 first.
	p.FeatSingle, p.Meta.Reads = nil, nil
	res, err := Plan(p, &PlanOptions{MemBytes: TableBytes(4, false) + 64, Hidden: -1, Decoupled: true})
	if err != nil {
		t.Fatal(err)
	}
	if order := rank(p.featScores(), res.Feature.Entries); !slices.Equal(order, []int64{2}) || res.Reads != nil || res.Predicted.GatherReads != 0 {
		t.Errorf("no read model: cache %v, reads %+v", order, res.Reads)
	}
}

// TestThinnedAt checks the interpolation over the thinned levels by hand,
// and that the levels keep about their share of rows.
func TestThinnedAt(t *testing.T) {
	m := &ReadModel{Reads: 100, BytesRead: 1000}
	if _, _, ok := m.thinnedAt(0.5); ok {
		t.Error("a model without thinned counts interpolated")
	}
	m.Thinned = []ThinnedReads{{0.9, 140, 900}, {0.8, 180, 700}, {0.1, 50, 100}}
	for _, tc := range []struct{ keep, reads, bytes float64 }{
		{1, 100, 1000}, {1.5, 100, 1000}, {0.95, 120, 950}, {0.9, 140, 900}, {0.85, 160, 800},
		{0.45, 115, 400}, {0.1, 50, 100}, {0.05, 25, 50}, {0, 0, 0}, {-1, 0, 0},
	} {
		r, b, ok := m.thinnedAt(tc.keep)
		if !ok || math.Abs(r-tc.reads) > 1e-9 || math.Abs(b-tc.bytes) > 1e-9 {
			t.Errorf("thinnedAt(%g) = %g reads, %g bytes, %v; want %g, %g", tc.keep, r, b, ok, tc.reads, tc.bytes)
		}
	}
	const n = 1 << 16
	for _, keep := range ThinKeep {
		kept := 0
		for v := range int64(n) {
			if thinHash(v) < thinLimit(keep) {
				kept++
			}
		}
		if f := float64(kept) / n; math.Abs(f-keep) > 0.01 {
			t.Errorf("level %g kept %.4f of %d consecutive ids", keep, f, n)
		}
	}
}
