package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"
)

// TestDropoutThreshold: the integer keep test (and DropoutKeep's factor)
// keeps exactly what the float
// test DropoutUniform(seed, e) >= p keeps, at the probabilities that matter
// (the ends, values that are exact multiples of 2⁻²⁴ and their float32
// neighbours, random ones), both on hashed elements and on every u next to
// the threshold.
func TestDropoutThreshold(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 7))
	ps := []float32{-1, 0, 1e-30, 1e-7, 0.1, 0.25, 0.5, 0.9, 0.99999994, 1, 2}
	for range 200 {
		u := float32(r.IntN(1<<24)) * (1.0 / (1 << 24))
		ps = append(ps, u, math.Nextafter32(u, 0), math.Nextafter32(u, 2), r.Float32())
	}
	for _, p := range ps {
		thr := dropoutThreshold(p)
		for u := max(int64(thr)-3, 0); u <= min(int64(thr)+3, 1<<24-1); u++ {
			if got, want := uint64(u) >= thr, float32(u)*(1.0/(1<<24)) >= p; got != want {
				t.Fatalf("p %g (bits %#x): u %d >= threshold %d is %v, the float test says %v", p, math.Float32bits(p), u, thr, got, want)
			}
		}
		seed, keep := r.Uint64(), NewDropoutKeep(p)
		for e := range uint64(2000) {
			if got, want := dropoutBits(seed, e) >= thr, DropoutUniform(seed, e) >= p; got != want {
				t.Fatalf("p %g, seed %d, element %d: integer test %v, float test %v", p, seed, e, got, want)
			}
			if f, want := keep.Factor(seed, e), float32(0); (f != want) != (DropoutUniform(seed, e) >= p) || (f != 0 && f != DropoutScale(p)) {
				t.Fatalf("p %g, seed %d, element %d: factor %g, kept by the float test %v", p, seed, e, f, DropoutUniform(seed, e) >= p)
			}
		}
	}
}

// BenchmarkDropoutMask applies a p = 0.1 mask to 1 Mi floats: DropoutKeep
// against the float test with a branch it replaced.
func BenchmarkDropoutMask(b *testing.B) {
	x := make([]float32, 1<<20)
	const p = 0.1
	b.Run("keep", func(b *testing.B) {
		keep := NewDropoutKeep(p)
		for b.Loop() {
			for i := range x {
				x[i] *= keep.Factor(7, uint64(i))
			}
		}
	})
	b.Run("float", func(b *testing.B) {
		scale := DropoutScale(p)
		for b.Loop() {
			for i := range x {
				m := float32(0)
				if DropoutUniform(7, uint64(i)) >= p {
					m = scale
				}
				x[i] *= m
			}
		}
	})
}
