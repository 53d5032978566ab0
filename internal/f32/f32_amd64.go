//go:build amd64 && !purego

package f32

import "golang.org/x/sys/cpu"

// native reports whether axpy8 and addRows8 are the AVX2 assembly.
var native = cpu.X86.HasAVX2

// axpy8 sets y[i] += a·x[i] for i < n, n a positive multiple of 8: a
// product, then a sum, eight lanes at a time.
//
//go:noescape
func axpy8(y, x *float32, a float32, n int)

// addRows8 is AddRows's loop for width a positive multiple of 8, its
// bounds checked by the caller.
//
//go:noescape
func addRows8(acc, rows *float32, edges *uint64, n int, base int64, width int)
