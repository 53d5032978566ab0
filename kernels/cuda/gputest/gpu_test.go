//go:build cuda && cgo && linux

package gputest

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/kernels/cuda"
	"github.com/ssdgnn/ssdgnn/kernels/kerneltest"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the random inputs of this package's own tests (0: time-based)")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rng(t testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 7))
}

func newFunc(t testing.TB, opts *cuda.Options) func() kernels.Backend {
	return func() kernels.Backend {
		b, err := cuda.New(opts)
		if err != nil {
			t.Fatalf("cuda.New: %v", err)
		}
		return b
	}
}

func newBackend(t testing.TB, opts *cuda.Options) *cuda.Backend {
	t.Helper()
	b, err := cuda.New(opts)
	if err != nil {
		t.Fatalf("cuda.New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestDevice(t *testing.T) {
	b := newBackend(t, nil)
	t.Logf("device %s, host stats %+v", b.Device(), b.HostStats())
	if b.Name() != "cuda" {
		t.Errorf("Name() = %q", b.Name())
	}
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *cuda.Options
	}{
		{"default", nil},
		{"naive_gemm", &cuda.Options{GEMM: cuda.GEMMNaive}},
		// Tiny staging buffers and queue force chunked copies, ring
		// reuse and a blocking queue.
		{"small_staging_queue1", &cuda.Options{StagingBytes: 4096, StagingBuffers: 2, QueueDepth: 1, PoolBytes: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) { kerneltest.Run(t, newFunc(t, tc.opts)) })
	}
}

// mmapFloats returns n float32 outside the Go heap, as the feature and
// history caches hold them.
func mmapFloats(t testing.TB, n int) []float32 {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, max(n*4, 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), n)
}

func download(t testing.TB, b kernels.Backend, x kernels.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Rows()*x.Cols())
	if err := b.Download(out, x); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGatherHostRows(t *testing.T) {
	r := rng(t)
	for _, tc := range []struct {
		name string
		opts *cuda.Options
	}{
		{"auto", nil},
		{"staging", &cuda.Options{ZeroCopy: cuda.ZeroCopyOff}},
		{"staging_small", &cuda.Options{ZeroCopy: cuda.ZeroCopyOff, StagingBytes: 4096, StagingBuffers: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.opts)
			for _, shape := range [][3]int{{1, 1, 1}, {50, 7, 13}, {1000, 128, 3000}, {300, 1029, 64}} {
				rows, cols, n := shape[0], shape[1], shape[2]
				host := mmapFloats(t, rows*cols)
				for i := range host {
					host[i] = float32(r.NormFloat64())
				}
				idx := make([]int32, n)
				for i := range idx {
					idx[i] = int32(r.IntN(rows))
				}
				h, err := b.RegisterHost(host, cols)
				if err != nil {
					t.Fatal(err)
				}
				if tc.opts != nil && h.ZeroCopy() {
					t.Fatal("ZeroCopyOff backend registered a zero-copy buffer")
				}
				// Device path: upload the whole table and GatherRows.
				src, _ := b.Alloc(rows, cols)
				b.Upload(src, host)
				it, _ := b.AllocInts(n)
				b.UploadInts(it, idx)
				want, _ := b.Alloc(n, cols)
				b.GatherRows(want, src, it)
				got, _ := b.Alloc(n, cols)
				b.GatherHostRows(got, h, idx)
				got2, _ := b.Alloc(n, cols)
				b.GatherHostRowsDevice(got2, h, it)
				w, g, g2 := download(t, b, want), download(t, b, got), download(t, b, got2)
				for i := range w {
					if math.Float32bits(w[i]) != math.Float32bits(g[i]) || math.Float32bits(w[i]) != math.Float32bits(g2[i]) {
						t.Fatalf("%v zero-copy=%v: element %d: host gather %v / %v, device gather %v", shape, h.ZeroCopy(), i, g[i], g2[i], w[i])
					}
				}
				if hs := b.HostStats(); hs.Registered != 1 || hs.RegisteredBytes != int64(rows*cols*4) {
					t.Errorf("HostStats %+v with one %d-byte buffer", hs, rows*cols*4)
				}
				for _, x := range []kernels.Tensor{src, want, got, got2} {
					b.Free(x)
				}
				b.FreeInts(it)
				if err := b.UnregisterHost(h); err != nil {
					t.Fatal(err)
				}
				if err := b.UnregisterHost(h); !errors.Is(err, cuda.ErrNotRegistered) {
					t.Errorf("second UnregisterHost: %v", err)
				}
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			if ms := b.MemStats(); ms.Allocated != 0 || ms.Handles != 0 {
				t.Errorf("MemStats %+v after freeing everything", ms)
			}
		})
	}
}

func TestGatherHostRowsErrors(t *testing.T) {
	b := newBackend(t, nil)
	host := mmapFloats(t, 20)
	h, err := b.RegisterHost(host, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.UnregisterHost(h)
	dst, _ := b.Alloc(1, 4)
	b.GatherHostRows(dst, h, []int32{5})
	if err := b.Err(); !errors.Is(err, kernels.ErrInvalidArg) {
		t.Fatalf("out-of-range host index: Err() = %v, want ErrInvalidArg", err)
	}
	if _, err := b.RegisterHost(host, 3); !errors.Is(err, kernels.ErrInvalidArg) {
		t.Errorf("RegisterHost with 20 values of rows of 3: %v", err)
	}
}

// TestDeviceRangeErrors checks that indices and labels validated by kernels
// surface as sticky ErrInvalidArg at the next sync point.
func TestDeviceRangeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(b kernels.Backend) error
	}{
		{"GatherRows", func(b kernels.Backend) error {
			src, _ := b.Alloc(3, 2)
			dst, _ := b.Alloc(2, 2)
			idx, _ := b.AllocInts(2)
			b.UploadInts(idx, []int32{0, 3})
			b.GatherRows(dst, src, idx)
			return b.Download(make([]float32, 4), dst)
		}},
		{"ScatterAddRows", func(b kernels.Backend) error {
			src, _ := b.Alloc(2, 2)
			dst, _ := b.Alloc(3, 2)
			idx, _ := b.AllocInts(2)
			b.UploadInts(idx, []int32{-1, 0})
			b.ScatterAddRows(dst, src, idx)
			return b.Err()
		}},
		{"CrossEntropy", func(b kernels.Backend) error {
			x, _ := b.Alloc(2, 3)
			l, _ := b.AllocInts(2)
			b.UploadInts(l, []int32{0, 3})
			_, _, err := b.CrossEntropy(nil, x, l)
			return err
		}},
		{"Accuracy", func(b kernels.Backend) error {
			x, _ := b.Alloc(2, 3)
			l, _ := b.AllocInts(2)
			b.UploadInts(l, []int32{-2, 0})
			_, _, err := b.Accuracy(x, l)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, nil)
			if err := tc.run(b); !errors.Is(err, kernels.ErrInvalidArg) {
				t.Fatalf("got %v, want ErrInvalidArg", err)
			}
			if err := b.Err(); !errors.Is(err, kernels.ErrInvalidArg) {
				t.Fatalf("error not sticky: Err() = %v", err)
			}
		})
	}
}

// TestScatterMatchesCPU: both ScatterAddRows paths (unique rows and
// repeated rows) add in the order the interface fixes, with single float32
// additions, so they match the CPU backend bit for bit.
func TestScatterMatchesCPU(t *testing.T) {
	r := rng(t)
	g := newBackend(t, nil)
	c, err := cpu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, unique := range []bool{true, false} {
		rows, cols, n := 500, 37, 400
		idx := make([]int32, n)
		perm := r.Perm(rows)
		for i := range idx {
			if unique {
				idx[i] = int32(perm[i])
			} else {
				idx[i] = int32(r.IntN(20))
			}
		}
		acc := make([]float32, rows*cols)
		src := make([]float32, n*cols)
		for i := range acc {
			acc[i] = float32(r.NormFloat64())
		}
		for i := range src {
			src[i] = float32(r.NormFloat64())
		}
		var outs [2][]float32
		for k, b := range []kernels.Backend{g, c} {
			d, _ := b.Alloc(rows, cols)
			s, _ := b.Alloc(n, cols)
			it, _ := b.AllocInts(n)
			b.Upload(d, acc)
			b.Upload(s, src)
			b.UploadInts(it, idx)
			b.ScatterAddRows(d, s, it)
			outs[k] = download(t, b, d)
			b.Free(d)
			b.Free(s)
			b.FreeInts(it)
		}
		for i := range outs[0] {
			if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
				t.Fatalf("unique=%v: element %d: cuda %v, cpu %v", unique, i, outs[0][i], outs[1][i])
			}
		}
	}
}

// TestCloseReleases checks that Close stops the owner goroutine (goleak in
// TestMain) and that ops after Close report ErrClosed.
func TestCloseReleases(t *testing.T) {
	b, err := cuda.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := b.Alloc(4, 4)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	b.Zero(x)
	if err := b.Err(); !errors.Is(err, kernels.ErrClosed) {
		t.Fatalf("op after Close: Err() = %v", err)
	}
	if _, err := b.Alloc(1, 1); !errors.Is(err, kernels.ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
}

func TestPoolReuse(t *testing.T) {
	b := newBackend(t, nil)
	for range 3 {
		x, err := b.Alloc(1000, 100)
		if err != nil {
			t.Fatal(err)
		}
		b.Free(x)
	}
	reserved, cached := b.PoolStats()
	// Three alloc/free cycles of one size reuse one pooled buffer.
	if reserved >= 2*400000 || cached < 400000 || cached > reserved {
		t.Errorf("PoolStats reserved %d cached %d after reusing one 400000-byte buffer", reserved, cached)
	}
	t.Logf("pool reserved %d cached %d", reserved, cached)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestMaxBytes(t *testing.T) {
	b := newBackend(t, &cuda.Options{MaxBytes: 1000})
	x, err := b.Alloc(10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(100, 100); !errors.Is(err, kernels.ErrOutOfMemory) {
		t.Fatalf("Alloc beyond MaxBytes: %v", err)
	}
	b.Free(x)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
}

func Example_gatherHostRows() {
	b, err := cuda.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	feats := []float32{0, 0, 1, 1, 2, 2} // 3 rows of 2; use mmap'd memory in real code
	h, err := b.RegisterHost(feats, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.UnregisterHost(h)
	dst, _ := b.Alloc(2, 2)
	defer b.Free(dst)
	b.GatherHostRows(dst, h, []int32{2, 0})
	out := make([]float32, 4)
	if err := b.Download(out, dst); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)
	// Output: [2 2 0 0]
}
