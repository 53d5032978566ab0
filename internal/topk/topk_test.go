package topk

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

var seed = flag.Uint64("topk.seed", 0, "seed for the randomised test (0: time-based)")

func TestSelectTable(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		scores []float32
		k      int64
		want   []int64
	}{
		{[]float32{1, 5, 3, 5, 0}, 2, []int64{1, 3}},
		{[]float32{1, 5, 3, 5, 0}, 3, []int64{1, 2, 3}},
		{[]float32{2, 2, 2}, 2, []int64{0, 1}},    // ties to smaller id
		{[]float32{0, -1, nan, 4}, 3, []int64{3}}, // non-positive and NaN never chosen
		{[]float32{1, 2}, 0, nil},
		{nil, 5, []int64{}},
	}
	for i, c := range cases {
		got := Slice(c.scores, c.k)
		if !slices.Equal(got, c.want) {
			t.Errorf("case %d: got %v want %v", i, got, c.want)
		}
	}
}

// TestSelectMatchesSort compares against a full sort on random scores with
// many ties.
func TestSelectMatchesSort(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -topk.seed=%d)", s, s)
	rng := rand.New(rand.NewPCG(s, 1))
	for range 200 {
		n := rng.IntN(300)
		scores := make([]uint32, n)
		for i := range scores {
			scores[i] = uint32(rng.IntN(10))
		}
		k := int64(rng.IntN(n + 2))
		ids := make([]int64, 0, n)
		for i, sc := range scores {
			if sc > 0 {
				ids = append(ids, int64(i))
			}
		}
		sort.SliceStable(ids, func(a, b int) bool { return scores[ids[a]] > scores[ids[b]] })
		want := ids[:min(int64(len(ids)), k)]
		want = slices.Clone(want)
		slices.Sort(want)
		if got := Slice(scores, k); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("n=%d k=%d: got %v want %v", n, k, got, want)
		}
	}
}

// TestSelectTiesPermuted: on a renumbered copy (node v of the copy is node
// orig[v] of the original), SelectTies keyed by orig selects exactly the
// original's selection, with many ties; Select (ties by the copy's ids)
// in general does not.
func TestSelectTiesPermuted(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -topk.seed=%d)", s, s)
	rng := rand.New(rand.NewPCG(s, 2))
	differs := 0
	for range 200 {
		n := rng.IntN(300) + 1
		scores := make([]uint32, n)
		for i := range scores {
			scores[i] = uint32(rng.IntN(4))
		}
		orig := make([]int64, n)
		for i := range orig {
			orig[i] = int64(i)
		}
		rng.Shuffle(n, func(a, b int) { orig[a], orig[b] = orig[b], orig[a] })
		copyScore := func(v int64) uint32 { return scores[orig[v]] }
		k := int64(rng.IntN(n + 1))
		want := Slice(scores, k)
		got := SelectTies(int64(n), k, copyScore, func(v int64) int64 { return orig[v] })
		back := make([]int64, len(got))
		for i, v := range got {
			back[i] = orig[v]
		}
		slices.Sort(back)
		if !slices.Equal(back, want) {
			t.Fatalf("n=%d k=%d: the copy selected %v (original ids), the original %v", n, k, back, want)
		}
		if !slices.IsSorted(got) {
			t.Fatalf("result not in ascending id order: %v", got)
		}
		plain := Select(int64(n), k, copyScore)
		for i, v := range plain {
			plain[i] = orig[v]
		}
		slices.Sort(plain)
		if !slices.Equal(plain, want) {
			differs++
		}
	}
	if differs == 0 {
		t.Errorf("ties by the copy's ids never differed: the test has no ties to break")
	}
}
