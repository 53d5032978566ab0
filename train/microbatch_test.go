package train

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
)

// TestMicroBatchesEqualWholeBatch: an epoch whose batches are cut into 2 or
// 4 micro-batches with accumulated gradients ends with the weights of the
// unsplit epoch, within float tolerance, for every model, with history on
// and off. Dropout is off: masks are drawn per micro-batch (see
// microbatch.go).
func TestMicroBatchesEqualWholeBatch(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	for _, tc := range []struct {
		model  string
		noHist bool
	}{
		{ModelSAGE, false},
		{ModelSAGE, true},
		{ModelGCN, true},
		{ModelGCN, false},
		{ModelGAT, false},
	} {
		t.Run(fmt.Sprintf("%s-nohist=%v", tc.model, tc.noHist), func(t *testing.T) {
			opts := func(k int) *Options {
				o := synthOpts()
				o.Model, o.NoHist, o.Epochs, o.Dropout, o.MicroBatches = tc.model, tc.noHist, 2, -1, k
				o.Layers, o.Fanouts = 3, []int{4, 4, 4}
				return o
			}
			rep1, w1 := trainWeights(t, d, opts(0))
			if rep1.Epochs[0].MicroBatches != 0 {
				t.Fatalf("unsplit run computed %d micro-batches", rep1.Epochs[0].MicroBatches)
			}
			for _, k := range []int{2, 4} {
				rep, w := trainWeights(t, d, opts(k))
				e := rep.Epochs[0]
				if e.Batches != rep1.Epochs[0].Batches || e.MicroBatches != k*e.Batches {
					t.Fatalf("k=%d: %d batches, %d micro-batches; unsplit %d batches", k, e.Batches, e.MicroBatches, rep1.Epochs[0].Batches)
				}
				if math.Abs(e.Loss-rep1.Epochs[0].Loss) > 1e-4*math.Abs(rep1.Epochs[0].Loss) {
					t.Errorf("k=%d: epoch loss %v, unsplit %v", k, e.Loss, rep1.Epochs[0].Loss)
				}
				var worst float64
				for i := range w1 {
					for j := range w1[i] {
						diff := math.Abs(float64(w[i][j] - w1[i][j]))
						worst = max(worst, diff/(1e-3+math.Abs(float64(w1[i][j]))))
					}
				}
				t.Logf("k=%d: largest relative weight difference %.2g", k, worst)
				if worst > 5e-4 {
					t.Errorf("k=%d: weights differ from the unsplit run by up to %.2g (relative)", k, worst)
				}
			}
		})
	}
}

// TestSplitHostBatch checks the micro-batch restriction on a hand-made
// two-layer batch: targets, their in-edges, the nodes they reach, and the
// source degrees carried from the whole batch.
func TestSplitHostBatch(t *testing.T) {
	// nodes: 0,1 targets; 2,3 hop-1; 4 hop-2.
	// block 1 (top): dst 0 <- {1,2}, dst 1 <- {3}.
	// block 0: dst 0 <- {2}, 1 <- {}, 2 <- {4}, 3 <- {4}.
	hb := &hostBatch{nodes: []int64{10, 11, 12, 13, 14}, targets: 2, blocks: []*kernels.Block{
		{NumDst: 4, NumSrc: 5, Indptr: []int32{0, 1, 1, 2, 3}, Indices: []int32{2, 4, 4}},
		{NumDst: 2, NumSrc: 4, Indptr: []int32{0, 2, 3}, Indices: []int32{1, 2, 3}},
	}}
	mbs := splitHostBatch(hb, 2)
	if len(mbs) != 2 {
		t.Fatalf("%d micro-batches", len(mbs))
	}
	// Micro-batch 0: target 10 reaches 11 and 12 in the top block, then
	// 12's, 11's and 10's in-edges below: 14 (from 12) and 12 (from 10).
	m0 := mbs[0].hb
	if fmt.Sprint(m0.nodes) != "[10 11 12 14]" || m0.targets != 1 {
		t.Errorf("micro 0 nodes %v targets %d", m0.nodes, m0.targets)
	}
	top := m0.blocks[1]
	if top.NumDst != 1 || top.NumSrc != 3 || fmt.Sprint(top.Indices) != "[1 2]" {
		t.Errorf("micro 0 top block %+v", top)
	}
	// Source degrees are the whole batch's: node 11 has out-degree 1 in
	// the whole top block, node 12 has 1.
	if fmt.Sprint(top.SrcDegrees) != "[0 1 1]" {
		t.Errorf("micro 0 top SrcDegrees %v, want the whole block's [0 1 1]", top.SrcDegrees)
	}
	low := m0.blocks[0]
	if low.NumDst != 3 || low.NumSrc != 4 || fmt.Sprint(low.Indptr) != "[0 1 1 2]" || fmt.Sprint(low.Indices) != "[2 3]" {
		t.Errorf("micro 0 low block %+v", low)
	}
	if err := low.Validate(); err != nil {
		t.Error(err)
	}
	m1 := mbs[1].hb
	if fmt.Sprint(m1.nodes) != "[11 13 14]" || fmt.Sprint(mbs[1].full) != "[1 3 4]" {
		t.Errorf("micro 1 nodes %v full %v", m1.nodes, mbs[1].full)
	}
	// fitSplit: 5 rows do not fit 4, so two micro-batches (4 and 3 rows);
	// likewise 4 input-layer destinations do not fit 3 (3 and 2).
	for _, tc := range []struct {
		b    splitBound
		want int
	}{
		{splitBound{rows: 4}, 2},
		{splitBound{rows: 5}, 1},
		{splitBound{dst: 3}, 2},
		{splitBound{dst: 4}, 1},
		{splitBound{rows: 5, dst: 3}, 2},
		{splitBound{}, 1},
	} {
		if got := fitSplit(hb, tc.b); got != tc.want {
			t.Errorf("fitSplit(%+v) = %d micro-batches, want %d", tc.b, got, tc.want)
		}
	}
	if r, d := newSplitter(hb, 2).rows(0); r != len(m0.nodes) || d != m0.blocks[0].NumDst {
		t.Errorf("rows(0) = %d rows, %d destinations; built micro-batch has %d, %d", r, d, len(m0.nodes), m0.blocks[0].NumDst)
	}
}

// TestModelMemBytesMatchesBackend: ModelConfig.MemBytes equals what the
// backend counts at allocation for the model's tensors, and with
// micro-batching also for the gradient sums.
func TestModelMemBytesMatchesBackend(t *testing.T) {
	for _, cfg := range []ModelConfig{
		{Kind: ModelSAGE, InDim: 37, Hidden: 19, Classes: 5, Layers: 3},
		{Kind: ModelGCN, InDim: 37, Hidden: 19, Classes: 5, Layers: 2},
		{Kind: ModelGAT, InDim: 37, Hidden: 7, Classes: 5, Layers: 3, Heads: 3},
	} {
		be, err := cpu.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		before := be.MemStats().Allocated
		m, err := NewModel(be, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := be.MemStats().Allocated - before; got != cfg.MemBytes(false) {
			t.Errorf("%s: backend counts %d bytes for the model, MemBytes says %d", cfg.Kind, got, cfg.MemBytes(false))
		}
		tr := &Trainer{be: be, model: m}
		if err := tr.accumulate(true, false); err != nil {
			t.Fatal(err)
		}
		if got := be.MemStats().Allocated - before; got != cfg.MemBytes(true) {
			t.Errorf("%s: backend counts %d bytes with gradient sums, MemBytes(true) says %d", cfg.Kind, got, cfg.MemBytes(true))
		}
		for _, a := range tr.gradAcc {
			be.Free(a)
		}
		m.Close()
		be.Close()
	}
}

// TestSampledEvalMicroBatches: sampled inference with batches cut to a
// small row cap gives the predictions of whole batches.
func TestSampledEvalMicroBatches(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	o.Epochs, o.Layers, o.Fanouts = 1, 3, []int{4, 4, 4}
	runThen(t, d, o, func(tr *Trainer) {
		nodes := d.ValidIdx()
		whole, err := tr.Predict(context.Background(), nodes, o.Fanouts)
		if err != nil {
			t.Fatal(err)
		}
		tr.evalBound = splitBound{rows: 60}
		split, err := tr.Predict(context.Background(), nodes, o.Fanouts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range whole {
			if d := math.Abs(float64(whole[i] - split[i])); d > 1e-4*(1+math.Abs(float64(whole[i]))) {
				t.Fatalf("value %d: whole batches %v, micro-batches %v", i, whole[i], split[i])
			}
		}
	})
}

// splitHostBatch cuts hb into k micro-batches at once (see splitter).
func splitHostBatch(hb *hostBatch, k int) []microBatch {
	s := newSplitter(hb, k)
	out := make([]microBatch, s.k)
	for m := range out {
		out[m] = s.build(m)
	}
	return out
}
