package f32

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestAxpyMatchesLoop: the assembly path and the loop give the same bits,
// on both sides of simdMin and for a = 1 and a ≠ 1.
func TestAxpyMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 7, 8, 9, simdMin - 1, simdMin, 32, 129} {
		for _, a := range []float32{1, -0.37} {
			x, y := make([]float32, n), make([]float32, n+2)
			for i := range x {
				x[i] = rng.Float32()*2 - 1
			}
			for i := range y {
				y[i] = rng.Float32()*2 - 1
			}
			want := append([]float32(nil), y...)
			for i, v := range x {
				want[i] += a * v
			}
			Axpy(y, a, x)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n %d, a %v: y[%d] = %v, loop %v", n, a, i, y[i], want[i])
				}
			}
		}
	}
}

// edgeList draws m edges over dst accumulator rows and src source rows
// numbered from base, sorted by destination as train's lwAcc sorts them,
// and the rows themselves.
func edgeList(rng *rand.Rand, m, dst, src int, base int64, width int) (acc, rows []float32, edges []uint64) {
	acc, rows = make([]float32, dst*width), make([]float32, src*width)
	for i := range acc {
		acc[i] = rng.Float32()*2 - 1
	}
	for i := range rows {
		rows[i] = rng.Float32()*2 - 1
	}
	edges = make([]uint64, m)
	for i := range edges {
		edges[i] = uint64(base+int64(rng.IntN(src)))<<32 | uint64(rng.IntN(dst))
	}
	slices.SortStableFunc(edges, func(a, b uint64) int { return int(uint32(a)) - int(uint32(b)) })
	return acc, rows, edges
}

// TestAddRowsMatchesAxpy: AddRows gives the bits of one Axpy per edge in
// edge order, with repeated destinations and sources, on the assembly's
// widths (multiples of 8) and the loop's, fewer edges than its prefetch
// distance included.
func TestAddRowsMatchesAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, width := range []int{1, 5, 8, 12, 32, 128} {
		for _, m := range []int{1, 7, 9, 1000} {
			const base = 1 << 20
			acc, rows, edges := edgeList(rng, m, 50, 40, base, width)
			want := slices.Clone(acc)
			w := int64(width)
			for _, e := range edges {
				o, k := int64(e>>32)-base, int64(uint32(e))
				for j := range w {
					want[k*w+j] += 1 * rows[o*w+j]
				}
			}
			AddRows(acc, rows, edges, base, width)
			for i := range acc {
				if math.Float32bits(acc[i]) != math.Float32bits(want[i]) {
					t.Fatalf("width %d, %d edges: acc[%d] = %v, loop %v", width, m, i, acc[i], want[i])
				}
			}
		}
	}
}

// TestAddRowsBounds: an edge outside either array panics before anything
// is added, naming the rows.
func TestAddRowsBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name string
		edge uint64
	}{
		{"destination past acc", 3<<32 | 10},
		{"source past rows", 8<<32 | 0},
		{"source below base", 1<<32 | 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc, rows, edges := edgeList(rng, 20, 10, 6, 2, 8)
			edges = append(edges, tc.edge)
			before := slices.Clone(acc)
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "AddRows") {
					t.Fatalf("recover() = %v, want an AddRows panic", r)
				}
				if !slices.Equal(acc, before) {
					t.Fatal("rows were added before the panic")
				}
			}()
			AddRows(acc, rows, edges, 2, 8)
		})
	}
}

// BenchmarkAddRows: layer-wise inference's push (a bucket of 8,192 source
// rows of 32 floats into 900,000 accumulator rows, 130,000 edges sorted
// by destination) with AddRows, and with one Axpy per edge as before.
func BenchmarkAddRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	const width = 32
	acc, rows, edges := edgeList(rng, 130_000, 900_000, 8192, 0, width)
	for _, tc := range []struct {
		name string
		push func()
	}{
		{"AddRows", func() { AddRows(acc, rows, edges, 0, width) }},
		{"Axpy-per-edge", func() {
			for _, e := range edges {
				o, k := int64(e>>32), int64(uint32(e))
				Axpy(acc[k*width:(k+1)*width], 1, rows[o*width:(o+1)*width])
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				tc.push()
			}
			b.ReportMetric(float64(b.N*len(edges))/b.Elapsed().Seconds()/1e6, "Medges/s")
		})
	}
}
