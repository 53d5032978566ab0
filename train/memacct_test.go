package train

import (
	"context"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
)

// TestCountersReleased: a trainer's caches, buffers, sampler scratch,
// dynamic caches, backend tensors and inference state are counted while it trains and
// released by Close, so the process's counters return to where they
// started; the report's counted peak covers the built caches.
func TestCountersReleased(t *testing.T) {
	d := smallSynth(t)
	base := memacct.Read()
	o := synthOpts()
	// Micro-batches and sampled evaluation exercise every release path.
	o.Epochs, o.FeatCacheBytes, o.NeighborCacheBytes, o.MicroBatches, o.EvalMode = 1, 64<<10, 64<<10, 2, EvalSampled
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Memory
	if m.FeatureBytes <= 0 || m.NeighborBytes <= 0 || m.HistoryBytes <= 0 {
		t.Fatalf("caches not counted: %+v", m)
	}
	// The peak falls in training (batch buffers) or in the layer-wise
	// evaluation (its per-node state and the transformed rows it holds).
	if c := rep.Counted; c.PeakBytes < m.FeatureBytes+m.NeighborBytes+m.HistoryBytes || c.ByPurpose["backend tensors"] <= 0 ||
		c.ByPurpose["batch buffers"]+c.ByPurpose["inference"] <= 0 {
		t.Errorf("counted peak %+v below the caches %+v", c, m)
	}
	tr.Close()
	after := memacct.Read()
	for p := range after.Bytes {
		if after.Bytes[p] != base.Bytes[p] {
			t.Errorf("%s: %d bytes counted after Close, %d before New", memacct.Purpose(p), after.Bytes[p], base.Bytes[p])
		}
	}
}
