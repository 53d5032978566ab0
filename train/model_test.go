package train

import (
	"math"
	"math/rand/v2"
	"strings"
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
			hb := []*kernels.Block{randBlock(rng, 7, 11, 4), randBlock(rng, 3, 7, 4)}
			checkModelGradients(t, kind, hb, rng)
		})
	}
}

// TestGradientsDegenerateBlocks is TestGradients on the blocks real
// graphs give: destinations without in-edges (isolated nodes), duplicate
// edges and explicit self loops (import --keep-duplicates
// --keep-self-loops), GCN's whole-graph degrees (a sampled destination
// scaled by D/k, a source whose graph degree exceeds the block's), and
// three layers.
func TestGradientsDegenerateBlocks(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	blocks := func() []*kernels.Block {
		// Layer 0: 6 destinations of 9 sources; destination 1 has no
		// in-edges, 2 a duplicate edge, 3 a self loop twice, 4 only
		// its own self loop.
		b0 := &kernels.Block{NumDst: 6, NumSrc: 9,
			Indptr:  []int32{0, 2, 2, 5, 8, 9, 11},
			Indices: []int32{6, 7, 8, 8, 0, 3, 3, 5, 4, 1, 2}}
		// Layer 1: 4 of 6; destination 0 has no in-edges.
		b1 := &kernels.Block{NumDst: 4, NumSrc: 6,
			Indptr:  []int32{0, 0, 3, 5, 7},
			Indices: []int32{4, 4, 1, 2, 5, 0, 3}}
		// Layer 2: 3 of 4.
		b2 := &kernels.Block{NumDst: 3, NumSrc: 4,
			Indptr:  []int32{0, 2, 2, 4},
			Indices: []int32{3, 1, 2, 2}}
		return []*kernels.Block{b0, b1, b2}
	}
	for _, kind := range []string{ModelSAGE, ModelGCN, ModelGAT} {
		for _, graphDeg := range []bool{false, true} {
			if graphDeg && kind != ModelGCN {
				continue
			}
			name := kind
			if graphDeg {
				name += " graph degrees"
			}
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(*seedFlag, 43))
				hb := blocks()
				if graphDeg {
					// Whole-graph degrees at least the block's; the
					// isolated destinations stay 0 in one block and
					// have edges elsewhere in another.
					for _, b := range hb {
						out := b.OutDegrees()
						b.SrcDegrees = make([]int32, b.NumSrc)
						for j := range out {
							b.SrcDegrees[j] = out[j] + int32(rng.IntN(4))
						}
						b.DstDegrees = make([]int32, b.NumDst)
						for i := range b.NumDst {
							b.DstDegrees[i] = b.Indptr[i+1] - b.Indptr[i] + int32(rng.IntN(3))
						}
					}
					hb[0].DstDegrees[1] = 0
				}
				checkModelGradients(t, kind, hb, rng)
			})
		}
	}
}

// checkModelGradients builds a model of len(hb) layers for kind, runs
// forward and backward on hb (GAT: with the self loops training adds)
// and compares every parameter's gradient with central differences.
func checkModelGradients(t *testing.T, kind string, hb []*kernels.Block, rng *rand.Rand) {
	t.Helper()
	be, err := cpu.New(&cpu.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	cfg := ModelConfig{Kind: kind, InDim: 5, Hidden: 4, Classes: 3, Layers: len(hb), Heads: 2}
	m, err := NewModel(be, cfg, *seedFlag)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Biases away from 0: a destination whose aggregate is 0 (an
	// isolated node whose own row the ReLU below zeroed) would otherwise
	// sit exactly on the next ReLU's kink, where the central difference
	// is half the one-sided slope at every step size.
	for _, p := range m.Params() {
		if strings.HasSuffix(p.Name, "bias") {
			b := make([]float32, p.Rows*p.Cols)
			for i := range b {
				b[i] = float32(0.1 * rng.NormFloat64())
			}
			be.Upload(p.W, b)
		}
	}
	if kind == ModelGAT {
		for l := range hb {
			hb[l] = withSelfLoops(hb[l])
		}
	}
	numIn, numOut := hb[0].NumSrc, hb[len(hb)-1].NumDst
	x := make([]float32, numIn*cfg.InDim)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	labels := make([]int32, numOut)
	for i := range labels {
		labels[i] = int32(i % cfg.Classes)
	}
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
	xt := tp.upload(numIn, cfg.InDim, x)
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
}
