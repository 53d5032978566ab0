// Package f32 adds float32 vectors the way the engine's kernels and
// layer-wise inference both need: y += a·x, with gonum's assembly where it
// pays. The assembly multiplies, then adds (no fused multiply-add), so
// its sums equal a plain Go loop's bit for bit.
package f32

import "gonum.org/v1/gonum/blas/gonum"

var blas32 gonum.Implementation

// simdMin is the row length from which gonum's assembly AXPY beats a Go
// loop (measured for kernels/cpu's aggregations).
const simdMin = 16

// Axpy sets y[i] += a·x[i] for every i < len(x); y must be at least as
// long as x.
func Axpy(y []float32, a float32, x []float32) {
	y = y[:len(x)]
	if len(x) >= simdMin {
		blas32.Saxpy(len(x), a, x, 1, y, 1)
		return
	}
	for i, v := range x {
		y[i] += a * v
	}
}
