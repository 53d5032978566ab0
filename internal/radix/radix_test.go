package radix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"
)

// TestSort: the radix sort equals slices.Sort on keys that share high
// bytes, differ only low, repeat, or have empty buckets, at sizes around
// the cutoff.
func TestSort(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 1))
	gens := []struct {
		name string
		gen  func() uint64
	}{
		{"uniform64", r.Uint64},
		{"small", func() uint64 { return r.Uint64N(10) }},
		{"packed 20-bit ids", func() uint64 { return r.Uint64N(1<<20)<<32 | r.Uint64N(1<<20) }},
		{"one high byte", func() uint64 { return 0xab<<56 | r.Uint64N(1<<16) }},
		{"byte holes", func() uint64 { return r.Uint64N(4) << 40 }},
	}
	for _, g := range gens {
		for _, n := range []int{0, 1, 2, cutoff, cutoff + 1, 5000, 100000} {
			a := make([]uint64, n)
			for i := range a {
				a[i] = g.gen()
			}
			want := slices.Clone(a)
			slices.Sort(want)
			Sort(a)
			if !slices.Equal(a, want) {
				t.Fatalf("%s n=%d: differs from slices.Sort", g.name, n)
			}
		}
	}
}

// BenchmarkSort compares the radix sort used for packed buffers with
// slices.Sort on one full buffer (4 MiB and 32 MiB) of packed random edges.
func BenchmarkSort(b *testing.B) {
	for _, sz := range []struct {
		n      int
		idBits int
	}{{512 << 10, 20}, {512 << 10, 32}, {4 << 20, 16}, {4 << 20, 24}, {4 << 20, 32}} {
		idBits := sz.idBits
		r := rand.New(rand.NewPCG(3, 4))
		in := make([]uint64, sz.n)
		for i := range in {
			in[i] = r.Uint64N(1<<idBits)<<32 | r.Uint64N(1<<idBits)
		}
		work := make([]uint64, len(in))
		for _, impl := range []struct {
			name string
			sort func([]uint64)
		}{{"radix", Sort}, {"slices", slices.Sort[[]uint64]}} {
			b.Run(fmt.Sprintf("%s/n=%d/ids=%dbit", impl.name, sz.n, idBits), func(b *testing.B) {
				b.SetBytes(int64(len(in)) * 8)
				for b.Loop() {
					copy(work, in)
					impl.sort(work)
				}
				b.ReportMetric(float64(len(in))*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
			})
		}
	}
}
