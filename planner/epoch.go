package planner

import (
	"context"
	"fmt"
	"io"

	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/sample"
)

// eachBatch samples epoch of s and calls fn on every batch in order,
// releasing it after; the task desc counts them. It stops at fn's first
// error or the sampler's.
func eachBatch(ctx context.Context, s *sample.Sampler, epoch int, rep progress.Reporter, desc string,
	fn func(b *sample.Batch, plan *sample.Plan) error) error {
	task := rep.Start(desc, 0, progress.Items)
	defer task.Done()
	it := s.Epoch(ctx, epoch)
	defer it.Close()
	plan := it.Plan()
	for {
		b, err := it.Next()
		if err == io.EOF { // the end; a wrapped io.EOF is a failed read
			return nil
		}
		if err != nil {
			return fmt.Errorf("planner: sample: %w", err)
		}
		err = fn(b, plan)
		b.Release()
		if err != nil {
			return err
		}
		task.Add(1)
	}
}

// macroSet is the partitions of the macro batch being sampled: In[q]
// reports whether partition q is one of them (all false in random mode).
type macroSet struct {
	In   []bool
	plan *sample.Plan
	cur  int
}

func newMacroSet(parts sample.Partitions) *macroSet {
	return &macroSet{In: make([]bool, max(parts0K(parts), 1)), cur: -1}
}

// see makes the set b's macro batch's.
func (m *macroSet) see(b *sample.Batch, plan *sample.Plan) {
	if plan == nil || b.Macro < 0 || (plan == m.plan && b.Macro == m.cur) {
		return
	}
	clear(m.In)
	for _, q := range plan.MacroParts[b.Macro] {
		m.In[q] = true
	}
	m.plan, m.cur = plan, b.Macro
}
