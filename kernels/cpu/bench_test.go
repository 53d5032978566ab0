package cpu_test

import (
	"fmt"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/kernels/kerneltest"
)

var kernelsByName = []struct {
	name string
	k    cpu.GEMMKernel
}{{"auto", cpu.GEMMAuto}, {"gonum", cpu.GEMMGonum}, {"rows", cpu.GEMMRows}, {"tiled", cpu.GEMMTiled}}

func BenchmarkGEMM(b *testing.B) {
	for _, s := range []struct {
		m, k, n        int
		transA, transB bool
	}{
		{1000, 256, 256, false, false}, // layer forward X·W
		{256, 1000, 256, true, false},  // weight gradient Xᵀ·dY
		{1000, 256, 256, false, true},  // input gradient dY·Wᵀ
		{1000, 602, 256, false, false}, // first layer on Reddit-sized features
		{4000, 256, 47, false, false},  // classifier
		{20000, 128, 32, false, false}, // input layer of a streamed batch, 128 features, hidden 32
		{128, 20000, 32, true, false},  // its weight gradient
		{16, 32, 16, false, false},     // tiny: a few targets, narrow layer
		{64, 16, 64, false, true},      // tiny inner dimension
		{8, 128, 4, true, false},       // tiny weight gradient
	} {
		for _, kn := range kernelsByName {
			name := fmt.Sprintf("%dx%dx%d_tA%v_tB%v/%s", s.m, s.k, s.n, s.transA, s.transB, kn.name)
			b.Run(name, func(b *testing.B) {
				kerneltest.BenchGEMM(b, newFunc(b, &cpu.Options{GEMM: kn.k}), s.m, s.k, s.n, s.transA, s.transB)
			})
		}
	}
}

func BenchmarkAggregate(b *testing.B) {
	for _, op := range []kernels.AggOp{kernels.AggMean, kernels.AggGCN} {
		for _, backward := range []bool{false, true} {
			for _, w := range []int{1, 2} {
				b.Run(fmt.Sprintf("%v/backward=%v/workers=%d", op, backward, w), func(b *testing.B) {
					kerneltest.BenchAggregate(b, newFunc(b, &cpu.Options{Workers: w}), op, 10000, 10, 128, backward)
				})
			}
		}
	}
}

func BenchmarkGAT(b *testing.B) {
	kerneltest.BenchGAT(b, newFunc(b, nil), 5000, 10, 4, 32)
}
