package planner

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestNbrModelOrder: the neighbour cache's candidates are ranked by score,
// highest first, ties in id order, as a stable sort of the ids ranks
// them; the model's cumulative costs, bytes and benefits follow that
// order exactly.
func TestNbrModelOrder(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		nbrModelOrder(t, seed)
	}
}

func nbrModelOrder(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 21))
	const n = 5000
	indptr := make([]int64, n+1)
	for v := range int64(n) {
		indptr[v+1] = indptr[v] + int64(rng.IntN(6)) // many ties, some zero degrees
	}
	p := &Profile{Meta: Meta{NumNodes: n, Fanouts: []int{3, 2}}, Nbr: make([]uint32, n)}
	for v := range p.Nbr {
		p.Nbr[v] = uint32(rng.IntN(9))
	}
	m, err := newNbrModel(p, &PlanOptions{Indptr: indptr}, n, 4, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for v := range int64(n) {
		if indptr[v+1] > indptr[v] {
			order = append(order, v)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		return indptr[order[i]+1]-indptr[order[i]] > indptr[order[j]+1]-indptr[order[j]]
	})
	bytes := make([]float64, len(order)+1)
	for i, v := range order {
		deg := indptr[v+1] - indptr[v]
		bytes[i+1] = bytes[i] + float64(p.Nbr[v])*float64(deg*4)
	}
	if !slices.Equal(m.bytes, bytes) {
		t.Fatalf("seed %d: the model's cumulative bytes do not follow the stable ranking", seed)
	}
}

// TestByScore: both of byScore's paths (packed keys radix-sorted, and the
// comparison sort a score beyond 32 bits takes) rank as a stable sort of
// the ascending ids by score, descending, and leave out scores ≤ 0.
func TestByScore(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 22))
		scores := make([]int64, 3000)
		for i := range scores {
			scores[i] = int64(rng.IntN(12)) - 2
		}
		for _, huge := range []bool{false, true} {
			if huge {
				scores[rng.IntN(len(scores))] = 1 << 40
			}
			var want []int64
			for v, s := range scores {
				if s > 0 {
					want = append(want, int64(v))
				}
			}
			sort.SliceStable(want, func(i, j int) bool { return scores[want[i]] > scores[want[j]] })
			got := byScore(int64(len(scores)), func(v int64) int64 { return scores[v] })
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, score beyond 32 bits %v: byScore differs from the stable ranking", seed, huge)
			}
		}
	}
}
