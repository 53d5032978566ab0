package train

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/sample"
)

// Evaluate returns the accuracy of sampled inference (fanouts; -1 = full
// neighbourhood) on the labelled nodes among nodes. The sampling seed is
// fixed, so repeated evaluations of the same model agree.
func (t *Trainer) Evaluate(ctx context.Context, nodes []int64, fanouts []int) (float64, error) {
	var correct, total int
	err := t.infer(ctx, nodes, fanouts, func(targets []int64, logits kernels.Tensor, lab kernels.IntTensor) error {
		c, n, err := t.be.Accuracy(logits, lab)
		correct += c
		total += n
		return err
	})
	return ratio(int64(correct), int64(total)), err
}

// Predict returns, for every node of nodes (in that order), its log-softmax
// row (len(nodes)·Classes floats) computed by sampled inference with fanouts.
func (t *Trainer) Predict(ctx context.Context, nodes []int64, fanouts []int) ([]float32, error) {
	c := t.model.cfg.Classes
	pos := make(map[int64]int, len(nodes))
	for i, v := range nodes {
		pos[v] = i
	}
	uniq := make([]int64, 0, len(pos))
	for v := range pos {
		uniq = append(uniq, v)
	}
	// Map order is random: sorted, the batches (and so the samples) are
	// the same on every call, as the fixed seed promises.
	slices.Sort(uniq)
	out := make([]float32, len(nodes)*c)
	byNode := make(map[int64][]float32, len(uniq))
	err := t.infer(ctx, uniq, fanouts, func(targets []int64, logits kernels.Tensor, _ kernels.IntTensor) error {
		t.be.LogSoftmax(logits, logits)
		buf := make([]float32, logits.Rows()*c)
		if err := t.be.Download(buf, logits); err != nil {
			return err
		}
		for i, v := range targets {
			byNode[v] = buf[i*c : (i+1)*c]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, v := range nodes {
		copy(out[i*c:(i+1)*c], byNode[v])
	}
	return out, nil
}

// infer runs the model in evaluation mode over batches of nodes.
func (t *Trainer) infer(ctx context.Context, nodes []int64, fanouts []int, fn func([]int64, kernels.Tensor, kernels.IntTensor) error) error {
	if len(nodes) == 0 {
		return nil
	}
	if len(fanouts) != t.o.Layers {
		return fmt.Errorf("%w: %d fanouts for %d layers", ErrInvalidOptions, len(fanouts), t.o.Layers)
	}
	s, err := sample.New(t.d, nil, &sample.Options{Fanouts: fanouts, BatchSize: t.o.BatchSize, Seed: mixSeed(t.o.Seed, 0xe7a1),
		Workers: t.o.Workers, Source: t.o.Source, NeighborCache: t.nc, Train: nodes})
	if err != nil {
		return err
	}
	defer s.Close()
	it := s.Epoch(ctx, 0)
	defer it.Close()
	ring := newBufRing(1) // one batch at a time: the buffer is reused
	defer ring.release()
	bar := t.o.Progress.Start("sampled pass", int64(len(nodes)), progress.Items)
	defer bar.Done()
	fn0 := fn
	fn = func(ids []int64, logits kernels.Tensor, lab kernels.IntTensor) error {
		bar.Add(int64(len(ids)))
		return fn0(ids, logits, lab)
	}
	for {
		b, err := it.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		// Batches whose input rows exceed the budget's cap are cut into
		// micro-batches by target, computed one after another: without
		// gradients each target's output is the whole batch's.
		hb := convert(b, nil, t.o.Model == ModelGAT)
		hb.withDegrees(t.deg)
		var sp *splitter
		if k := fitSplit(hb, t.evalBound); k > 1 {
			sp = newSplitter(hb, k)
		}
		parts := 1
		if sp != nil {
			parts = sp.k
		}
		for m := range parts {
			j := &job{hb: hb, ring: ring}
			if sp != nil {
				j.hb = sp.build(m).hb
			}
			if m == parts-1 {
				j.batch = b
				if sp != nil {
					hb.uncount()
				}
			}
			if err := t.inferJob(ctx, j, ring, fn); err != nil {
				if m < parts-1 {
					hb.uncount()
					b.Release()
				}
				return err
			}
		}
	}
}

// inferJob gathers, uploads and runs forward on one (micro-)batch and hands
// its targets' logits to fn; the job is freed (and its batch released)
// whatever happens.
func (t *Trainer) inferJob(ctx context.Context, j *job, ring *bufRing, fn func([]int64, kernels.Tensor, kernels.IntTensor) error) error {
	var err error
	if j.feats, err = ring.get(ctx, t.split(j)*t.d.FeatDim()); err != nil {
		t.releaseBatch(j)
		return err
	}
	j.buf = j.feats
	if err := t.gather(j); err != nil {
		ring.put(j.buf)
		t.releaseBatch(j)
		return err
	}
	targets := j.hb.nodes[:j.hb.targets]
	if err := t.upload(j); err != nil {
		t.freeJob(j)
		return err
	}
	t.beMu.Lock()
	tp := &tape{be: t.be}
	err = tp.run(func() {
		logits := t.model.forward(tp, &pass{blocks: j.blocks, x: j.x})
		if e := fn(targets, logits, j.lab); e != nil {
			panic(tapeError{e})
		}
	})
	tp.free()
	t.beMu.Unlock()
	t.freeJob(j)
	return err
}

// validateEval checks the evaluation options (defaults applied).
func (w *Options) validateEval() error {
	switch w.EvalMode {
	case EvalLayerwise, EvalSampled:
	default:
		return opterr.Errorf(ErrInvalidOptions, "%s %q (want %s or %s)", opterr.Field("EvalMode"), w.EvalMode, EvalLayerwise, EvalSampled)
	}
	if w.EvalMemBytes < 0 || w.EvalMemBytes > 0 && w.EvalMemBytes < minEvalMemBytes {
		return opterr.Errorf(ErrInvalidOptions, "%s %d bytes (want 0 for the default, or at least %d)", opterr.Field("EvalMemBytes"), w.EvalMemBytes, minEvalMemBytes)
	}
	if w.UntilValid < 0 || w.UntilValid > 1 || w.UntilValid != w.UntilValid {
		return opterr.Errorf(ErrInvalidOptions, "%s %v (want a fraction in (0,1], or 0 for none)", opterr.Field("UntilValid"), w.UntilValid)
	}
	return nil
}

// logits streams the log-softmax rows of nodes (any order, repeats
// allowed) computed in mode (EvalLayerwise or EvalSampled with fanouts) to
// sink, each node once, in chunks: ids ascending for layer-wise, batch
// order for sampled. The layer-wise statistics are nil in sampled mode.
func (t *Trainer) logits(ctx context.Context, mode string, nodes []int64, fanouts []int, sink func(ids []int64, logp []float32) error) (*LayerwiseStats, error) {
	uniq := slices.Clone(nodes)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	c := t.model.cfg.Classes
	var buf []float32
	down := func(ids []int64, logits kernels.Tensor) error {
		t.be.LogSoftmax(logits, logits)
		buf = slices.Grow(buf[:0], logits.Rows()*c)[:logits.Rows()*c]
		if err := t.be.Download(buf, logits); err != nil {
			return err
		}
		return sink(ids, buf)
	}
	switch mode {
	case EvalLayerwise, "":
		return t.layerwise(ctx, uniq, down)
	case EvalSampled:
		return nil, t.infer(ctx, uniq, fanouts, func(ids []int64, logits kernels.Tensor, _ kernels.IntTensor) error {
			return down(ids, logits)
		})
	}
	return nil, fmt.Errorf("%w: eval mode %q", ErrInvalidOptions, mode)
}

// argmax is the index of v's largest entry (the lowest on ties).
func argmax(v []float32) int {
	best := 0
	for k := 1; k < len(v); k++ {
		if v[k] > v[best] {
			best = k
		}
	}
	return best
}

// EvaluateSplits returns the accuracy on the labelled nodes of each split,
// computed with Options.EvalMode: layer-wise, one exact pass over the union
// of the splits; sampled (EvalFanouts), one pass per split as Evaluate.
// The layer-wise statistics are nil in sampled mode.
func (t *Trainer) EvaluateSplits(ctx context.Context, splits ...[]int64) ([]float64, *LayerwiseStats, error) {
	accs := make([]float64, len(splits))
	if t.o.EvalMode == EvalSampled {
		for i, s := range splits {
			a, err := t.Evaluate(ctx, s, t.o.EvalFanouts)
			if err != nil {
				return nil, nil, err
			}
			accs[i] = a
		}
		return accs, nil, nil
	}
	// A node's bit i is set when it belongs to split i.
	member := map[int64]uint64{}
	var all []int64
	for i, s := range splits {
		for _, v := range s {
			if member[v] == 0 {
				all = append(all, v)
			}
			member[v] |= 1 << (i % 64)
		}
	}
	if len(splits) > 64 {
		return nil, nil, fmt.Errorf("%w: %d splits (at most 64)", ErrInvalidOptions, len(splits))
	}
	correct := make([]int64, len(splits))
	total := make([]int64, len(splits))
	labels := t.d.Labels()
	c := t.model.cfg.Classes
	st, err := t.logits(ctx, EvalLayerwise, all, nil, func(ids []int64, logp []float32) error {
		for r, v := range ids {
			lab := labels[v]
			if lab < 0 {
				continue
			}
			hit := int32(argmax(logp[r*c:(r+1)*c])) == lab
			for i, m := 0, member[v]; m != 0; i, m = i+1, m>>1 {
				if m&1 != 0 {
					total[i]++
					if hit {
						correct[i]++
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	for i := range accs {
		accs[i] = ratio(correct[i], total[i])
	}
	return accs, st, nil
}

// evalValidTest is Run's evaluation: valid and test accuracy with
// Options.EvalMode (layer-wise: one pass over the nodes both need).
func (t *Trainer) evalValidTest(ctx context.Context) (valid, test float64, err error) {
	accs, st, err := t.EvaluateSplits(ctx, t.d.ValidIdx(), t.d.TestIdx())
	if err != nil {
		return 0, 0, err
	}
	if st != nil {
		in, passes := st.phaseSeconds()
		t.o.Logger.Info("layer-wise evaluation", "targets", st.Targets, "restricted", st.Restricted, "rows", st.rows(),
			"chunks", st.chunks(), "stages", st.stages(), "passes", st.passes(), "input_bytes", st.Layers[0].InputBytes, "gather_rows", st.gatherRows(), "held_bytes", st.HeldBytes, "layer_seconds", st.layerSeconds(), "input_seconds", in, "pass_seconds", passes,
			"bytes_read", st.BytesRead(), "temp_bytes", st.TempBytes(), "chunk_bytes", st.ChunkBytes, "seconds", st.Seconds)
	}
	return accs[0], accs[1], nil
}
