package cpu

import (
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
)

// The tiled GEMM (GEMMTiled) computes C = α·op(A)·op(B) + β·C in the
// manner of GotoBLAS: for each block of tileK steps of the inner
// dimension and tileNC columns, op(B)'s block is packed into panels of
// tileN columns (p-major, zero-padded), then each panel of tileM rows of
// op(A) is packed (p-major, scaled by α, zero-padded) and kern multiplies
// it with every column panel into C. C's row panels are split over the
// backend pool; every element of C is summed by one worker, over the
// inner dimension in increasing order, one block of tileK at a time, so
// the result does not depend on the worker count or on scheduling.
const (
	tileM  = 6   // rows of C per micro-kernel call
	tileN  = 16  // columns of C per micro-kernel call
	tileK  = 256 // inner-dimension steps per packed block
	tileNC = 256 // columns of op(B) packed at once (a multiple of tileN)
)

// kern is the micro-kernel: c[r*ldc+j] += Σ_{p<k} a[p*tileM+r]·b[p*tileN+j]
// for r < tileM, j < tileN. It is the assembly where the CPU has it
// (tiledNative), else kern6x16Go.
var kern = kern6x16Go

// kern6x16Go is kern in Go: the same sums in the same order, with a
// separate multiply and add where the assembly fuses them.
func kern6x16Go(k int, a, b, c []float32, ldc int) {
	var acc [tileM * tileN]float32
	for p := range k {
		ap, bp := a[p*tileM:p*tileM+tileM], b[p*tileN:p*tileN+tileN]
		for r, av := range ap {
			row := acc[r*tileN : r*tileN+tileN]
			for j, bv := range bp {
				row[j] += av * bv
			}
		}
	}
	for r := range tileM {
		row := c[r*ldc : r*ldc+tileN]
		for j := range row {
			row[j] += acc[r*tileN+j]
		}
	}
}

// tiledScratch is one worker's packing buffers for the tiled GEMM.
type tiledScratch struct {
	a [tileK * tileM]float32
	b [tileK * tileNC]float32
	c [tileM * tileN]float32
}

// tiledScratchBytes is one tiledScratch's size.
const tiledScratchBytes = int64(unsafe.Sizeof(tiledScratch{}))

// ScratchBytes is what a backend of opts (nil: the defaults) keeps for its
// life beyond its tensors: the tiled GEMM's packing buffers, one per
// worker once the workers have multiplied at once (counted in
// memacct.Backend as they are made).
func ScratchBytes(opts *Options) int64 {
	o := opts.withDefaults()
	return int64(o.Workers) * tiledScratchBytes
}

// ScratchBytes is ScratchBytes of b's options.
func (b *Backend) ScratchBytes() int64 { return ScratchBytes(&b.opts) }

// tiledScratchGet takes a worker's packing buffers from the backend's
// free list, or makes and counts new ones. One parallel op runs fn on at
// most Workers goroutines at once; callers on several goroutines may
// make more, and tiledScratchPut keeps at most Workers of them.
func (b *Backend) tiledScratchGet() *tiledScratch {
	select {
	case s := <-b.gemm:
		return s
	default:
	}
	b.gemmBytes.Add(tiledScratchBytes) // workers make them concurrently
	memacct.Add(memacct.Backend, tiledScratchBytes)
	return new(tiledScratch)
}

// tiledScratchPut returns s to the free list, or drops and uncounts it
// when the list already holds Workers buffers; it never blocks.
func (b *Backend) tiledScratchPut(s *tiledScratch) {
	select {
	case b.gemm <- s:
	default:
		b.gemmBytes.Add(-tiledScratchBytes)
		memacct.Add(memacct.Backend, -tiledScratchBytes)
	}
}

// gemmTiled is GEMMTiled: C (m×n) = α·op(A)·op(B) + β·C, with β == 0
// overwriting C (NaN included). A is m×k (k×m with transA), B k×n (n×k
// with transB), all row-major and dense.
func (b *Backend) gemmTiled(transA, transB bool, m, n, k int, alpha float32, A, B []float32, beta float32, C []float32) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	panels := (m + tileM - 1) / tileM
	b.pool.parallel(panels, max(1, b.grain/max(tileM*n*k/16, 1)), func(lo, hi int) {
		s := b.tiledScratchGet()
		defer b.tiledScratchPut(s)
		r0, r1 := lo*tileM, min(hi*tileM, m)
		c := C[r0*n : r1*n]
		if beta == 0 {
			clear(c)
		} else if beta != 1 {
			scale(c, beta)
		}
		for jc := 0; jc < n; jc += tileNC {
			nc := min(tileNC, n-jc)
			for pc := 0; pc < k; pc += tileK {
				kc := min(tileK, k-pc)
				packB(s.b[:], B, transB, ldb, pc, kc, jc, nc)
				for i0 := r0; i0 < r1; i0 += tileM {
					rows := min(tileM, r1-i0)
					packA(s.a[:], A, transA, lda, alpha, i0, rows, pc, kc)
					for j0 := 0; j0 < nc; j0 += tileN {
						cols := min(tileN, nc-j0)
						bp := s.b[j0*kc : (j0+tileN)*kc]
						off := i0*n + jc + j0
						if rows == tileM && cols == tileN {
							kern(kc, s.a[:tileM*kc], bp, C[off:], n)
							continue
						}
						clear(s.c[:])
						kern(kc, s.a[:tileM*kc], bp, s.c[:], tileN)
						for r := range rows {
							dst := C[off+r*n : off+r*n+cols]
							for j, v := range s.c[r*tileN : r*tileN+cols] {
								dst[j] += v
							}
						}
					}
				}
			}
		}
	})
}

// packA writes rows i0 … i0+rows−1 of α·op(A), inner steps pc … pc+kc−1,
// to dst p-major (dst[p*tileM+r]), rows past the end as zeros.
func packA(dst, A []float32, transA bool, lda int, alpha float32, i0, rows, pc, kc int) {
	dst = dst[:kc*tileM]
	if rows < tileM {
		clear(dst)
	}
	if transA {
		// op(A)[i, p] = A[p, i]: each step reads rows consecutive values.
		for p := range kc {
			src := A[(pc+p)*lda+i0 : (pc+p)*lda+i0+rows]
			d := dst[p*tileM : p*tileM+rows]
			for r, v := range src {
				d[r] = alpha * v
			}
		}
		return
	}
	for r := range rows {
		src := A[(i0+r)*lda+pc : (i0+r)*lda+pc+kc]
		for p, v := range src {
			dst[p*tileM+r] = alpha * v
		}
	}
}

// packB writes columns jc … jc+nc−1 of op(B), inner steps pc … pc+kc−1,
// to dst as panels of tileN columns, panel q at dst[q*tileN*kc:], p-major
// within it (dst[q*tileN*kc+p*tileN+j]), columns past nc as zeros.
func packB(dst, B []float32, transB bool, ldb, pc, kc, jc, nc int) {
	for q := 0; q*tileN < nc; q++ {
		cols := min(tileN, nc-q*tileN)
		panel := dst[q*tileN*kc : (q+1)*tileN*kc]
		if cols < tileN {
			clear(panel)
		}
		j0 := jc + q*tileN
		if transB {
			// op(B)[p, j] = B[j, p].
			for j := range cols {
				src := B[(j0+j)*ldb+pc : (j0+j)*ldb+pc+kc]
				for p, v := range src {
					panel[p*tileN+j] = v
				}
			}
			continue
		}
		for p := range kc {
			copy(panel[p*tileN:p*tileN+cols], B[(pc+p)*ldb+j0:(pc+p)*ldb+j0+cols])
		}
	}
}
