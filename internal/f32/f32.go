// Package f32 adds float32 vectors the way the engine's kernels and
// layer-wise inference both need: y += a·x, and rows added along an edge
// list. On amd64 with AVX2 the bulk runs in this package's assembly
// (f32_amd64.s), elsewhere (or with -tags purego) in gonum's assembly or a
// Go loop. Every path multiplies, then adds (no fused multiply-add), so
// its sums equal a plain Go loop's bit for bit.
package f32

import (
	"fmt"

	"gonum.org/v1/gonum/blas/gonum"
)

var blas32 gonum.Implementation

// simdMin is the row length from which gonum's assembly AXPY beats a Go
// loop (measured for kernels/cpu's aggregations), where this package's
// own assembly is not available.
const simdMin = 16

// Axpy sets y[i] += a·x[i] for every i < len(x); y must be at least as
// long as x.
func Axpy(y []float32, a float32, x []float32) {
	y = y[:len(x)]
	if m := len(x) &^ 7; native && m > 0 {
		axpy8(&y[0], &x[0], a, m)
		x, y = x[m:], y[m:]
	} else if len(x) >= simdMin {
		blas32.Saxpy(len(x), a, x, 1, y, 1)
		return
	}
	for i, v := range x {
		y[i] += a * v
	}
}

// AddRows adds rows along an edge list: for each edge e of edges, in
// order, row int64(e>>32)−base of rows is added to row uint32(e) of acc
// (rows of width floats in both), as Axpy(acc row, 1, source row) would.
// It panics, before adding anything, when an edge names a row outside acc
// or rows.
//
// It is the push of layer-wise inference (train's lwAcc): a call there
// makes one Axpy per edge, whose call and checks cost more than the
// 32 floats it adds; the assembly walks the whole list, fetching the
// accumulator rows of a few edges ahead.
func AddRows(acc, rows []float32, edges []uint64, base int64, width int) {
	if len(edges) == 0 || width <= 0 {
		return
	}
	// One pass for the bounds, so that the assembly need not check each
	// edge: a fraction of the adds' cost.
	var maxDst uint32
	minSrc, maxSrc := edges[0]>>32, edges[0]>>32
	for _, e := range edges {
		maxDst = max(maxDst, uint32(e))
		minSrc, maxSrc = min(minSrc, e>>32), max(maxSrc, e>>32)
	}
	w := int64(width)
	if (int64(maxDst)+1)*w > int64(len(acc)) || int64(minSrc) < base || (int64(maxSrc)-base+1)*w > int64(len(rows)) {
		panic(fmt.Sprintf("f32: AddRows: edges name destination rows up to %d of %d and source rows %d..%d of %d",
			maxDst, int64(len(acc))/w, int64(minSrc)-base, int64(maxSrc)-base, int64(len(rows))/w))
	}
	if native && width%8 == 0 {
		addRows8(&acc[0], &rows[0], &edges[0], len(edges), base, width)
		return
	}
	for _, e := range edges {
		o, k := int64(e>>32)-base, int64(uint32(e))
		Axpy(acc[k*w:(k+1)*w], 1, rows[o*w:(o+1)*w])
	}
}
