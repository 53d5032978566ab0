package cpu_test

import (
	"errors"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *cpu.Options
		ok   bool
	}{
		{"nil", nil, true},
		{"zero", &cpu.Options{}, true},
		{"workers", &cpu.Options{Workers: 4, GEMM: cpu.GEMMRows, Grain: 1, MaxBytes: 1 << 20}, true},
		{"negative workers", &cpu.Options{Workers: -1}, false},
		{"bad gemm", &cpu.Options{GEMM: 7}, false},
		{"negative grain", &cpu.Options{Grain: -1}, false},
		{"negative max", &cpu.Options{MaxBytes: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			b, err := cpu.New(tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("New() error = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, kernels.ErrInvalidArg) {
					t.Errorf("error %v does not wrap ErrInvalidArg", err)
				}
				return
			}
			if b.Workers() < 1 {
				t.Errorf("Workers() = %d", b.Workers())
			}
			b.Close()
		})
	}
}

func TestMaxBytes(t *testing.T) {
	b, err := cpu.New(&cpu.Options{MaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, err := b.Alloc(10, 20) // 800 bytes
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(10, 10); !errors.Is(err, kernels.ErrOutOfMemory) {
		t.Fatalf("Alloc over MaxBytes: %v, want ErrOutOfMemory", err)
	}
	b.Free(x)
	y, err := b.Alloc(10, 10)
	if err != nil {
		t.Fatalf("Alloc after Free: %v", err)
	}
	b.Free(y)
	if ms := b.MemStats(); ms.Allocated != 0 || ms.Peak != 800 || ms.Handles != 0 {
		t.Errorf("MemStats = %+v", ms)
	}
}

func TestClose(t *testing.T) {
	b, err := cpu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := b.Alloc(2, 2)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	b.Zero(x)
	if !errors.Is(b.Err(), kernels.ErrClosed) {
		t.Errorf("op after Close: Err() = %v, want ErrClosed", b.Err())
	}
	if _, err := b.Alloc(1, 1); !errors.Is(err, kernels.ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
}

// TestAdopt: an adopted buffer is the tensor's storage (no copy), counts
// towards MemStats, and is released by Free; a length mismatch is refused.
func TestAdopt(t *testing.T) {
	b, err := cpu.New(&cpu.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		name       string
		rows, cols int
		n          int
		ok         bool
	}{
		{"exact", 2, 3, 6, true},
		{"empty", 0, 4, 0, true},
		{"short", 2, 3, 5, false},
		{"negative", -1, 3, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]float32, tc.n)
			for i := range buf {
				buf[i] = float32(i + 1)
			}
			x, err := b.Adopt(tc.rows, tc.cols, buf)
			if !tc.ok {
				if !errors.Is(err, kernels.ErrInvalidArg) {
					t.Fatalf("Adopt = %v, want ErrInvalidArg", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := b.MemStats().Allocated; got != int64(4*tc.n) {
				t.Errorf("allocated %d, want %d", got, 4*tc.n)
			}
			b.ReLU(x, x)
			out := make([]float32, tc.n)
			if err := b.Download(out, x); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if out[i] != buf[i] {
					t.Fatalf("download[%d] = %v, buffer %v", i, out[i], buf[i])
				}
			}
			b.Free(x)
			if got := b.MemStats().Allocated; got != 0 || b.Err() != nil {
				t.Errorf("after Free: allocated %d, err %v", got, b.Err())
			}
		})
	}
}
