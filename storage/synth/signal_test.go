package synth

import (
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

// nearestCentroid classifies the test nodes by the nearest class mean of
// the train nodes, once on raw features (an "MLP") and once on features
// averaged over the closed neighbourhood (one mean-aggregation GNN layer).
func nearestCentroid(t testing.TB, d *storage.Dataset, cfg Config) (raw, agg float64) {
	t.Helper()
	n := d.NumNodes()
	dim := d.FeatDim()
	x, err := d.FeaturesF32()
	if err != nil {
		t.Fatal(err)
	}
	h := make([]float32, len(x))
	for v := int64(0); v < n; v++ {
		dst := h[v*int64(dim) : (v+1)*int64(dim)]
		copy(dst, x[v*int64(dim):(v+1)*int64(dim)])
		nb := d.Neighbors(v)
		for i := 0; i < nb.Len(); i++ {
			u := nb.At(i)
			for j, f := range x[u*int64(dim) : (u+1)*int64(dim)] {
				dst[j] += f
			}
		}
		inv := 1 / float32(nb.Len()+1)
		for j := range dst {
			dst[j] *= inv
		}
	}
	labels := d.Labels()
	classes := int(d.Manifest().NumClasses)
	eval := func(f []float32) float64 {
		mean := make([]float64, classes*dim)
		cnt := make([]float64, classes)
		for _, v := range d.TrainIdx() {
			y := int(labels[v])
			cnt[y]++
			for j := 0; j < dim; j++ {
				mean[y*dim+j] += float64(f[v*int64(dim)+int64(j)])
			}
		}
		for y := range classes {
			for j := 0; j < dim; j++ {
				mean[y*dim+j] /= max(1, cnt[y])
			}
		}
		correct := 0
		for _, v := range d.TestIdx() {
			best, arg := 0.0, -1
			for y := range classes {
				s := 0.0
				for j := 0; j < dim; j++ {
					e := float64(f[v*int64(dim)+int64(j)]) - mean[y*dim+j]
					s += e * e
				}
				if arg < 0 || s < best {
					best, arg = s, y
				}
			}
			if arg == int(labels[v]) {
				correct++
			}
		}
		return float64(correct) / float64(len(d.TestIdx()))
	}
	return eval(x), eval(h)
}
