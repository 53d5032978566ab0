package partition

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/importer"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var (
	benchNodes = flag.Int64("partbench.nodes", 2_000_000, "nodes of the generated benchmark graph")
	benchDir   = flag.String("partbench.dir", filepath.Join(os.TempDir(), "ssdgnn-partition-bench"), "cache directory for benchmark datasets")
	benchPass  = flag.Int("partbench.passes", 0, "FENNEL passes in BenchmarkPartition (0: default)")
	benchOrder = flag.String("partbench.order", "", "stream order in BenchmarkPartition (default: the package default)")
	benchGamma = flag.Float64("partbench.gamma", 0, "FENNEL γ in BenchmarkPartition (0: default)")
	benchFP    = flag.Float64("partbench.fp", 0, "Bloom false-positive rate in BenchmarkPartition (0: default)")
	benchAS    = flag.Float64("partbench.alphascale", 0, "AlphaScale in BenchmarkPartition (0: default)")
	benchK     = flag.Int("partbench.k", 0, "parts for the synthetic graph in BenchmarkPartition (0: 10,000)")
	benchK1    = flag.Int("partbench.k1", 0, "first-level parts in BenchmarkPartition (0: default)")
	benchOnly  = flag.String("partbench.methods", "", "comma-separated methods to run (default all)")
	coraSrc    = flag.String("partbench.cora", filepath.Join("..", "testdata", "cora"), "Cora in OGB raw layout (skipped if absent)")
)

// benchDataset returns a cached dataset, building it on first use.
func benchDataset(b *testing.B, name string, build func(dir string) error) *storage.Dataset {
	b.Helper()
	dir := filepath.Join(*benchDir, name)
	if _, err := os.Stat(filepath.Join(dir, storage.ManifestName)); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := build(dir); err != nil {
			b.Fatal(err)
		}
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// BenchmarkPartition runs every method on a generated community graph
// (k = 10,000) and on Cora (k = 100). Metrics: edge-cut (fraction of
// directed edges cut), edges/s/core (directed edges over wall time, per
// GOMAXPROCS), peak-RSS-MiB (this process, or gpmetis's for metis).
//
//	go test -run '^$' -bench BenchmarkPartition -benchtime 1x ./partition
func BenchmarkPartition(b *testing.B) {
	type ds struct {
		name string
		k    int
		open func(b *testing.B) *storage.Dataset
	}
	sets := []ds{
		{fmt.Sprintf("synth%d", *benchNodes), 10000, func(b *testing.B) *storage.Dataset {
			return benchDataset(b, fmt.Sprintf("synth-%d", *benchNodes), func(dir string) error {
				_, err := synth.Generate(dir, synth.Config{Nodes: *benchNodes, AvgDegree: 20, Communities: 10000,
					FeatDim: 1, Classes: 16, TrainFrac: 0.1, ValidFrac: 0.05, TestFrac: 0.05, Homophily: 0.8, Seed: 1},
					&synth.Options{Force: true})
				return err
			})
		}},
		{"cora", 100, func(b *testing.B) *storage.Dataset {
			if _, err := os.Stat(*coraSrc); err != nil {
				b.Skipf("no Cora at %s", *coraSrc)
			}
			return benchDataset(b, "cora", func(dir string) error {
				_, err := importer.ImportOGB(*coraSrc, dir, nil)
				return err
			})
		}},
	}
	if *benchK > 0 {
		sets[0].k = *benchK
	}
	for _, set := range sets {
		b.Run(set.name, func(b *testing.B) {
			d := set.open(b)
			for _, m := range Methods {
				if *benchOnly != "" && !slices.Contains(strings.Split(*benchOnly, ","), string(m)) {
					continue
				}
				b.Run(string(m), func(b *testing.B) {
					if m == Metis {
						if _, err := exec.LookPath("gpmetis"); err != nil {
							b.Skip("gpmetis not on PATH")
						}
					}
					var st Stats
					for range b.N {
						runtime.GC()
						debug.FreeOSMemory()
						var err error
						st, err = Run(d, &Options{Method: m, Parts: set.k, Seed: 1, Force: true, Passes: *benchPass,
							Order: *benchOrder, Gamma: *benchGamma, FalsePositive: *benchFP, FirstLevel: *benchK1, AlphaScale: *benchAS,
							Name: "bench-" + string(m)})
						if err != nil {
							b.Fatal(err)
						}
					}
					cores := float64(runtime.GOMAXPROCS(0))
					secs := st.AssignSeconds
					rss := st.PeakRSSBytes
					if m == Metis {
						secs = st.ExternalSeconds
						rss = st.ExternalPeakRSSBytes
					}
					b.ReportMetric(st.EdgeCut, "edge-cut")
					b.ReportMetric(float64(st.NumEdges)/secs/cores, "edges/s/core")
					b.ReportMetric(secs, "assign-s")
					b.ReportMetric(st.WallSeconds, "wall-s")
					b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
					b.ReportMetric(float64(st.FilterBytes)/(1<<20), "filter-MiB")
					b.ReportMetric(float64(st.MaxNodes)/st.AvgNodes, "max/avg-nodes")
				})
			}
		})
	}
}
