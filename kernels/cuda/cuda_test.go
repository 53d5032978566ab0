//go:build !(cuda && cgo && linux)

// The tests of this package run only in builds without the cuda tag: a
// cuda-tagged test binary links gorgonia.org/cu, whose init exits the
// process on machines without a GPU. The GPU tests are in package
// kernels/cuda/gputest (make test-cuda).

package cuda_test

import (
	"errors"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cuda"
)

func TestStubNew(t *testing.T) {
	if cuda.Available {
		t.Fatal("Available is true in a build without the cuda tag")
	}
	b, err := cuda.New(nil)
	if !errors.Is(err, cuda.ErrNoGPU) || b != nil {
		t.Fatalf("New(nil) = %v, %v; want nil, ErrNoGPU", b, err)
	}
	// A caller can hold the result as a kernels.Backend in every build.
	var _ kernels.Backend = b
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *cuda.Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &cuda.Options{}, true},
		{"naive", &cuda.Options{GEMM: cuda.GEMMNaive, ZeroCopy: cuda.ZeroCopyOff}, true},
		{"staging 4096", &cuda.Options{StagingBytes: 4096, StagingBuffers: 2}, true},
		{"negative device", &cuda.Options{Device: -1}, false},
		{"unknown gemm", &cuda.Options{GEMM: 7}, false},
		{"negative max bytes", &cuda.Options{MaxBytes: -1}, false},
		{"negative pool", &cuda.Options{PoolBytes: -1}, false},
		{"tiny staging", &cuda.Options{StagingBytes: 100}, false},
		{"negative buffers", &cuda.Options{StagingBuffers: -2}, false},
		{"negative queue", &cuda.Options{QueueDepth: -1}, false},
		{"unknown zero copy", &cuda.Options{ZeroCopy: 9}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, kernels.ErrInvalidArg) {
				t.Fatalf("Validate() = %v, want ErrInvalidArg", err)
			}
			if _, err := cuda.New(tc.opts); err == nil {
				t.Fatal("New succeeded without the cuda tag")
			}
		})
	}
}

func TestGEMMKernelString(t *testing.T) {
	for k, want := range map[cuda.GEMMKernel]string{cuda.GEMMTiled: "tiled", cuda.GEMMNaive: "naive", 5: "GEMMKernel(5)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}
