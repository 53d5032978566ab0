package partition

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
)

func TestFastMod(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	divs := []uint64{1, 2, 3, 7, 64, 1000, 210863, 1<<32 - 1, 1 << 32, 1<<62 + 12345}
	for range 50 {
		divs = append(divs, 1+r.Uint64N(1<<40), 1+r.Uint64N(1<<62))
	}
	for _, d := range divs {
		f := newFastMod(d)
		xs := []uint64{0, 1, d - 1, d, d + 1, ^uint64(0), ^uint64(0) - 1, ^uint64(0) / d * d}
		for range 2000 {
			xs = append(xs, r.Uint64())
		}
		for _, x := range xs {
			if got, want := f.mod(x), x%d; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, d, got, want)
			}
		}
	}
}

// TestSlicedMatchesLibrary checks that part j's slice of the bit matrix is
// bit for bit a bloom.New(m, h) filter holding the same keys, and that
// lookups return exactly the parts whose library filter says yes.
func TestSlicedMatchesLibrary(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(uint64(seed), 4))
	for _, k := range []int{1, 5, 64, 100, 130} {
		s := newSliced(k, 50, 0.05)
		lib := make([]*bloom.BloomFilter, k)
		for j := range lib {
			lib[j] = bloom.New(uint(s.m), s.h)
		}
		hs := newHasher(s.h)
		var key [8]byte
		for range 40 * k {
			u, j := r.Int64N(1<<40), r.IntN(k)
			s.add(hs.locations(u), j)
			binary.LittleEndian.PutUint64(key[:], uint64(u))
			lib[j].Add(key[:])
		}
		mask := make([]uint64, s.words)
		for range 2000 {
			u := r.Int64N(1 << 40)
			binary.LittleEndian.PutUint64(key[:], uint64(u))
			l := hs.locations(u)
			any := s.lookup(l, mask)
			var got, want []int32
			forEach(mask, func(p int32) { got = append(got, p) })
			for j, f := range lib {
				if f.Test(key[:]) {
					want = append(want, int32(j))
				}
			}
			if any != (len(want) > 0) || len(got) != len(want) {
				t.Fatalf("k=%d: lookup(%d) = %v, library %v", k, u, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("k=%d: lookup(%d) = %v, library %v", k, u, got, want)
				}
			}
		}
	}
}
