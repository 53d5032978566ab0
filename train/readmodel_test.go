package train

import (
	"context"
	"testing"

	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
)

// TestReadModelOfMicroBatches: the planner's read model, recounted for
// the micro-batches the trainer cuts (Profile.RemodelReads with
// splitRows), predicts the gather's read calls and bytes of a training
// epoch exactly when nothing else removes reads (no caches, no history),
// whole batches and cut ones alike; and the cut batches read more rows
// than the whole ones (their input sets overlap).
func TestReadModelOfMicroBatches(t *testing.T) {
	d := smallSynth(t)
	var wholeRows int64
	for _, maxRows := range []int64{0, 300, 120} {
		o := synthOpts()
		o.NoHist, o.Epochs, o.EvalEvery = true, 1, 100
		o.FeatCacheBytes, o.NeighborCacheBytes = -1, -1
		o.FeatCoalesceGap = 4
		o.MaxBatchRows = maxRows
		w := o.withDefaults()
		po := &planner.ProfileOptions{Name: "rm", Fanouts: w.Fanouts, BatchSize: w.BatchSize, Mode: sample.ModeRandom,
			Seed: w.Seed, Workers: w.Workers, Gather: w.buildOptions(0).Feature}
		p, err := planner.RunProfile(context.Background(), d, nil, po)
		if err != nil {
			t.Fatal(err)
		}
		if maxRows > 0 {
			if err := p.RemodelReads(context.Background(), d, nil, po, splitRows(splitBound{rows: int(maxRows)}), maxRows); err != nil {
				t.Fatal(err)
			}
		}
		r := p.Meta.Reads
		rep := run(t, d, o)
		e := rep.Epochs[0]
		t.Logf("micro-batch rows ≤ %d: %d micro-batches; model %d rows in %d reads, %d bytes; training %.0f reads, %.0f bytes",
			maxRows, e.MicroBatches, r.Rows, r.Reads, r.BytesRead, e.Measured.GatherReads, e.Measured.GatherBytesRead)
		if float64(r.Reads) != e.Measured.GatherReads || float64(r.BytesRead) != e.Measured.GatherBytesRead || r.MicroBatchRows != maxRows {
			t.Errorf("micro-batch rows ≤ %d: model %d reads, %d bytes; training %.0f reads, %.0f bytes", maxRows, r.Reads, r.BytesRead,
				e.Measured.GatherReads, e.Measured.GatherBytesRead)
		}
		if maxRows == 0 {
			wholeRows = r.Rows
		} else if e.MicroBatches <= e.Batches || r.Rows <= wholeRows {
			t.Errorf("micro-batch rows ≤ %d: %d micro-batches of %d batches, %d rows read (whole batches %d)", maxRows, e.MicroBatches, e.Batches, r.Rows, wholeRows)
		}
	}
}
