//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// tiledNative reports whether kern6x16 is the AVX2 + FMA assembly, so that
// GEMMAuto takes the tiled kernel.
var tiledNative = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kern6x16 is the tiled GEMM's micro-kernel (gemm_amd64.s): c[r*ldc+j] +=
// Σ_{p<k} a[p*6+r]·b[p*16+j] for r < 6, j < 16, with fused multiply-adds.
// It needs AVX2 and FMA (tiledNative); kern is kern6x16Go otherwise.
//
//go:noescape
func kern6x16(k int, a, b, c *float32, ldc int)

func init() {
	if tiledNative {
		kern = func(k int, a, b, c []float32, ldc int) {
			if k == 0 {
				return
			}
			_ = a[6*k-1]
			_ = b[16*k-1]
			_ = c[5*ldc+15]
			kern6x16(k, &a[0], &b[0], &c[0], ldc)
		}
	}
}
