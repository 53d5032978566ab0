package train

import (
	"context"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// BenchmarkEpoch trains SAGE epochs on a small generated graph (history on)
// and reports training nodes per second and input rows per epoch.
func BenchmarkEpoch(b *testing.B) {
	d := smallSynth(b)
	o := synthOpts()
	o.Epochs, o.EvalEvery = b.N, b.N
	tr, err := New(context.Background(), d, o)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	b.ResetTimer()
	rep, err := tr.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var rows int64
	for _, e := range rep.Epochs {
		rows += e.InputNodes
	}
	b.ReportMetric(float64(len(d.TrainIdx())*b.N)/b.Elapsed().Seconds(), "nodes/s")
	b.ReportMetric(float64(rows)/float64(b.N), "rows/epoch")
}

// BenchmarkEvaluate runs the exact layer-wise evaluation of a trained-from-
// scratch SAGE model over the valid and test splits of a 50,000-node
// generated graph (default options) and reports evaluated nodes per
// second. Run it with -cpu 1 and compare CPU time: the evaluation is
// mostly one goroutine building chunks beside the backend's workers.
func BenchmarkEvaluate(b *testing.B) {
	d := dataset(b, "synth50k", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: 50000, Seed: 1}, nil)
		return err
	})
	tr, err := New(context.Background(), d, &Options{Epochs: 1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	b.ResetTimer()
	for range b.N {
		if _, _, err := tr.EvaluateSplits(context.Background(), d.ValidIdx(), d.TestIdx()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(d.ValidIdx())+len(d.TestIdx()))*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}
