package cpu_test

import (
	"math"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
)

// TestGCNSampledUnbiased checks AggGCN with whole-graph degrees
// (Block.DstDegrees, SrcDegrees) as the estimator kernels' package
// documentation says it is: averaged over every k-subset of a
// destination's D in-edges, its output is the output over all D of them,
// for every k from 1 to D.
func TestGCNSampledUnbiased(t *testing.T) {
	be, err := cpu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const D, f = 6, 3
	// Sources 0 (the destination) and 1..D, with whole-graph out-degrees.
	srcDeg := []int32{4, 1, 2, 7, 3, 9, 5}
	x := make([]float32, (D+1)*f)
	for i := range x {
		x[i] = float32(math.Sin(float64(3*i + 1)))
	}
	agg := func(nbrs []int32) []float32 {
		t.Helper()
		blk := &kernels.Block{NumDst: 1, NumSrc: D + 1, Indptr: []int32{0, int32(len(nbrs))}, Indices: nbrs,
			DstDegrees: []int32{D}, SrcDegrees: srcDeg}
		db, err := be.UploadBlock(blk)
		if err != nil {
			t.Fatal(err)
		}
		defer be.FreeBlock(db)
		src, _ := be.Alloc(D+1, f)
		dst, _ := be.Alloc(1, f)
		defer be.Free(src)
		defer be.Free(dst)
		be.Upload(src, x)
		be.Aggregate(db, kernels.AggGCN, dst, src)
		out := make([]float32, f)
		if err := be.Download(out, dst); err != nil {
			t.Fatal(err)
		}
		return out
	}
	all := []int32{1, 2, 3, 4, 5, 6}
	full := agg(all)
	// Â's row by hand: 1/sqrt(D+1) · (x_0/sqrt(out_0+1) + Σ x_j/sqrt(out_j+1)).
	for c := range f {
		w := float64(x[c]) / math.Sqrt(float64(srcDeg[0])+1)
		for _, j := range all {
			w += float64(x[int(j)*f+c]) / math.Sqrt(float64(srcDeg[j])+1)
		}
		w /= math.Sqrt(D + 1)
		if math.Abs(float64(full[c])-w) > 1e-5 {
			t.Fatalf("every in-edge: column %d is %v, want Â's %v", c, full[c], w)
		}
	}
	for k := 1; k <= D; k++ {
		sum := make([]float64, f)
		subsets := 0
		for mask := range 1 << D {
			var nbrs []int32
			for b := range D {
				if mask&(1<<b) != 0 {
					nbrs = append(nbrs, all[b])
				}
			}
			if len(nbrs) != k {
				continue
			}
			subsets++
			for c, v := range agg(nbrs) {
				sum[c] += float64(v)
			}
		}
		for c := range f {
			if mean := sum[c] / float64(subsets); math.Abs(mean-float64(full[c])) > 1e-5 {
				t.Errorf("k=%d: mean over %d subsets, column %d: %v, want the full neighbourhood's %v", k, subsets, c, mean, full[c])
			}
		}
	}
}
