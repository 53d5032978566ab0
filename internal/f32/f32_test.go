package f32

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAxpyMatchesLoop: the assembly path and the loop give the same bits,
// on both sides of simdMin and for a = 1 and a ≠ 1.
func TestAxpyMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, simdMin - 1, simdMin, 32, 129} {
		for _, a := range []float32{1, -0.37} {
			x, y := make([]float32, n), make([]float32, n+2)
			for i := range x {
				x[i] = rng.Float32()*2 - 1
			}
			for i := range y {
				y[i] = rng.Float32()*2 - 1
			}
			want := append([]float32(nil), y...)
			for i, v := range x {
				want[i] += a * v
			}
			Axpy(y, a, x)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n %d, a %v: y[%d] = %v, loop %v", n, a, i, y[i], want[i])
				}
			}
		}
	}
}
