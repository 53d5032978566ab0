package train

import (
	"context"
	"fmt"
	"io"

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
	for {
		b, err := it.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		j := &job{hb: convert(b, nil, t.o.Model == ModelGAT), ring: ring}
		if j.feats, err = ring.get(ctx, t.split(j)*t.d.FeatDim()); err != nil {
			return err
		}
		j.buf = j.feats
		if err := t.gather(j); err != nil {
			ring.put(j.buf)
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
		if err != nil {
			return err
		}
	}
}
