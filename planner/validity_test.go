package planner

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/sample"
)

// int32List is an idList over a slice.
type int32List []int32

func (l int32List) Len() int       { return len(l) }
func (l int32List) At(i int) int64 { return int64(l[i]) }

// TestValidityHand checks the history validity model (counters.hop1 and
// steady) on hand-made appearance sequences: the hits of HistRounds
// replays after the warm-up, worked out by hand in the comments.
func TestValidityHand(t *testing.T) {
	tests := []struct {
		name             string
		staleness, depth int64
		total            int64   // iterations in the repeating sequence
		epochs           []int64 // first iteration of each epoch (nil: one)
		iters            []int64 // the node's hop-1 appearances, ascending
		wantHits         uint32  // over HistRounds rounds
	}{
		// Every other iteration; a push serves 4 iterations, so pushes
		// fall every 6 (at multiples of 6): 40 of the 60 counted
		// appearances hit, 3⅓ a round (one pass with the first
		// appearance wrapped counted 4).
		{"refresh only on miss", 5, 1, 10, nil, []int64{0, 2, 4, 6, 8}, 40},
		{"single appearance, long epoch", 5, 1, 10, nil, []int64{3}, 0},
		// 4 < 5: the push serves the next round's appearance, which,
		// being a hit, does not push: the round after misses. Hits
		// alternate.
		{"single appearance, short epoch", 5, 1, 4, nil, []int64{3}, 6},
		{"stale the epoch after a hit", 12, 1, 10, nil, []int64{2}, 6},
		{"adjacent, depth 1", 5, 1, 10, nil, []int64{1, 2}, 12},
		{"adjacent, depth 2: push not yet visible", 5, 2, 10, nil, []int64{1, 2}, 0},
		{"gap at depth", 5, 2, 10, nil, []int64{1, 3}, 12},
		// 9 pushes (8 ≥ 5 after 1); the next round's 1 hits (2 < 5).
		{"hit across the rounds", 5, 1, 10, nil, []int64{1, 9}, 12},
		// An epoch's first D batches are decided when it starts, after
		// the last batch of the one before: 10·r sees the push at
		// 10·r−1 although 1 < D.
		{"epoch start sees the last batch", 5, 2, 10, nil, []int64{0, 9}, 12},
		{"second epoch's start sees the first's last batch", 5, 2, 10, []int64{0, 5}, []int64{4, 5}, 12},
		{"no epoch start inside the round", 5, 2, 10, nil, []int64{4, 5}, 0},
		{"staleness 1 never hits", 1, 1, 3, nil, []int64{0, 1, 2}, 0},
		{"gap equal to staleness misses", 3, 1, 100, nil, []int64{0, 3, 6}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := memacct.Read().Bytes[memacct.Profile]
			c := newCounters(3)
			c.staleness, c.depth = tc.staleness, tc.depth
			const v = 1
			k, e := 0, 0
			for i := int64(0); i < tc.total; i++ {
				c.iter = i
				if (tc.epochs == nil && i == 0) || (e < len(tc.epochs) && tc.epochs[e] == i) {
					c.startEpoch()
					e++
				}
				if k < len(tc.iters) && tc.iters[k] == i {
					c.hop1(v, 1)
					k++
				}
			}
			if err := c.steady(tc.total); err != nil {
				t.Fatal(err)
			}
			if got := c.histAppear[v]; got != uint32(HistRounds*len(tc.iters)) {
				t.Errorf("appearances %d, want %d", got, HistRounds*len(tc.iters))
			}
			if got := c.histHits[v]; got != tc.wantHits {
				t.Errorf("hits %d, want %d", got, tc.wantHits)
			}
			if c.histAppear[0] != 0 || c.histHits[0] != 0 || c.histHits[2] != 0 {
				t.Errorf("other nodes touched: %v %v", c.histAppear, c.histHits)
			}
			if c.log != nil || c.iterStart != nil {
				t.Error("steady kept the appearance log")
			}
			if after := memacct.Read().Bytes[memacct.Profile]; after != before {
				t.Errorf("memacct.Profile %d after steady, %d before", after, before)
			}
		})
	}
}

// onceAnEpoch logs, for one epoch of T batches, each of nodes once at
// hop 1 with probability p (node v in batch v mod T) and replays c.
func onceAnEpoch(t *testing.T, c *counters, T, nodes int64, p float64) {
	t.Helper()
	for i := int64(0); i < T; i++ {
		c.iter = i
		if i == 0 {
			c.startEpoch()
		}
		for v := i; v < nodes; v += T {
			c.hop1(v, p)
		}
	}
	if err := c.steady(T); err != nil {
		t.Fatal(err)
	}
}

// TestValidityShuffled checks steady's shuffled replay against the
// closed form for nodes seen once an epoch at a uniformly random batch,
// with staleness T+D (one epoch past the reuse depth, the default): an
// entry pushed at position a serves the next epoch's appearance at b
// when b < a+D, which happens with mean probability q = Σ_a min(a+D, T) /
// T², and a hit is followed by a stale miss, so the hit fraction is
// q/(1+q). The replay is deterministic in its seed, so the tolerance is
// not a flake risk; it covers 12 rounds of 15 batches' draws.
func TestValidityShuffled(t *testing.T) {
	const (
		T     = 15
		D     = 2
		nodes = 3000
		seed  = 7
	)
	c := newCounters(nodes)
	c.staleness, c.depth, c.shuffle, c.seed = T+D, D, true, seed
	onceAnEpoch(t, c, T, nodes, 1)
	var q float64
	for a := range T {
		q += float64(min(a+D, T)) / T
	}
	q /= T
	want := q / (1 + q)
	var hits float64
	for _, h := range c.histHits {
		hits += float64(h)
	}
	got := hits / (HistRounds * nodes)
	t.Logf("seed %d: hit fraction %.4f, closed form %.4f (without shuffling: 0.5)", seed, got, want)
	if math.Abs(got-want) > 0.05 {
		t.Errorf("hit fraction %.4f, want %.4f ± 0.05", got, want)
	}
	// In profiled order every node alternates: hit, stale miss.
	c = newCounters(nodes)
	c.staleness, c.depth = T+D, D
	onceAnEpoch(t, c, T, nodes, 1)
	for v, h := range c.histHits {
		if h != HistRounds/2 {
			t.Fatalf("profiled order: node %d hit %d of %d rounds, want every other", v, h, HistRounds)
		}
	}
}

// TestHop1Fanout checks the possible hop-1 appearances of a hand-made
// batch and their probabilities, and the replay of uncertain ones
// against the closed form: a node possible once an epoch with
// probability π at a random batch, Staleness T+D, hits a share
// π·q/(1+π·q) of its appearances (a push is followed by an appearance
// soon enough with probability π·q, and a hit by a stale miss).
func TestHop1Fanout(t *testing.T) {
	lists := map[int64][]int32{0: {2, 3, 1}, 1: {2, 4, 5, 6, 2}}
	c := newCounters(8)
	c.hop1Fanout([]int64{0, 1}, 2, func(v int64) idList { return int32List(lists[v]) })
	// π = 2/3 for target 0 and 2/5 for 1 (2 listed twice by 1).
	p := func(x float64) uint16 { return uint16(math.Round(x * math.MaxUint16)) }
	pi0, pi1 := 2.0/3, 2.0/5
	q2 := 1 - (1-pi0)*(1-pi1)*(1-pi1)
	if want := []uint32{2, 3, 4, 5, 6}; !slices.Equal(c.log, want) {
		t.Errorf("logged %v, want %v", c.log, want)
	}
	if want := []uint16{p(q2), p(pi0), p(pi1), p(pi1), p(pi1)}; !slices.Equal(c.logP, want) {
		t.Errorf("probabilities %v, want %v", c.logP, want)
	}
	for v, r := range c.reach {
		if r != 0 {
			t.Errorf("reach[%d] = %g after the batch", v, r)
		}
	}
	if err := c.steady(1); err != nil {
		t.Fatal(err)
	}

	const (
		T     = 15
		D     = 2
		nodes = 3000
		pi    = 0.25
	)
	c = newCounters(nodes)
	c.staleness, c.depth, c.shuffle, c.seed = T+D, D, true, 11
	onceAnEpoch(t, c, T, nodes, pi)
	var q float64
	for a := range T {
		q += float64(min(a+D, T)) / T
	}
	q /= T
	var appear, hits float64
	for v := range c.histHits {
		appear += float64(c.histAppear[v])
		hits += float64(c.histHits[v])
	}
	perRound, frac, want := appear/(HistRounds*nodes), hits/appear, pi*q/(1+pi*q)
	t.Logf("appearances %.4f a round (π %g); hit share %.4f, closed form %.4f", perRound, pi, frac, want)
	if math.Abs(perRound-pi) > 0.01 || math.Abs(frac-want) > 0.03 {
		t.Errorf("appearances %.4f a round, want %g ± 0.01; hit share %.4f, want %.4f ± 0.03", perRound, pi, frac, want)
	}
}

// TestHistLogBytesBounds checks HistLogBytes by hand, and against the
// appearance log a real sampler's batches build (its bytes counted in
// memacct.Profile as it grows), and that steady releases the log.
func TestHistLogBytesBounds(t *testing.T) {
	// Degrees 3, 0, 5, 2.
	indptr := []int64{0, 3, 3, 8, 10}
	for _, tc := range []struct {
		train        []int64
		epochs, want int64
	}{
		{[]int64{0, 2}, 1, 6*8 + 8*3},
		{[]int64{0, 1, 2, 3}, 2, 2 * (6*10 + 8*5)},
		{nil, 0, 8},
	} {
		if got := HistLogBytes(indptr, tc.train, tc.epochs); got != tc.want {
			t.Errorf("HistLogBytes(%v, %d) = %d, want %d", tc.train, tc.epochs, got, tc.want)
		}
	}
	ctx := context.Background()
	d := testDataset(t)
	for _, tc := range []struct {
		fanouts []int
		epochs  int
	}{{[]int{5, 5}, 1}, {[]int{-1, -1}, 1}, {[]int{5, 5, 5}, 3}} {
		o := (&ProfileOptions{Fanouts: tc.fanouts, BatchSize: 64, Seed: 3, PresampleEpochs: tc.epochs}).withDefaults()
		so := o.samplerOptions()
		s, err := sample.New(d, nil, &so)
		if err != nil {
			t.Fatal(err)
		}
		before := memacct.Read().Bytes[memacct.Profile]
		c, an := newCounters(d.NumNodes()), &analyzer{lists: func(v int64) idList { return d.Neighbors(v) }, hop1Fanout: tc.fanouts[len(tc.fanouts)-1]}
		for e := range tc.epochs {
			c.startEpoch()
			if err := eachBatch(ctx, s, e, o.Progress, "", func(b *sample.Batch, _ *sample.Plan) error { an.add(b, c); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		appear := int64(len(c.log))
		counted := memacct.Read().Bytes[memacct.Profile] - before
		bound := HistLogBytes(d.Indptr(), d.TrainIdx(), int64(tc.epochs))
		t.Logf("fanouts %v, %d epochs, %d iterations: %d appearances, log %d bytes counted, bound %d", tc.fanouts, tc.epochs, c.iter, appear, counted, bound)
		if counted != c.logged || counted < 6*appear+8*c.iter || counted > bound {
			t.Errorf("fanouts %v, %d epochs: log of %d appearances counted %d bytes (logged %d); want at least %d and at most %d",
				tc.fanouts, tc.epochs, appear, counted, c.logged, 6*appear+8*c.iter, bound)
		}
		if err := c.steady(c.iter); err != nil {
			t.Fatal(err)
		}
		if after := memacct.Read().Bytes[memacct.Profile]; after != before {
			t.Errorf("memacct.Profile %d after steady, %d before", after, before)
		}
	}
}

// TestPlanValidityScales checks that Plan weights each node's history
// benefit by its hit fraction and predicts the hits as reused nodes.
func TestPlanValidityScales(t *testing.T) {
	const n = 4
	p := &Profile{Meta: Meta{Name: "v", NumNodes: n, FeatRowBytes: 16, IDBytes: 4, Beta: 1, PresampleEpochs: 1, Staleness: 100, ReuseDepth: 1, Fanouts: []int{5, 5}},
		Feat: make([]uint32, n), HistSample: make([]uint32, n), HistGather: []uint32{40, 30, 0, 0}, Nbr: make([]uint32, n),
		HistAppear: []uint32{4 * HistRounds, 3 * HistRounds, 0, 0}, HistHits: []uint32{1 * HistRounds, 3 * HistRounds, 0, 0}}
	p.Meta.HistRounds, p.Meta.HistModel = HistRounds, histModel
	// Room for the two tables plus a generous history share.
	// Degrees 10, 2, 0, 0.
	opts := &PlanOptions{MemBytes: 1 << 20, Hidden: 4, Decoupled: true, Step: 0.5, Indptr: []int64{0, 10, 12, 12, 12}}
	res, err := Plan(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Node 0: 40·1/4 = 10 rows, node 1: 30·3/3 = 30 rows.
	if got := res.Predicted.HistGatherRows; got != 40 {
		t.Errorf("HistGatherRows %g, want 40", got)
	}
	if got := res.Predicted.HistReusedNodes; got != 4 {
		t.Errorf("HistReusedNodes %g, want 4", got)
	}
	// 1 hit × min(5, 10) + 3 hits × min(5, 2).
	if got := res.Predicted.HistSkippedDraws; got != 11 {
		t.Errorf("HistSkippedDraws %g, want 11", got)
	}
	if _, err := Plan(p, &PlanOptions{MemBytes: 1 << 20, Hidden: 4, Decoupled: true, Staleness: 50}); err == nil {
		t.Error("Plan accepted a Staleness the profile did not model")
	}
	// An old profile (no validity arrays) keeps OUTRE's assumption.
	p.HistAppear, p.HistHits, p.Meta.Staleness = nil, nil, 0
	res, err = Plan(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Predicted.HistGatherRows; got != 70 {
		t.Errorf("old profile: HistGatherRows %g, want 70", got)
	}
}

// TestPlanPricesHistoryThinned: with thinned read counts, Plan prices
// the rows left after the history cache at the level of the share it
// predicts removing (HistGatherRows ÷ GatheredRows), reads that rise as
// fewer rows merge; without them, as before, it subtracts a mean row's.
func TestPlanPricesHistoryThinned(t *testing.T) {
	const n = 4
	rm := &ReadModel{RandomReadsPerSec: 1000, SeqBytesPerSec: 1 << 20, CostSource: "test", Rows: 400, Reads: 20, BytesRead: 400 * 16,
		SingleReads: 10, SingleBytes: 10 * 16,
		Thinned: []ThinnedReads{{0.9, 60, 360 * 16}, {0.5, 150, 200 * 16}}}
	p := &Profile{Meta: Meta{Name: "v", NumNodes: n, FeatRowBytes: 16, IDBytes: 4, Beta: 1, PresampleEpochs: 1, Staleness: 100, ReuseDepth: 1,
		Fanouts: []int{5, 5}, GatheredRows: 400, HistRounds: HistRounds, HistModel: histModel, Reads: rm},
		Feat: make([]uint32, n), FeatSingle: make([]uint32, n), HistSample: make([]uint32, n), HistGather: []uint32{40, 30, 0, 0}, Nbr: make([]uint32, n),
		HistAppear: []uint32{4 * HistRounds, 3 * HistRounds, 0, 0}, HistHits: []uint32{1 * HistRounds, 3 * HistRounds, 0, 0}}
	opts := &PlanOptions{MemBytes: 1 << 20, Hidden: 4, Decoupled: true, Step: 0.5}
	res, err := Plan(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	// 40 of 400 rows removed: keep 0.9, the first level's counts.
	pr := res.Predicted
	if pr.HistGatherRows != 40 || pr.GatherReads != 60 || pr.GatherBytesRead != 360*16 {
		t.Errorf("history rows %g: %g reads, %g bytes; want 40 rows, 60 reads, %d bytes", pr.HistGatherRows, pr.GatherReads, pr.GatherBytesRead, 360*16)
	}
	// Without them: 20 reads less 40 rows × 10 of 400 rows read alone.
	rm.Thinned = nil
	if res, err = Plan(p, opts); err != nil {
		t.Fatal(err)
	}
	if pr := res.Predicted; pr.GatherReads != 19 || pr.GatherBytesRead != 360*16 {
		t.Errorf("without thinned counts: %g reads, %g bytes; want 19, %d", pr.GatherReads, pr.GatherBytesRead, 360*16)
	}
}
