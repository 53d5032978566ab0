package train

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var (
	benchNodes = flag.Int64("bench-nodes", 200_000, "BenchmarkTrainConfigs: generated graph size (128 features)")
	benchDir   = flag.String("bench-dir", "", "BenchmarkTrainConfigs: keep the generated graph and its partitioning here (default: a temporary directory)")
	benchMem   = flag.Float64("bench-mem-frac", 0.25, "BenchmarkTrainConfigs: --mem as a fraction of the feature matrix size")
)

// benchGraph generates (or reuses) the benchmark graph and its FENNEL
// partitioning.
func benchGraph(b *testing.B) (*storage.Dataset, *partition.Partitioning) {
	root := *benchDir
	if root == "" {
		root = tmpRoot
	}
	dir := filepath.Join(root, fmt.Sprintf("bench-synth-%d", *benchNodes))
	if _, err := os.Stat(filepath.Join(dir, "partitions", string(partition.Fennel))); err != nil {
		if _, err := synth.Generate(dir, synth.Config{Nodes: *benchNodes, FeatDim: 128, Seed: 1, TrainFrac: 0.1, ValidFrac: 0.005, TestFrac: 0.005}, &synth.Options{Force: true}); err != nil {
			b.Fatal(err)
		}
		d, err := storage.Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, err = partition.Run(d, &partition.Options{Parts: int(max(*benchNodes/1000, 10)), Method: partition.Fennel})
		d.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	pt, err := partition.Open(dir, string(partition.Fennel))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pt.Close() })
	return d, pt
}

// BenchmarkTrainConfigs trains GraphSAGE (hidden 128, batch 1000, fanouts
// 10 per layer) on a generated graph in two configurations — random
// batches without caches or history, and partition batches with caches
// sized by the planner (--mem = bench-mem-frac of the feature matrix) and
// history — at 2 and 3 layers, and reports the second epoch's wall time
// and its Sa/Ga/Tr/Co busy seconds, plus the speed-up of the second
// configuration. Run with -benchtime 1x (see docs/train.md, bench-train).
func BenchmarkTrainConfigs(b *testing.B) {
	d, pt := benchGraph(b)
	pf, err := sample.NewPartitionFiles(d, pt)
	if err != nil {
		b.Fatal(err)
	}
	defer pf.Close()
	mem := int64(*benchMem * float64(d.NumNodes()*d.FeatRowBytes()))
	var table strings.Builder
	fmt.Fprintf(&table, "\n%d nodes, %d edges, %d train; --mem %d MiB\n| layers | config | epoch s | Sa | Ga | Tr | Co | input rows | feat hit | reused |\n|---|---|---|---|---|---|---|---|---|---|\n",
		d.NumNodes(), d.NumEdges(), len(d.TrainIdx()), mem>>20)
	for _, layers := range []int{2, 3} {
		fan := make([]int, layers)
		for i := range fan {
			fan[i] = 10
		}
		var wall [2]float64
		for ci, cname := range []string{"random, no cache, no hist", "partition, planned caches, hist"} {
			b.Run(fmt.Sprintf("L%d/%s", layers, strings.ReplaceAll(cname, " ", "")), func(b *testing.B) {
				o := &Options{Model: ModelSAGE, Layers: layers, Hidden: 128, Epochs: 2, EvalEvery: 100, BatchSize: 1000, Fanouts: fan, Seed: 1}
				if ci == 0 {
					o.NoHist = true
				} else {
					o.Selection, o.Partitions = sample.ModePartition, pf
					// --mem is the whole process's budget: the minimum
					// (runtime reserve, model, sampler, working set) plus
					// bench-mem-frac of the features for the caches.
					mo := &MemPlanOptions{MemBytes: mem + MinimumBudget(d, o), Part: pt.Part(), Partition: string(partition.Fennel), Cross: pt.Cross(), ProfileName: fmt.Sprintf("bench-l%d", layers)}
					mp, err := PlanMemory(context.Background(), d, o, mo)
					if err != nil {
						b.Fatal(err)
					}
					mp.Apply(o, mo)
				}
				for range b.N {
					tr, err := New(context.Background(), d, o)
					if err != nil {
						b.Fatal(err)
					}
					rep, err := tr.Run(context.Background())
					tr.Close()
					if err != nil {
						b.Fatal(err)
					}
					e := rep.Epochs[len(rep.Epochs)-1]
					wall[ci] = e.WallSec
					b.ReportMetric(e.WallSec, "epoch-s")
					b.ReportMetric(e.Stages.Sample, "Sa-s")
					b.ReportMetric(e.Stages.Gather, "Ga-s")
					b.ReportMetric(e.Stages.Transfer, "Tr-s")
					b.ReportMetric(e.Stages.Compute, "Co-s")
					b.ReportMetric(float64(e.InputNodes), "rows/epoch")
					fmt.Fprintf(&table, "| %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %.1f%% | %d |\n", layers, cname, e.WallSec,
						e.Stages.Sample, e.Stages.Gather, e.Stages.Transfer, e.Stages.Compute, e.InputNodes, 100*e.FeatureHit, e.Reused)
				}
			})
		}
		if wall[1] > 0 {
			fmt.Fprintf(&table, "| %d | speed-up (random/no-cache ÷ partition/caches/hist) | **%.2f×** | | | | | | | |\n", layers, wall[0]/wall[1])
		}
	}
	b.Log(table.String())
}
