package partition

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// cutOf counts the directed edges of g whose ends lie in different parts.
func cutOf(g *graph, part []int32) int64 {
	var c int64
	for v, nb := range g.adj {
		for _, u := range nb {
			if part[u] != part[v] {
				c++
			}
		}
	}
	return c
}

func TestRefineFixesMisplacement(t *testing.T) {
	// Two 10-cliques, 0-9 and 10-19, k = 2 (single level).
	clean := make([]int32, 20)
	for v := 10; v < 20; v++ {
		clean[v] = 1
	}
	for _, tc := range []struct {
		name      string
		train     []int64
		misplaced []int64 // nodes put in the other clique's part
		want      []int32
		moves     int64
	}{
		{"swap", nil, []int64{3, 12}, clean, 2},
		{"one", nil, []int64{7}, clean, 1},
		{"clean", nil, nil, clean, 0},
		// Every node of clique 0 trains: capT = ceil(1.1·10/2) = 6, part
		// 0 already holds 9 training nodes, so training node 3 must stay.
		{"training cap", []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int64{3}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := cliques(2, 10)
			g.train = tc.train
			g.finish()
			d := g.write(t, t.TempDir())
			defer d.Close()
			part := slices.Clone(clean)
			for _, v := range tc.misplaced {
				part[v] = 1 - part[v]
			}
			want := tc.want
			if want == nil {
				want = slices.Clone(part)
			}
			before := cutOf(g, part)
			moves := refine(d, part, d.TrainIdx(), 2, 0.1, 3, nil)
			if moves != tc.moves {
				t.Errorf("moves %d, want %d", moves, tc.moves)
			}
			if !slices.Equal(part, want) {
				t.Errorf("part %v, want %v", part, want)
			}
			if after := cutOf(g, part); after > before {
				t.Errorf("cut rose from %d to %d", before, after)
			}
		})
	}
}

// TestRefineNeverIncreasesCut refines random balanced assignments of
// planted graphs for 1 to 4 rounds: more rounds never raise the cut, caps
// hold, and the result is deterministic.
func TestRefineNeverIncreasesCut(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	for i := range 8 {
		n := 100 + r.IntN(800)
		g, _ := planted(n, 2+r.IntN(12), 2+r.Float64()*10, r.Float64(), r.Float64()*0.5, r.Int64())
		k1 := 1 + r.IntN(6)
		k2 := 1 + r.IntN(6)
		k := k1 * k2
		eps := 0.05 + r.Float64()*0.3
		t.Run(fmt.Sprintf("%d-n%d-k%dx%d", i, n, k1, k2), func(t *testing.T) {
			d := g.write(t, t.TempDir())
			defer d.Close()
			// A random assignment that respects both caps, as the stream
			// guarantees: training nodes round-robin first, then the rest.
			part := make([]int32, n)
			isTrain := make([]bool, n)
			for _, v := range g.train {
				isTrain[v] = true
			}
			j := 0
			for _, want := range []bool{true, false} {
				for _, v := range r.Perm(n) {
					if isTrain[v] == want {
						part[v] = int32(j % k)
						j++
					}
				}
			}
			size := make([]int64, k)
			load := make([]int64, k)
			capN, capT := refineCaps(int64(n), int64(len(g.train)), k, eps)
			init := slices.Clone(part)
			cut := cutOf(g, part)
			for rounds := 1; rounds <= 4; rounds++ {
				part := slices.Clone(init)
				moves := refine(d, part, d.TrainIdx(), k, eps, rounds, nil)
				after := cutOf(g, part)
				t.Logf("%d rounds: %d moves, cut %d -> %d", rounds, moves, cutOf(g, init), after)
				if after > cut || (moves > 0 && after >= cutOf(g, init)) {
					t.Fatalf("%d rounds (%d moves) took the cut from %d to %d", rounds, moves, cut, after)
				}
				cut = after
				clear(size)
				clear(load)
				for _, p := range part {
					size[p]++
				}
				for _, v := range g.train {
					load[part[v]]++
				}
				for q := range k {
					if size[q] > capN || load[q] > capT {
						t.Fatalf("part %d: %d nodes, %d train; caps %d, %d", q, size[q], load[q], capN, capT)
					}
				}
				again := slices.Clone(init)
				refine(d, again, d.TrainIdx(), k, eps, rounds, nil)
				if !slices.Equal(part, again) {
					t.Fatalf("%d rounds: not deterministic", rounds)
				}
			}
		})
	}
}
