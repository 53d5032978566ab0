package train

import (
	"context"
	"testing"
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
