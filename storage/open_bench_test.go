package storage_test

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var openBenchNodes = flag.Int64("openbench.nodes", 1_000_000, "nodes of BenchmarkOpen's generated graph (average degree 20)")

// BenchmarkOpen measures Open with and without the invariant scan on a
// generated graph (1M nodes, ~20M directed edges by default, cached under
// the temp directory). The scan reads indptr, indices, labels and splits
// once from the page cache; "checks" minus "nochecks" is its cost.
func BenchmarkOpen(b *testing.B) {
	dir := filepath.Join(os.TempDir(), "ssdgnn-open-bench", "g")
	if _, err := os.Stat(filepath.Join(dir, storage.ManifestName)); errors.Is(err, fs.ErrNotExist) {
		cfg := synth.Config{Nodes: *openBenchNodes, AvgDegree: 20, FeatDim: 8, Classes: 8, Seed: 1}
		if _, err := synth.Generate(dir, cfg, &synth.Options{Force: true}); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		skip bool
	}{{"nochecks", true}, {"checks", false}} {
		b.Run(tc.name, func(b *testing.B) {
			var edges int64
			for range b.N {
				d, err := storage.Open(dir, &storage.OpenOptions{Advice: storage.AdviceRandom, SkipChecks: tc.skip})
				if err != nil {
					b.Fatal(err)
				}
				edges = d.NumEdges()
				d.Close()
			}
			b.ReportMetric(float64(edges)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}
