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
		k       int
		fp      float64
		prev    bool
		scopeHK uint // a scope filter with more hashes widens hashK
	}{
		{40, 0.01, false, 0}, {100, 0.01, false, 0}, {100, 0.01, true, 0}, {64, 0.2, true, 0},
		{128, 0.05, false, 11}, {7, 0.5, true, 0},
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
		s := &streamer{filters: f, hashK: max(f.h, tc.scopeHK), counts: make([]int32, tc.k), mark: make([]bool, tc.k), mask: make([]uint64, f.words)}
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
				for range s.hashK {
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

// TestScopeBatched: scopeBatched keeps exactly the neighbours, in the
// same order and with the same hash locations, that scopeEach keeps, for
// scope filters of one and two words a row and either hash count the
// larger.
func TestScopeBatched(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(testSeed(t)), 9))
	for _, tc := range []struct {
		k1, k2 int
		fp1    float64
	}{
		{100, 100, 0.01}, {7, 100, 0.3}, {64, 10, 0.5}, {128, 3, 0.01},
	} {
		sc := newSliced(tc.k1, 200, tc.fp1)
		for i := range sc.bits {
			sc.bits[i] = r.Uint64() | r.Uint64() | r.Uint64()
		}
		f := newSliced(tc.k2, 200, 0.05)
		hk := max(f.h, sc.h)
		s := &streamer{filters: f, hashK: hk, hs: newHasher(hk)}
		s.spec.filter, s.spec.scopeSlice = true, sc
		for trial := range 100 {
			s.spec.scopePart = int32(r.IntN(tc.k1))
			v := r.Int64N(1000)
			nbrs := make([]int64, r.IntN(50))
			for i := range nbrs {
				nbrs[i] = r.Int64N(1000)
				if r.IntN(10) == 0 {
					nbrs[i] = v
				}
			}
			s.nbrs = append(s.nbrs[:0], nbrs...)
			s.scopeEach(v)
			wantN, wantL := slices.Clone(s.nbrs), slices.Clone(s.locs)
			s.nbrs = append(s.nbrs[:0], nbrs...)
			s.scopeBatched(v)
			if !slices.Equal(s.nbrs, wantN) || !slices.Equal(s.locs, wantL) {
				t.Fatalf("%+v, trial %d: batched kept %v, one at a time %v", tc, trial, s.nbrs, wantN)
			}
			if trial == 99 && len(wantN) == 0 {
				t.Logf("%+v: last trial kept nothing", tc)
			}
		}
	}
}
