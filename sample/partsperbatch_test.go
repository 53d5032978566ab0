package sample

import (
	"slices"
	"testing"
)

// trainParts is a Partitions with given training nodes per partition and
// no adjacency.
type trainParts [][]int64

func (p trainParts) K() int                                   { return len(p) }
func (p trainParts) TrainMembers(i int) []int64               { return p[i] }
func (p trainParts) LoadAdjacency([]int, *DynamicCache) error { return nil }
func (p trainParts) Cross() []int32                           { return nil }

func uniformParts(k, perPart int) trainParts {
	p := make(trainParts, k)
	for i := range p {
		p[i] = make([]int64, perPart)
	}
	return p
}

func TestPartsPerBatchFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts trainParts
		batch int
		want  int
	}{
		// The repro: 1000 parts of ~20 training nodes, batch 1000.
		{"20 per part", uniformParts(1000, 20), 1000, 50},
		{"rounds to nearest", uniformParts(100, 30), 1000, 33},
		{"at least one", uniformParts(10, 5000), 1000, 1},
		{"at most K", uniformParts(10, 1), 1000, 10},
		// Empty partitions count: macro batches draw them too.
		{"empty parts", append(uniformParts(50, 40), uniformParts(50, 0)...), 1000, 50},
		{"no training nodes", uniformParts(100, 0), 1000, DefaultPartsPerBatch},
		{"no training nodes, few parts", uniformParts(3, 0), 1000, 3},
	} {
		if got := PartsPerBatchFor(tc.parts, tc.batch); got != tc.want {
			t.Errorf("%s: PartsPerBatchFor = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestPartitionBatchesMatchBatchSize checks the derivation end to end: with
// PartsPerBatch left 0, the sampler's partition batches hold about
// BatchSize training nodes on average, as random batches do.
func TestPartitionBatchesMatchBatchSize(t *testing.T) {
	parts := uniformParts(400, 20)
	var id int64
	for _, p := range parts {
		for i := range p {
			p[i] = id
			id++
		}
	}
	s := &Sampler{parts: parts, o: Options{Mode: ModePartition, BatchSize: 1000, PartsPerBatch: PartsPerBatchFor(parts, 1000)}}
	pl, err := s.Plan(0)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, b := range pl.Batches {
		n += len(b)
	}
	if mean := float64(n) / float64(len(pl.Batches)); mean < 900 || mean > 1000 {
		t.Errorf("mean partition batch %.0f training nodes over %d batches, want about 1000", mean, len(pl.Batches))
	}
}

// TestIDMapBytesMeasured: IDMapBytes is what newIDMap allocates.
func TestIDMapBytesMeasured(t *testing.T) {
	for _, n := range []int64{1000, denseLimit, denseLimit + 1} {
		m := newIDMap(n)
		if got := int64(4 * len(m.local)); got != IDMapBytes(n) {
			t.Errorf("n=%d: newIDMap holds %d bytes of dense map, IDMapBytes says %d", n, got, IDMapBytes(n))
		}
	}
}

// TestEvenCuts: a macro batch's n targets are cut into the fewest
// batches of at most bs + bs/4, sizes differing by at most one and adding
// up to n; with two or more batches each holds at least half the cap.
func TestEvenCuts(t *testing.T) {
	for _, tc := range []struct {
		n, bs int
		want  []int
	}{
		{0, 1000, []int{0, 0}},
		{80, 1000, []int{0, 80}},
		{1000, 1000, []int{0, 1000}},
		{1080, 1000, []int{0, 1080}},
		{1250, 1000, []int{0, 1250}},
		{1251, 1000, []int{0, 626, 1251}},
		{5003, 1000, []int{0, 1001, 2002, 3003, 4003, 5003}},
		{7, 2, []int{0, 2, 4, 6, 7}}, // bs/4 = 0: the cap is bs itself
		{10, 4, []int{0, 5, 10}},     // cap 5
	} {
		got := evenCuts(tc.n, tc.bs)
		if !slices.Equal(got, tc.want) {
			t.Errorf("evenCuts(%d, %d) = %v, want %v", tc.n, tc.bs, got, tc.want)
		}
	}
	for n := 0; n <= 5000; n++ {
		for _, bs := range []int{1, 2, 3, 7, 100, 1000} {
			cuts := evenCuts(n, bs)
			maxT := MaxBatchTargets(bs, ModePartition)
			lo, hi := n, 0
			for i := range len(cuts) - 1 {
				s := cuts[i+1] - cuts[i]
				lo, hi = min(lo, s), max(hi, s)
			}
			if cuts[0] != 0 || cuts[len(cuts)-1] != n || hi-lo > 1 || hi > maxT {
				t.Fatalf("evenCuts(%d, %d) = %v: not a cut of n into near-equal parts of at most %d", n, bs, cuts, maxT)
			}
			if k := len(cuts) - 1; k != max(1, (n+maxT-1)/maxT) || (k >= 2 && lo < maxT/2) {
				t.Fatalf("evenCuts(%d, %d) = %v: %d batches of %d..%d (cap %d)", n, bs, cuts, k, lo, hi, maxT)
			}
		}
	}
}

// TestMaxBatchTargets: partition batches (and auto, which may become
// them) may hold a quarter more than BatchSize; random ones BatchSize.
func TestMaxBatchTargets(t *testing.T) {
	for _, tc := range []struct {
		bs   int
		mode Mode
		want int
	}{
		{1000, ModeRandom, 1000},
		{1000, ModePartition, 1250},
		{1000, ModeAuto, 1250},
		{3, ModePartition, 3},
		{1, ModeAuto, 1},
	} {
		if got := MaxBatchTargets(tc.bs, tc.mode); got != tc.want {
			t.Errorf("MaxBatchTargets(%d, %s) = %d, want %d", tc.bs, tc.mode, got, tc.want)
		}
	}
}

// TestPartitionBatchesEven: with macro batches of uneven training
// counts, every training node is a target once, no batch exceeds
// MaxBatchTargets, a macro batch within it is one batch, and a larger one
// leaves no small remainder.
func TestPartitionBatchesEven(t *testing.T) {
	parts := make(trainParts, 60)
	var id int64
	for i := range parts {
		parts[i] = make([]int64, 10+(i*37)%90) // 10..99 per part
		for j := range parts[i] {
			parts[i][j] = id
			id++
		}
	}
	const bs = 200
	s := &Sampler{parts: parts, o: Options{Mode: ModePartition, BatchSize: bs, PartsPerBatch: 7}}
	pl, err := s.Plan(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, id)
	perMacro := map[int]int{}
	for i, b := range pl.Batches {
		perMacro[pl.Macro[i]] += len(b)
		for _, v := range b {
			if seen[v] {
				t.Fatalf("node %d is a target twice", v)
			}
			seen[v] = true
		}
	}
	for v, ok := range seen {
		if !ok {
			t.Fatalf("node %d is never a target", v)
		}
	}
	maxT := MaxBatchTargets(bs, ModePartition)
	for i, b := range pl.Batches {
		if n := perMacro[pl.Macro[i]]; len(b) > maxT || (n > maxT && len(b) < maxT/2) || (n <= maxT && len(b) != n) {
			t.Errorf("batch %d of macro batch %d (%d targets): %d targets", i, pl.Macro[i], n, len(b))
		}
	}
}

// TestRRPlotLabelRoom: the y axis of rr's chart leaves room above the
// tallest bar for its value label; it ended at the bar, and the label
// "33.6" of the 50k-node graph's random row was drawn into the title.
func TestRRPlotLabelRoom(t *testing.T) {
	res := &RRResult{Dataset: "g", Fanouts: []int{10, 10}, BatchSize: 1000,
		Rows: []RRRow{{Selection: SelRandom, RR: 33.6}, {Selection: SelPartition, RR: 29.5}}}
	p, err := rrPlot(res)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Max < 1.1*33.6 {
		t.Errorf("y axis ends at %v, no room above the tallest bar (33.6) for its label", p.Y.Max)
	}
}
