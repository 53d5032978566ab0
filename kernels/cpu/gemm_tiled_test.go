package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/testseed"
)

// TestKern: the micro-kernel in use (the assembly where tiledNative) and
// kern6x16Go give the same sums within float32 rounding, for inner lengths
// 1 … 300 and a C stride wider than a tile; C outside the 6×16 tile is
// never written.
func TestKern(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 5))
	const ldc = tileN + 3
	for _, k := range []int{1, 2, 7, 16, 255, 256, 300} {
		a, b := randF32(r, k*tileM), randF32(r, k*tileN)
		c0 := randF32(r, tileM*ldc)
		got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
		kern(k, a, b, got, ldc)
		kern6x16Go(k, a, b, want, ldc)
		for i := range got {
			r, j := i/ldc, i%ldc
			if j >= tileN {
				if got[i] != c0[i] {
					t.Fatalf("k %d: c[%d][%d] outside the tile changed: %g, was %g", k, r, j, got[i], c0[i])
				}
				continue
			}
			if tol := 1e-5 * float64(k+1); math.Abs(float64(got[i]-want[i])) > tol {
				t.Fatalf("k %d: c[%d][%d] = %g, Go kernel %g (tol %g)", k, r, j, got[i], want[i], tol)
			}
		}
	}
}

// TestGEMMTiledBlocks drives the tiled GEMM across its block edges, which
// the shared conformance suite's random shapes rarely reach: n past one
// packed block of columns (tileNC), k past several blocks of tileK, m not a
// multiple of tileM, every transpose, against a float64 reference. It also
// checks that the result is the same, bit for bit, for 1, 2 and 5 workers,
// and that the packing buffers are counted in memacct.Backend until Close.
func TestGEMMTiledBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 6))
	for _, s := range [][3]int{{1, 1, 1}, {7, 600, 17}, {13, 257, 300}, {64, 513, 48}, {5, 3, 529}} {
		m, k, n := s[0], s[1], s[2]
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			t.Run(fmt.Sprintf("m%d_k%d_n%d_tA%v_tB%v", m, k, n, tr[0], tr[1]), func(t *testing.T) {
				A, B, C := randF32(r, m*k), randF32(r, k*n), randF32(r, m*n)
				const alpha, beta = 0.75, -0.5
				want := refGEMM64(tr[0], tr[1], m, n, k, alpha, A, B, beta, C)
				var first []float32
				for _, w := range []int{1, 2, 5} {
					base := memacct.Read().Bytes[memacct.Backend]
					b, err := New(&Options{Workers: w, Grain: 1, GEMM: GEMMTiled})
					if err != nil {
						t.Fatal(err)
					}
					got := append([]float32(nil), C...)
					b.gemmTiled(tr[0], tr[1], m, n, k, alpha, A, B, beta, got)
					// Its packing buffers are counted while the backend
					// holds them, one per worker at most, and not after.
					if held := memacct.Read().Bytes[memacct.Backend] - base; held < tiledScratchBytes || held > int64(w)*tiledScratchBytes {
						t.Errorf("workers %d: %d bytes counted, want 1 to %d buffers of %d", w, held, w, tiledScratchBytes)
					}
					b.Close()
					if held := memacct.Read().Bytes[memacct.Backend] - base; held != 0 {
						t.Errorf("workers %d: %d bytes still counted after Close", w, held)
					}
					for i := range got {
						if tol := 1e-5 * math.Sqrt(float64(k+1)) * (1 + math.Abs(want[i])); math.Abs(float64(got[i])-want[i]) > tol {
							t.Fatalf("workers %d: C[%d][%d] = %g, want %g (tol %g)", w, i/n, i%n, got[i], want[i], tol)
						}
					}
					if first == nil {
						first = got
						continue
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
							t.Fatalf("workers %d: C[%d][%d] = %g, %g with 1 worker", w, i/n, i%n, got[i], first[i])
						}
					}
				}
			})
		}
	}
}

func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// refGEMM64 is α·op(A)·op(B) + β·C in float64.
func refGEMM64(transA, transB bool, m, n, k int, alpha float32, A, B []float32, beta float32, C []float32) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				a, b := A[i*k+p], B[p*n+j]
				if transA {
					a = A[p*m+i]
				}
				if transB {
					b = B[j*k+p]
				}
				s += float64(a) * float64(b)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(C[i*n+j])
		}
	}
	return out
}

// TestGEMMRowsScratchCounted: the row kernel's per-chunk copy of op(A)'s
// row (k floats) is counted in memacct.Backend while a chunk runs, one
// per worker at most, and released when the call returns.
func TestGEMMRowsScratchCounted(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 7))
	const m, k, n = 64, 3000, 8
	for _, w := range []int{1, 3} {
		b, err := New(&Options{Workers: w, Grain: 1, GEMM: GEMMRows})
		if err != nil {
			t.Fatal(err)
		}
		A, B, C := randF32(r, m*k), randF32(r, k*n), make([]float32, m*n)
		base := memacct.Read().Bytes[memacct.Backend]
		memacct.ResetPeak()
		b.gemmRows(false, false, m, n, k, 1, A, B, 0, C)
		s := memacct.Read()
		if peak := s.PeakBytes[memacct.Backend] - base; peak < 4*k || peak > int64(w)*4*k {
			t.Errorf("workers %d: peak %d bytes counted over the call, want 1 to %d rows of %d", w, peak, w, 4*k)
		}
		if held := s.Bytes[memacct.Backend] - base; held != 0 {
			t.Errorf("workers %d: %d bytes still counted after the call", w, held)
		}
		b.Close()
	}
}

// TestTiledScratchOverflow: buffers made beyond Workers (callers on
// several goroutines at once) are dropped and uncounted when returned;
// returning never blocks, and the kept ones are released by Close.
func TestTiledScratchOverflow(t *testing.T) {
	const w = 2
	base := memacct.Read().Bytes[memacct.Backend]
	b, err := New(&Options{Workers: w, GEMM: GEMMTiled})
	if err != nil {
		t.Fatal(err)
	}
	var held []*tiledScratch
	for range w + 3 {
		held = append(held, b.tiledScratchGet())
	}
	if got := memacct.Read().Bytes[memacct.Backend] - base; got != (w+3)*tiledScratchBytes {
		t.Fatalf("%d buffers out: %d bytes counted, want %d", w+3, got, (w+3)*tiledScratchBytes)
	}
	for _, s := range held {
		b.tiledScratchPut(s) // the last three must not block
	}
	if got := memacct.Read().Bytes[memacct.Backend] - base; got != w*tiledScratchBytes || b.gemmBytes.Load() != w*tiledScratchBytes {
		t.Fatalf("after return: %d bytes counted (backend %d), want %d kept", got, b.gemmBytes.Load(), w*tiledScratchBytes)
	}
	b.Close()
	if got := memacct.Read().Bytes[memacct.Backend] - base; got != 0 {
		t.Fatalf("%d bytes counted after Close", got)
	}
}
