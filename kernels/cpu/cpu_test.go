package cpu_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/kernels/kerneltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newFunc(t testing.TB, opts *cpu.Options) func() kernels.Backend {
	return func() kernels.Backend {
		b, err := cpu.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *cpu.Options
	}{
		{"default", nil},
		{"serial", &cpu.Options{Workers: 1}},
		{"workers3_gemmrows_grain1", &cpu.Options{Workers: 3, GEMM: cpu.GEMMRows, Grain: 1}},
		{"workers2_grain1_gonum", &cpu.Options{Workers: 2, Grain: 1, GEMM: cpu.GEMMGonum}},
		{"workers3_grain1_tiled", &cpu.Options{Workers: 3, Grain: 1, GEMM: cpu.GEMMTiled}},
		{"serial_tiled", &cpu.Options{Workers: 1, GEMM: cpu.GEMMTiled}},
	} {
		t.Run(tc.name, func(t *testing.T) { kerneltest.Run(t, newFunc(t, tc.opts)) })
	}
}
