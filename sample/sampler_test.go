package sample_test

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func collect(t testing.TB, s *sample.Sampler, epoch int) ([]*sample.Batch, sample.LookupStats) {
	t.Helper()
	it := s.Epoch(context.Background(), epoch)
	defer it.Close()
	var out []*sample.Batch
	for {
		b, err := it.Next()
		if errors.Is(err, io.EOF) {
			return out, it.Stats()
		}
		if err != nil {
			t.Fatal(err)
		}
		untimed(t, b)
		out = append(out, b)
	}
}

// untimed checks that b records its sampling time and zeroes it, the one
// field that differs between runs, so that batches compare equal.
func untimed(t testing.TB, b *sample.Batch) {
	t.Helper()
	if !(b.SampleSeconds > 0) {
		t.Fatalf("batch %d: sample seconds %v, want > 0", b.Index, b.SampleSeconds)
	}
	b.SampleSeconds = 0
}

// checkBatch verifies the block invariants of the package doc.
func checkBatch(t *testing.T, d *storage.Dataset, fanouts []int, b *sample.Batch, reuse sample.NodeSet) {
	t.Helper()
	L := len(b.Blocks)
	if L != len(fanouts) {
		t.Fatalf("batch %d: %d blocks, want %d", b.Index, L, len(fanouts))
	}
	all := b.Nodes()
	seen := map[int64]bool{}
	for _, v := range all {
		if seen[v] {
			t.Fatalf("batch %d: node %d twice in Blocks[0].Src", b.Index, v)
		}
		seen[v] = true
	}
	reused := map[int32]bool{}
	for _, id := range b.Reused {
		reused[id] = true
		if int(id) < len(b.Targets()) || int(id) >= len(b.Blocks[L-1].Src) || !reuse.Contains(all[id]) {
			t.Fatalf("batch %d: reused local id %d is not a reusable hop-1 node", b.Index, id)
		}
	}
	for l := L - 1; l >= 0; l-- {
		blk := &b.Blocks[l]
		if !slices.Equal(blk.Src, all[:len(blk.Src)]) {
			t.Fatalf("batch %d block %d: Src not a prefix of Blocks[0].Src", b.Index, l)
		}
		if l < L-1 && blk.NumDst != len(b.Blocks[l+1].Src) {
			t.Fatalf("batch %d block %d: NumDst %d, want len(Blocks[%d].Src) = %d", b.Index, l, blk.NumDst, l+1, len(b.Blocks[l+1].Src))
		}
		if blk.NumDst > len(blk.Src) || len(blk.Indptr) != blk.NumDst+1 || blk.Indptr[0] != 0 || blk.Indptr[blk.NumDst] != int64(len(blk.Indices)) {
			t.Fatalf("batch %d block %d: malformed CSR", b.Index, l)
		}
		reached := make([]bool, len(blk.Src))
		for i := 0; i < blk.NumDst; i++ {
			v := blk.Src[i]
			nb := blk.Indices[blk.Indptr[i]:blk.Indptr[i+1]]
			real := d.Neighbors(v).AppendTo(nil)
			want := len(real)
			if fanouts[l] >= 0 {
				want = min(want, fanouts[l])
			}
			if l < L-1 && reused[int32(i)] {
				want = 0
			}
			if len(nb) != want {
				t.Fatalf("batch %d block %d: node %d has %d sampled neighbours, want %d", b.Index, l, v, len(nb), want)
			}
			got := map[int64]bool{}
			for _, id := range nb {
				if id < 0 || int(id) >= len(blk.Src) {
					t.Fatalf("batch %d block %d: local id %d out of range", b.Index, l, id)
				}
				u := blk.Src[id]
				if got[u] {
					t.Fatalf("batch %d block %d: node %d sampled %d twice", b.Index, l, v, u)
				}
				got[u] = true
				if _, ok := slices.BinarySearch(real, u); !ok {
					t.Fatalf("batch %d block %d: edge %d->%d does not exist", b.Index, l, v, u)
				}
				reached[id] = true
			}
		}
		for id := blk.NumDst; id < len(blk.Src); id++ {
			if !reached[id] {
				t.Fatalf("batch %d block %d: new source %d not reached by any edge", b.Index, l, id)
			}
		}
	}
}

func TestBlocksWellFormed(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	adj, part, train := communityGraph(r, 12, 40, 8, 4, 3)
	d := writeDataset(t, adj, train, 4)
	parts, err := sample.NewMemPartitions(d, 12, part)
	if err != nil {
		t.Fatal(err)
	}
	hist := sample.TopDegree(d, 0.2)
	for _, tc := range []struct {
		name string
		o    sample.Options
	}{
		{"random", sample.Options{Fanouts: []int{3, 4, 5}, BatchSize: 17}},
		{"all neighbours", sample.Options{Fanouts: []int{-1, -1}, BatchSize: 50}},
		{"one layer", sample.Options{Fanouts: []int{2}, BatchSize: 9}},
		{"partition", sample.Options{Fanouts: []int{5, 5, 5}, BatchSize: 20, Mode: sample.ModePartition, PartsPerBatch: 3}},
		{"partition reuse", sample.Options{Fanouts: []int{5, 5, 5}, BatchSize: 20, Mode: sample.ModePartition, PartsPerBatch: 3, Reuse: hist}},
		{"pread reuse", sample.Options{Fanouts: []int{100, 3}, BatchSize: 30, Source: sample.SourcePread, Reuse: hist}},
		{"batch reuse", sample.Options{Fanouts: []int{100, 3}, BatchSize: 30, Source: sample.SourceBatch, Reuse: hist}},
		{"batch partition reuse", sample.Options{Fanouts: []int{5, 5, 5}, BatchSize: 20, Mode: sample.ModePartition, PartsPerBatch: 3, Reuse: hist, Source: sample.SourceBatch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Seed = seed
			s, err := sample.New(d, parts, &o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bs, _ := collect(t, s, 1)
			var targets []int64
			for i, b := range bs {
				if b.Index != i {
					t.Fatalf("batch %d delivered at position %d", b.Index, i)
				}
				checkBatch(t, d, o.Fanouts, b, hist)
				targets = append(targets, b.Targets()...)
			}
			slices.Sort(targets)
			if !slices.Equal(targets, d.TrainIdx()) {
				t.Fatalf("targets over the epoch are not the training set exactly once")
			}
		})
	}
}

// TestPlanCoversTrainOnce: every training node is a target exactly once
// per epoch; in partition mode each batch's targets come from its macro
// batch's partitions, grouped by partition.
func TestPlanCoversTrainOnce(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 8))
	adj, part, train := communityGraph(r, 30, 20, 6, 2, 2)
	d := writeDataset(t, adj, train, 0)
	parts, err := sample.NewMemPartitions(d, 30, part)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []sample.Mode{sample.ModeRandom, sample.ModePartition} {
		s, err := sample.New(d, parts, &sample.Options{Mode: mode, BatchSize: 7, PartsPerBatch: 4, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		for epoch := range 3 {
			pl, err := s.Plan(epoch)
			if err != nil {
				t.Fatal(err)
			}
			var all []int64
			for i, b := range pl.Batches {
				if len(b) == 0 || len(b) > sample.MaxBatchTargets(7, mode) {
					t.Fatalf("%s: batch %d has %d targets", mode, i, len(b))
				}
				all = append(all, b...)
				if mode == sample.ModePartition {
					// Targets are grouped by partition, in the macro
					// batch's order, so consecutive targets (a
					// micro-batch's) span few partitions.
					ps := pl.MacroParts[pl.Macro[i]]
					last := 0
					for _, v := range b {
						at := slices.Index(ps, int(part[v]))
						if at < 0 {
							t.Fatalf("node %d of batch %d is not in its macro batch's partitions %v", v, i, ps)
						}
						if at < last {
							t.Fatalf("batch %d: targets not grouped by partition in the macro batch's order %v: %v", i, ps, b)
						}
						last = at
					}
				}
			}
			slices.Sort(all)
			if !slices.Equal(all, d.TrainIdx()) {
				t.Fatalf("%s epoch %d: training nodes not covered exactly once", mode, epoch)
			}
			if mode == sample.ModePartition {
				var used []int
				for _, ps := range pl.MacroParts {
					used = append(used, ps...)
				}
				slices.Sort(used)
				for i := 1; i < len(used); i++ {
					if used[i] == used[i-1] {
						t.Fatalf("partition %d used twice in epoch %d", used[i], epoch)
					}
				}
			}
		}
		s.Close()
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 9))
	adj, part, train := communityGraph(r, 10, 50, 10, 4, 2)
	d := writeDataset(t, adj, train, 0)
	parts, _ := sample.NewMemPartitions(d, 10, part)
	run := func(workers int, src sample.Source) []*sample.Batch {
		s, err := sample.New(d, parts, &sample.Options{Fanouts: []int{4, 4}, BatchSize: 13, Mode: sample.ModePartition, PartsPerBatch: 2, Seed: seed, Workers: workers, Prefetch: 1, Source: src})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		bs, _ := collect(t, s, 2)
		return bs
	}
	a, b, c, e := run(1, sample.SourceMmap), run(3, sample.SourceMmap), run(2, sample.SourcePread), run(2, sample.SourceBatch)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) || !reflect.DeepEqual(a, e) {
		t.Fatal("batches differ with the number of workers or the source")
	}
	s, _ := sample.New(d, parts, &sample.Options{Fanouts: []int{4, 4}, BatchSize: 13, Mode: sample.ModePartition, PartsPerBatch: 2, Seed: seed + 1})
	defer s.Close()
	other, _ := collect(t, s, 2)
	if reflect.DeepEqual(a, other) {
		t.Fatal("different seeds gave identical batches")
	}
}

// TestUniform checks with a chi-square test that each of a node's
// neighbours is sampled equally often.
func TestUniform(t *testing.T) {
	seed := testSeed(t)
	const hubs, deg, fanout, epochs = 200, 20, 5, 10
	adj := make([][]int64, hubs+hubs*deg)
	var train []int64
	for h := 0; h < hubs; h++ {
		for j := 0; j < deg; j++ {
			adj[h] = append(adj[h], int64(hubs+h*deg+j))
		}
		train = append(train, int64(h))
	}
	d := writeDataset(t, adj, train, 0)
	s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{fanout}, BatchSize: 64, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counts := make([]float64, deg)
	pairs := map[[2]int]float64{}
	for e := range epochs {
		bs, _ := collect(t, s, e)
		for _, b := range bs {
			blk := b.Blocks[0]
			for i := 0; i < blk.NumDst; i++ {
				h := blk.Src[i]
				var pos []int
				for _, id := range blk.Indices[blk.Indptr[i]:blk.Indptr[i+1]] {
					pos = append(pos, int(blk.Src[id]-int64(hubs)-h*deg))
				}
				slices.Sort(pos)
				for a, p := range pos {
					counts[p]++
					for _, q := range pos[a+1:] {
						pairs[[2]int{p, q}]++
					}
				}
			}
		}
	}
	expect := float64(hubs*epochs*fanout) / deg
	var chi float64
	for _, c := range counts {
		chi += (c - expect) * (c - expect) / expect
	}
	// 19 degrees of freedom: P(chi2 > 43.82) = 0.001.
	if chi > 43.82 {
		t.Fatalf("position counts %v: chi-square %.1f > 43.82 (p < 0.001)", counts, chi)
	}
	// Pairs: every pair should appear with probability C(18,3)/C(20,5).
	pexp := float64(hubs*epochs) * float64(fanout*(fanout-1)) / float64(deg*(deg-1))
	var chiPairs float64
	for p := 0; p < deg; p++ {
		for q := p + 1; q < deg; q++ {
			c := pairs[[2]int{p, q}]
			chiPairs += (c - pexp) * (c - pexp) / pexp
		}
	}
	// 189 degrees of freedom (pairs are not independent, so this is a
	// loose sanity bound): mean 189, sd ~19.4; 6 sd above.
	if df := float64(deg*(deg-1)/2 - 1); chiPairs > df+6*math.Sqrt(2*df) {
		t.Fatalf("pair chi-square %.1f too large", chiPairs)
	}
	t.Logf("chi-square positions %.1f (19 df), pairs %.1f", chi, chiPairs)
}

func TestLookupAccounting(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 10))
	adj, part, train := communityGraph(r, 20, 30, 8, 4, 2)
	d := writeDataset(t, adj, train, 0)
	parts, _ := sample.NewMemPartitions(d, 20, part)
	for _, tc := range []struct {
		name   string
		mode   sample.Mode
		policy neighborcache.Policy
		budget int64
		src    sample.Source
	}{
		{"random no cache", sample.ModeRandom, neighborcache.PolicyDegree, 0, sample.SourceMmap},
		{"random degree", sample.ModeRandom, neighborcache.PolicyDegree, 8 << 10, sample.SourceMmap},
		{"partition cross", sample.ModePartition, neighborcache.PolicyCross, 8 << 10, sample.SourceMmap},
		{"partition no cache", sample.ModePartition, neighborcache.PolicyCross, 0, sample.SourceMmap},
		{"batch random degree", sample.ModeRandom, neighborcache.PolicyDegree, 8 << 10, sample.SourceBatch},
		{"batch partition cross", sample.ModePartition, neighborcache.PolicyCross, 8 << 10, sample.SourceBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := neighborcache.Build(d, &neighborcache.Options{Budget: tc.budget, Policy: tc.policy, Cross: parts.Cross()})
			if err != nil {
				t.Fatal(err)
			}
			s, err := sample.New(d, parts, &sample.Options{Fanouts: []int{5, 5}, BatchSize: 25, Mode: tc.mode, PartsPerBatch: 4, Seed: seed, NeighborCache: nc, Source: tc.src})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bs, tot := collect(t, s, 0)
			pl, err := s.Plan(0)
			if err != nil {
				t.Fatal(err)
			}
			var sum sample.LookupStats
			seenMacro := map[int]bool{}
			for _, b := range bs {
				// The first batch of each macro batch carries its dynamic
				// cache's memory, which holds at least the lists loaded.
				first := b.Macro >= 0 && !seenMacro[b.Macro]
				seenMacro[b.Macro] = true
				if first != (b.DynamicBytes > 0) || b.DynamicBytes < b.Stats.LoadBytes {
					t.Fatalf("batch %d (macro %d, first %v): dynamic bytes %d, loaded %d", b.Index, b.Macro, first, b.DynamicBytes, b.Stats.LoadBytes)
				}
				check := func(st sample.LookupStats) {
					if st.Dynamic.Hits+st.Dynamic.Misses != st.Lookups ||
						st.Global.Hits+st.Global.Misses != st.Dynamic.Misses ||
						st.Storage.Hits != st.Global.Misses || st.Storage.Misses != 0 ||
						st.Global.Hits+st.Dynamic.Hits+st.Storage.Hits != st.Lookups {
						t.Fatalf("batch %d: hits and misses do not add up: %+v", b.Index, st)
					}
				}
				check(b.Stats)
				// Lookups = unique expanded nodes: every dst of Blocks[0].
				if b.Stats.Lookups != int64(b.Blocks[0].NumDst) {
					t.Fatalf("batch %d: %d lookups, want %d", b.Index, b.Stats.Lookups, b.Blocks[0].NumDst)
				}
				var bytes int64
				for _, v := range b.Blocks[0].Dst() {
					bytes += d.Neighbors(v).Bytes()
				}
				if b.Stats.BytesRequested() != bytes {
					t.Fatalf("batch %d: %d bytes requested, want %d", b.Index, b.Stats.BytesRequested(), bytes)
				}
				// Sampled: every edge of every block, counted at the
				// level that served its destination's list: the macro
				// batch's partitions first, then the global cache.
				inMacro := map[int32]bool{}
				if b.Macro >= 0 {
					for _, p := range pl.MacroParts[b.Macro] {
						inMacro[int32(p)] = true
					}
				}
				var edges, global int64
				for l := range b.Blocks {
					blk := &b.Blocks[l]
					for u := 0; u < blk.NumDst; u++ {
						n := blk.Indptr[u+1] - blk.Indptr[u]
						edges += n
						if _, ok := nc.Lookup(blk.Src[u]); ok && !inMacro[part[blk.Src[u]]] {
							global += n
						}
					}
				}
				if b.Stats.SampledTotal() != edges || b.Stats.Global.Sampled != global {
					t.Fatalf("batch %d: sampled %d (global %d), want %d (global %d): %+v", b.Index, b.Stats.SampledTotal(), b.Stats.Global.Sampled, edges, global, b.Stats)
				}
				if tc.mode == sample.ModeRandom && b.Stats.Dynamic.Sampled != 0 {
					t.Fatalf("batch %d: %d drawn from a dynamic cache in random mode", b.Index, b.Stats.Dynamic.Sampled)
				}
				sum.Add(b.Stats)
			}
			if sum != tot {
				t.Fatalf("iterator stats %+v != sum of batches %+v", tot, sum)
			}
			if tc.budget > 0 && tot.Global.Hits == 0 {
				t.Fatal("cache never hit")
			}
			if tc.mode == sample.ModePartition && (tot.Dynamic.Hits == 0 || tot.LoadBytes == 0 || tot.Dynamic.Sampled == 0) {
				t.Fatalf("dynamic cache unused: %+v", tot)
			}
			if tc.mode == sample.ModeRandom && tot.Dynamic.Hits != 0 {
				t.Fatal("dynamic hits in random mode")
			}
		})
	}
}

func TestCancelStopsWorkers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 11))
	adj, _, train := communityGraph(r, 10, 50, 10, 4, 1)
	d := writeDataset(t, adj, train, 0)
	s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{3, 3}, BatchSize: 5, Workers: 3, Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	it := s.Epoch(ctx, 0)
	if _, err := it.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := it.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	it.Close()
	// Closing early without cancelling also stops everything.
	it = s.Epoch(context.Background(), 1)
	it.Next()
	it.Close()
	if _, err := it.Next(); err == nil {
		t.Fatal("Next after Close succeeded")
	}
	goleak.VerifyNone(t)
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *sample.Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &sample.Options{}, true},
		{"zero fanout", &sample.Options{Fanouts: []int{0}}, false},
		{"bad fanout", &sample.Options{Fanouts: []int{-2}}, false},
		{"negative batch", &sample.Options{BatchSize: -1}, false},
		{"bad mode", &sample.Options{Mode: "metis"}, false},
		{"bad source", &sample.Options{Source: 9}, false},
		{"batch", &sample.Options{Source: sample.SourceBatch, ReadGapBytes: 4096, MaxReadAmp: 3, IO: storage.IOPread}, true},
		{"per-list uncapped", &sample.Options{Source: sample.SourceBatch, ReadGapBytes: sample.PerListReads, MaxReadAmp: sample.UncappedReads}, true},
		{"bad gap", &sample.Options{ReadGapBytes: -2}, false},
		{"amp below 1", &sample.Options{MaxReadAmp: 0.5}, false},
		{"amp inf", &sample.Options{MaxReadAmp: math.Inf(1)}, false},
		{"amp NaN", &sample.Options{MaxReadAmp: math.NaN()}, false},
		{"bad engine", &sample.Options{IO: 7}, false},
	} {
		err := tc.o.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, sample.ErrInvalidOptions) {
			t.Errorf("%s: %v does not wrap ErrInvalidOptions", tc.name, err)
		}
	}
}

// TestBoundsHugeFanouts: a fanout beyond the graph's edges bounds a batch
// as a fanout of the edges would (a list is no longer), without
// overflowing on a large graph; a fanout past sample.MaxFanout is refused.
func TestBoundsHugeFanouts(t *testing.T) {
	const n, e = 2708, 10556
	huge := sample.WorkerBytesBound(1000, []int{sample.MaxFanout, sample.MaxFanout}, n, e, sample.SourcePread)
	capped := sample.WorkerBytesBound(1000, []int{e, e}, n, e, sample.SourcePread)
	if huge != capped || huge <= 0 || huge > 64<<20 {
		t.Errorf("fanouts %d: bound %d bytes, fanouts %d: %d; want equal, and under 64 MiB for a %d-edge graph", sample.MaxFanout, huge, e, capped, e)
	}
	if b := sample.WorkerBytesBound(1<<20, []int{sample.MaxFanout, sample.MaxFanout, sample.MaxFanout}, 1<<30, 1<<34, sample.SourceBatch); b <= 0 {
		t.Errorf("a 2^34-edge graph at fanout %d: bound %d (overflow)", sample.MaxFanout, b)
	}
	for _, f := range []int{sample.MaxFanout + 1, 0, -2} {
		if err := (&sample.Options{Fanouts: []int{f, 5}}).Validate(); !errors.Is(err, sample.ErrInvalidOptions) {
			t.Errorf("fanout %d: %v, want sample.ErrInvalidOptions", f, err)
		}
	}
	if err := (&sample.Options{Fanouts: []int{sample.MaxFanout, -1}}).Validate(); err != nil {
		t.Errorf("fanouts sample.MaxFanout,-1: %v", err)
	}
}
