package sample_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var (
	benchNodes = flag.Int64("sample.nodes", 100_000, "benchmark graph size (synth community graph, avg degree 20)")
	benchDir   = flag.String("sample.dir", "", "directory to keep the generated benchmark dataset in (default: a temp dir)")
	benchParts = flag.Int("sample.parts", 0, "partitions for the RR benchmark (default nodes/1000)")
)

func benchConfig() synth.Config {
	return synth.Config{Nodes: *benchNodes, AvgDegree: 20, FeatDim: 16, Classes: 16, TrainFrac: 0.1, ValidFrac: 0.05, TestFrac: 0.05, Seed: 1}
}

// benchDataset generates (or reuses) the benchmark graph.
func benchDataset(b *testing.B) *storage.Dataset {
	b.Helper()
	dir := *benchDir
	if dir == "" {
		dir = b.TempDir()
	} else {
		dir = filepath.Join(dir, fmt.Sprintf("synth-%d", *benchNodes))
	}
	if _, err := os.Stat(filepath.Join(dir, storage.ManifestName)); err != nil {
		if _, err := synth.Generate(dir, benchConfig(), &synth.Options{Force: true}); err != nil {
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

// BenchmarkSampleEdges measures sampled edges per second on one core
// (Workers 1), fanouts 10,10,10, batch 1000, for each source: the mapped
// graph, a pread per list, and a hop's lists read together (batch,
// O_DIRECT where supported: every batch reads from the device, where the
// others find the graph in the page cache after the first epoch).
func BenchmarkSampleEdges(b *testing.B) {
	d := benchDataset(b)
	for _, src := range []sample.Source{sample.SourceMmap, sample.SourcePread, sample.SourceBatch} {
		b.Run(src.String(), func(b *testing.B) {
			s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{10, 10, 10}, BatchSize: 1000, Workers: 1, Seed: 1, Source: src})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var edges, nodes int64
			b.ResetTimer()
			done := 0
			for epoch := 0; done < b.N; epoch++ {
				it := s.Epoch(context.Background(), epoch)
				for done < b.N {
					bt, err := it.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					for i := range bt.Blocks {
						edges += int64(bt.Blocks[i].NumEdges())
					}
					nodes += int64(len(bt.Nodes()))
					done++
				}
				it.Close()
			}
			b.ReportMetric(float64(edges)/b.Elapsed().Seconds(), "edges/s")
			b.ReportMetric(float64(nodes)/float64(b.N), "nodes/batch")
		})
	}
}

// BenchmarkRR runs the RR report with partitions from the planted
// communities and from FENNEL, under a neighbour-cache budget of 10 % of
// the indices, and reports RR and neighbour bytes read from storage.
func BenchmarkRR(b *testing.B) {
	d := benchDataset(b)
	k := *benchParts
	if k == 0 {
		k = int(max(1, *benchNodes/1000))
	}
	indicesBytes := d.NumEdges() * 4
	planted := func(b *testing.B) sample.Partitions {
		pl, err := synth.NewPlanted(benchConfig())
		if err != nil {
			b.Fatal(err)
		}
		comm := benchConfig().WithDefaults().Communities
		part := make([]int32, d.NumNodes())
		// Spread the planted communities over k parts, ~N/k nodes each.
		for v := range part {
			c, rank := pl.Community(int64(v))
			size := max(1, int64(len(part))/int64(comm))
			per := max(1, int64(k)/int64(comm))
			part[v] = int32((int64(c)*per + min(rank*per/size, per-1)) % int64(k))
		}
		mp, err := sample.NewMemPartitions(d, k, part)
		if err != nil {
			b.Fatal(err)
		}
		return mp
	}
	fennel := func(b *testing.B) sample.Partitions {
		name := fmt.Sprintf("fennel-%d", k)
		p, err := partition.Open(d.Dir(), name)
		if err != nil {
			if _, err := partition.Run(d, &partition.Options{Parts: k, Name: name, Seed: 1, Force: true, Logger: slog.New(slog.DiscardHandler)}); err != nil {
				b.Fatal(err)
			}
			if p, err = partition.Open(d.Dir(), name); err != nil {
				b.Fatal(err)
			}
		}
		b.Cleanup(func() { p.Close() })
		pf, err := sample.NewPartitionFiles(d, p)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pf.Close() })
		return pf
	}
	for _, tc := range []struct {
		name  string
		parts func(*testing.B) sample.Partitions
	}{{"planted", planted}, {"fennel", fennel}} {
		b.Run(tc.name, func(b *testing.B) {
			p := tc.parts(b)
			b.ResetTimer()
			var res *sample.RRResult
			for i := 0; i < b.N; i++ {
				var err error
				res, err = sample.RRReport(context.Background(), d, p, &sample.RROptions{Fanouts: []int{10, 10, 10}, BatchSize: 1000, Seed: 1, NeighborCacheBytes: indicesBytes / 10})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.RRRandom, "rr_random")
			b.ReportMetric(res.RRPartition, "rr_partition")
			b.ReportMetric(res.RRPartitionHist, "rr_partition_hist")
			b.ReportMetric(100*(1-res.RRPartition/res.RRRandom), "%rr_cut")
			b.ReportMetric(res.Rows[0].StorageNeighborBytes, "storage_nbr_bytes/epoch_random")
			b.ReportMetric(res.Rows[1].StorageNeighborBytes, "storage_nbr_bytes/epoch_partition")
			var buf bytes.Buffer
			sample.WriteRRTable(&buf, res)
			b.Logf("\n%s", buf.String())
		})
	}
}
