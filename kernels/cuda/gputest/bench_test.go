//go:build cuda && cgo && linux

package gputest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cuda"
	"github.com/ssdgnn/ssdgnn/kernels/kerneltest"
)

// BenchmarkGEMM compares the tiled and the naive kernel (GFLOP/s) on the
// shapes of kernels/cpu's benchmark plus two large square ones.
func BenchmarkGEMM(b *testing.B) {
	for _, s := range []struct {
		m, k, n        int
		transA, transB bool
	}{
		{1000, 256, 256, false, false},
		{256, 1000, 256, true, false},
		{1000, 256, 256, false, true},
		{1000, 602, 256, false, false},
		{4000, 256, 47, false, false},
		{4096, 4096, 4096, false, false},
		{100000, 256, 256, false, false},
	} {
		for _, k := range []cuda.GEMMKernel{cuda.GEMMTiled, cuda.GEMMNaive} {
			name := fmt.Sprintf("%dx%dx%d_tA%v_tB%v/%v", s.m, s.k, s.n, s.transA, s.transB, k)
			b.Run(name, func(b *testing.B) {
				kerneltest.BenchGEMM(b, newFunc(b, &cuda.Options{GEMM: k}), s.m, s.k, s.n, s.transA, s.transB)
			})
		}
	}
}

func BenchmarkAggregate(b *testing.B) {
	for _, op := range []kernels.AggOp{kernels.AggMean, kernels.AggGCN} {
		for _, backward := range []bool{false, true} {
			for _, size := range []struct{ dst, fan, f int }{{10000, 10, 128}, {200000, 15, 256}} {
				b.Run(fmt.Sprintf("%v/backward=%v/dst=%d_fanout=%d_F=%d", op, backward, size.dst, size.fan, size.f), func(b *testing.B) {
					kerneltest.BenchAggregate(b, newFunc(b, nil), op, size.dst, size.fan, size.f, backward)
				})
			}
		}
	}
}

func BenchmarkGAT(b *testing.B) {
	kerneltest.BenchGAT(b, newFunc(b, nil), 5000, 10, 4, 32)
	b.Run("large", func(b *testing.B) { kerneltest.BenchGAT(b, newFunc(b, nil), 100000, 10, 4, 64) })
}

// BenchmarkGatherHost measures gathering 20000 random rows of 256 float32
// from a 1M-row host table: zero-copy kernel, staging ring, and (for
// reference) GatherRows from device memory. MB/s counts gathered bytes.
func BenchmarkGatherHost(b *testing.B) {
	const rows, cols, n = 1 << 20, 256, 20000
	for _, mode := range []string{"zerocopy", "staging", "device"} {
		b.Run(mode, func(b *testing.B) {
			opts := &cuda.Options{}
			if mode == "staging" {
				opts.ZeroCopy = cuda.ZeroCopyOff
			}
			be := newBackend(b, opts)
			host := mmapFloats(b, rows*cols)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range host {
				host[i] = float32(i)
			}
			idx := make([]int32, n)
			for i := range idx {
				idx[i] = int32(r.IntN(rows))
			}
			h, err := be.RegisterHost(host, cols)
			if err != nil {
				b.Fatal(err)
			}
			defer be.UnregisterHost(h)
			if mode == "zerocopy" && !h.ZeroCopy() {
				b.Skip("device cannot map host memory")
			}
			dst, _ := be.Alloc(n, cols)
			defer be.Free(dst)
			var src kernels.Tensor
			it, _ := be.AllocInts(n)
			defer be.FreeInts(it)
			be.UploadInts(it, idx)
			if mode == "device" {
				src, _ = be.Alloc(rows, cols)
				defer be.Free(src)
				be.Upload(src, host)
			}
			out := make([]float32, n*cols)
			b.ResetTimer()
			for range b.N {
				if mode == "device" {
					be.GatherRows(dst, src, it)
				} else {
					be.GatherHostRows(dst, h, idx)
				}
			}
			if err := be.Download(out, dst); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(n)*cols*4*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}
