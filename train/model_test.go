package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
)

func randBlock(rng *rand.Rand, nd, ns, maxDeg int) *kernels.Block {
	b := &kernels.Block{NumDst: nd, NumSrc: ns, Indptr: make([]int32, nd+1)}
	for i := 0; i < nd; i++ {
		deg := 1 + rng.IntN(maxDeg)
		seen := map[int32]bool{}
		for k := 0; k < deg; k++ {
			j := int32(rng.IntN(ns))
			if !seen[j] {
				seen[j] = true
				b.Indices = append(b.Indices, j)
			}
		}
		b.Indptr[i+1] = int32(len(b.Indices))
	}
	return b
}

// TestGradients checks every layer type's backward (two layers, so the
// input gradient of the upper layer is exercised too) against central
// finite differences of the cross-entropy loss, through the CPU backend.
func TestGradients(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	for _, kind := range []string{ModelSAGE, ModelGCN, ModelGAT} {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(*seedFlag, 42))
			be, err := cpu.New(&cpu.Options{Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			cfg := ModelConfig{Kind: kind, InDim: 5, Hidden: 4, Classes: 3, Layers: 2, Heads: 2}
			m, err := NewModel(be, cfg, *seedFlag)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			hb := []*kernels.Block{randBlock(rng, 7, 11, 4), randBlock(rng, 3, 7, 4)}
			if kind == ModelGAT {
				for l := range hb {
					hb[l] = withSelfLoops(hb[l])
				}
			}
			x := make([]float32, 11*cfg.InDim)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			labels := []int32{0, 2, 1}
			tp := &tape{be: be}
			defer tp.free()
			var blocks []*devBlock
			for _, b := range hb {
				db, err := be.UploadBlock(b)
				if err != nil {
					t.Fatal(err)
				}
				defer be.FreeBlock(db)
				blocks = append(blocks, &devBlock{blk: db})
			}
			xt := tp.upload(11, cfg.InDim, x)
			lab := tp.ints(labels)
			loss := func(grad bool) float64 {
				lt := &tape{be: be}
				defer lt.free()
				for _, b := range blocks {
					b.iota = nil
				}
				var l float32
				if err := lt.run(func() {
					p := &pass{blocks: blocks, x: xt}
					logits := m.forward(lt, p)
					dl := lt.alloc(logits.Rows(), logits.Cols())
					var err error
					if l, _, err = be.CrossEntropy(dl, logits, lab); err != nil {
						t.Fatal(err)
					}
					if grad {
						m.backward(lt, p, dl)
					}
				}); err != nil {
					t.Fatal(err)
				}
				return float64(l)
			}
			loss(true)
			// Central differences at two step sizes; where they disagree a
			// ReLU/LeakyReLU kink lies within the step and the entry is
			// skipped (at most a few per model).
			fdAt := func(p *Param, w []float32, i int, eps float32) float64 {
				orig := w[i]
				w[i] = orig + eps
				be.Upload(p.W, w)
				lp := loss(false)
				w[i] = orig - eps
				be.Upload(p.W, w)
				lm := loss(false)
				w[i] = orig
				be.Upload(p.W, w)
				return (lp - lm) / (2 * float64(eps))
			}
			tol := func(ref float64) float64 { return 2e-3 + 3e-2*math.Abs(ref) }
			checked, skipped := 0, 0
			for _, p := range m.Params() {
				n := p.Rows * p.Cols
				w := make([]float32, n)
				g := make([]float32, n)
				if err := be.Download(w, p.W); err != nil {
					t.Fatal(err)
				}
				if err := be.Download(g, p.G); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					fd1, fd2 := fdAt(p, w, i, 1e-3), fdAt(p, w, i, 2.5e-4)
					if math.Abs(fd1-fd2) > tol(fd2) {
						skipped++
						continue
					}
					checked++
					if d := math.Abs(fd2 - float64(g[i])); d > tol(fd2) {
						t.Errorf("%s[%d]: backward %g, finite difference %g", p.Name, i, g[i], fd2)
					}
				}
			}
			if skipped*10 > checked {
				t.Errorf("%d entries skipped as non-smooth, %d checked", skipped, checked)
			}
		})
	}
}
