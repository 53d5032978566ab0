package partition

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCountBatched: countBatched counts exactly what the per-neighbour
// lookup counts, in the same touch order, for rows of one and two words,
// with and without a previous pass's filters (and a done set choosing
// between them), and for several hash counts.
func TestCountBatched(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(testSeed(t)), 7))
	for _, tc := range []struct {
		k    int
		fp   float64
		prev bool
	}{
		{40, 0.01, false}, {100, 0.01, false}, {100, 0.01, true}, {64, 0.2, true},
		{128, 0.05, false}, {7, 0.5, true},
	} {
		const n = 5000
		f := newSliced(tc.k, 300, tc.fp)
		fill := func(s *sliced) {
			for i := range s.bits {
				s.bits[i] = r.Uint64() | r.Uint64() // dense: few early exits
				if r.IntN(4) == 0 {
					s.bits[i] &= r.Uint64() & r.Uint64()
				}
				if i%s.words == s.words-1 && s.k%64 != 0 {
					s.bits[i] &= 1<<(s.k%64) - 1 // no part past k
				}
			}
		}
		fill(f)
		s := &streamer{filters: f, counts: make([]int32, tc.k), mark: make([]bool, tc.k), mask: make([]uint64, f.words)}
		if tc.prev {
			s.prev = newSliced(tc.k, 300, tc.fp)
			fill(s.prev)
			s.spec.done = make([]uint64, (n+63)/64)
			for i := range s.spec.done {
				s.spec.done[i] = r.Uint64()
			}
		}
		for trial := range 50 {
			deg := r.IntN(60)
			s.nbrs = s.nbrs[:0]
			s.locs = s.locs[:0]
			for range deg {
				s.nbrs = append(s.nbrs, r.Int64N(n))
				for range f.h {
					s.locs = append(s.locs, r.Uint64())
				}
			}
			want := func() ([]int32, []int32) {
				mask := s.mask
				for j, u := range s.nbrs {
					if !s.lookup(u, j, mask) {
						continue
					}
					forEach(mask, func(q int32) { s.counts[q]++; s.touch(q) })
				}
				return s.take()
			}
			wc, wt := want()
			s.countBatched()
			gc, gt := s.take()
			if !slices.Equal(gc, wc) || !slices.Equal(gt, wt) {
				t.Fatalf("%+v, trial %d (%d neighbours, %d words, h %d): batched counts %v touched %v, per-neighbour %v %v",
					tc, trial, deg, f.words, f.h, gc, gt, wc, wt)
			}
		}
	}
}

// take returns the counts and touch order and clears them.
func (s *streamer) take() (counts, touched []int32) {
	counts = slices.Clone(s.counts)
	touched = slices.Clone(s.touched)
	for _, q := range s.touched {
		s.counts[q], s.mark[q] = 0, false
	}
	s.touched = s.touched[:0]
	return counts, touched
}

// TestTrainTest: the bitset answers exactly what a search of the sorted
// training ids answers, for every id, at sizes around word boundaries and
// with the first and last ids included.
func TestTrainTest(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(testSeed(t)), 11))
	for _, n := range []int64{1, 63, 64, 65, 1000, 4097} {
		for _, frac := range []float64{0, 0.1, 0.5, 1} {
			var train []int64
			for v := range n {
				if r.Float64() < frac || frac > 0 && (v == 0 || v == n-1) {
					train = append(train, v)
				}
			}
			in := trainTest(train, n)
			for v := range n {
				_, want := slices.BinarySearch(train, v)
				if in(v) != want {
					t.Fatalf("n=%d frac=%g: trainTest(%d) = %v, want %v", n, frac, v, in(v), want)
				}
			}
		}
	}
}
