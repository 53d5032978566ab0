package planner

import "testing"

// TestValidityHand checks the history validity model (counters.hop1 and
// wrap) on hand-made appearance sequences.
func TestValidityHand(t *testing.T) {
	tests := []struct {
		name             string
		staleness, depth int64
		total            int64   // iterations in the repeating sequence
		iters            []int64 // the node's hop-1 appearances, ascending
		wantHits         uint32
	}{
		// 0 miss (push 0), 2 and 4 hit, 6 miss (6−0 ≥ 5, push 6), 8 hit;
		// wrap: 0+10−6 = 4 < 5, so the first appearance hits too.
		{"refresh only on miss", 5, 1, 10, []int64{0, 2, 4, 6, 8}, 4},
		{"single appearance, long epoch", 5, 1, 10, []int64{3}, 0},
		{"single appearance, short epoch", 5, 1, 4, []int64{3}, 1},
		{"adjacent, depth 1", 5, 1, 10, []int64{1, 2}, 1},
		{"adjacent, depth 2: push not yet visible", 5, 2, 10, []int64{1, 2}, 0},
		{"gap at depth", 5, 2, 10, []int64{1, 3}, 1},
		// 1 miss, 9 miss (8 ≥ 5); wrap: 1+10−9 = 2 < 5 hits.
		{"hit across the wrap", 5, 1, 10, []int64{1, 9}, 1},
		{"staleness 1 never hits", 1, 1, 3, []int64{0, 1, 2}, 0},
		{"gap equal to staleness misses", 3, 1, 100, []int64{0, 3, 6}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounters(3)
			c.staleness, c.depth = tc.staleness, tc.depth
			const v = 1
			k := 0
			for i := int64(0); i < tc.total; i++ {
				c.iter = i
				if k < len(tc.iters) && tc.iters[k] == i {
					c.hop1(v)
					k++
				}
			}
			c.wrap(tc.total)
			if got := c.histAppear[v]; got != uint32(len(tc.iters)) {
				t.Errorf("appearances %d, want %d", got, len(tc.iters))
			}
			if got := c.histHits[v]; got != tc.wantHits {
				t.Errorf("hits %d, want %d", got, tc.wantHits)
			}
			if c.histAppear[0] != 0 || c.histHits[0] != 0 || c.histHits[2] != 0 {
				t.Errorf("other nodes touched: %v %v", c.histAppear, c.histHits)
			}
			if c.lastPush != nil || c.firstSeen != nil {
				t.Error("wrap kept the transient arrays")
			}
		})
	}
}

// TestPlanValidityScales checks that Plan weights each node's history
// benefit by its hit fraction and predicts the hits as reused nodes.
func TestPlanValidityScales(t *testing.T) {
	const n = 4
	p := &Profile{Meta: Meta{Name: "v", NumNodes: n, FeatRowBytes: 16, IDBytes: 4, Beta: 1, PresampleEpochs: 1, Staleness: 100, ReuseDepth: 1, Fanouts: []int{5, 5}},
		Feat: make([]uint32, n), HistSample: make([]uint32, n), HistGather: []uint32{40, 30, 0, 0}, Nbr: make([]uint32, n),
		HistAppear: []uint32{4, 3, 0, 0}, HistHits: []uint32{1, 3, 0, 0}}
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
