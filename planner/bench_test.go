package planner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var (
	benchNodes   = flag.Int64("planner.nodes", 200_000, "nodes of the benchmark graph")
	benchDir     = flag.String("planner.dir", "", "keep the benchmark graph under this directory (default: a temp dir)")
	benchFanouts = flag.String("planner.fanouts", "10,10,10", "fanouts of the benchmark")
	benchBatch   = flag.Int("planner.batch", 1000, "batch size of the benchmark")
)

func benchData(b *testing.B) (*storage.Dataset, *partition.Partitioning) {
	dir := *benchDir
	if dir == "" {
		dir = b.TempDir()
	}
	dir = filepath.Join(dir, fmt.Sprintf("synth-%d", *benchNodes))
	if _, err := os.Stat(filepath.Join(dir, storage.ManifestName)); err != nil {
		if _, err := synth.Generate(dir, synth.Config{Nodes: *benchNodes, FeatDim: 128, Seed: 1}, &synth.Options{Force: true}); err != nil {
			b.Fatal(err)
		}
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	pt, err := partition.Open(dir, "fennel")
	if err != nil {
		if _, err := partition.Run(d, &partition.Options{Parts: int(*benchNodes / 200), Seed: 1}); err != nil {
			b.Fatal(err)
		}
		if pt, err = partition.Open(dir, "fennel"); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { pt.Close() })
	return d, pt
}

// epochNodes returns every batch's input-layer node list of one epoch.
func epochNodes(b *testing.B, d *storage.Dataset, parts sample.Partitions, o *sample.Options, epoch int) [][]int64 {
	s, err := sample.New(d, parts, o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	it := s.Epoch(context.Background(), epoch)
	defer it.Close()
	var out [][]int64
	for {
		bt, err := it.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, bt.Nodes())
	}
}

// BenchmarkFeatureCachePolicies measures the feature cache's hit rate and
// storage bytes per epoch for the profiled (PreSC#1: counts of one
// profiling epoch with another seed), degree and dynamic (warmed by that
// epoch) policies at 5, 10 and 20 % of the feature bytes, on batches of
// the real sampler in random and partition mode. The table goes to
// docs/planner.md.
func BenchmarkFeatureCachePolicies(b *testing.B) {
	d, pt := benchData(b)
	var fanouts []int
	for _, f := range strings.Split(*benchFanouts, ",") {
		var x int
		fmt.Sscan(f, &x)
		fanouts = append(fanouts, x)
	}
	pf, err := sample.NewPartitionFiles(d, pt)
	if err != nil {
		b.Fatal(err)
	}
	defer pf.Close()
	featBytes := d.NumNodes() * d.FeatRowBytes()
	var table strings.Builder
	fmt.Fprintf(&table, "| selection | budget | profiled hit | degree hit | dynamic hit | storage MB/epoch (profiled / degree / dynamic) |\n|---|--:|--:|--:|--:|---|\n")
	for _, mode := range []sample.Mode{sample.ModeRandom, sample.ModePartition} {
		so := &sample.Options{Fanouts: fanouts, BatchSize: *benchBatch, Mode: mode, Seed: 2}
		prof, err := RunProfile(context.Background(), d, pf, &ProfileOptions{Fanouts: fanouts, BatchSize: *benchBatch, Mode: mode, Seed: 1, Part: pt.Part()})
		if err != nil {
			b.Fatal(err)
		}
		warm := epochNodes(b, d, pf, &sample.Options{Fanouts: fanouts, BatchSize: *benchBatch, Mode: mode, Seed: 1}, 0)
		batches := epochNodes(b, d, pf, so, 0)
		var rows int64
		for _, ids := range batches {
			rows += int64(len(ids))
		}
		b.Logf("%s: %d batches, %d rows (%.1f MB) per epoch, β %.3g", mode, len(batches), rows, float64(rows*d.FeatRowBytes())/1e6, prof.Meta.Beta)
		buf := make([]byte, 0)
		for _, frac := range []float64{0.05, 0.10, 0.20} {
			budget := int64(frac * float64(featBytes))
			var hit [3]float64
			var mb [3]float64
			for i, pol := range []featurecache.Policy{featurecache.PolicyProfiled, featurecache.PolicyDegree, featurecache.PolicyDynamic} {
				fc, err := featurecache.New(context.Background(), d, budget, &featurecache.Options{Policy: pol, Counts: prof.Feat})
				if err != nil {
					b.Fatal(err)
				}
				gather := func(epoch [][]int64) {
					for _, ids := range epoch {
						need := len(ids) * int(d.FeatRowBytes())
						if cap(buf) < need {
							buf = make([]byte, need)
						}
						if err := fc.Gather(ids, buf[:need]); err != nil {
							b.Fatal(err)
						}
					}
				}
				var before featurecache.Stats
				if pol == featurecache.PolicyDynamic {
					gather(warm)
					fc.Wait()
					before = fc.Stats()
				}
				gather(batches)
				st := fc.Stats()
				req, hits, missed := st.Requests-before.Requests, st.Hits-before.Hits, st.BytesMissed-before.BytesMissed
				hit[i], mb[i] = float64(hits)/float64(req), float64(missed)/1e6
				fc.Close()
				b.ReportMetric(float64(missed), fmt.Sprintf("bytes/epoch-%s-%s-%.0f%%", mode, pol, 100*frac))
			}
			fmt.Fprintf(&table, "| %s | %.0f %% | %.1f %% | %.1f %% | %.1f %% | %.1f / %.1f / %.1f |\n", mode, 100*frac,
				100*hit[0], 100*hit[1], 100*hit[2], mb[0], mb[1], mb[2])
		}
	}
	b.Logf("\n%s", table.String())
	for range b.N {
	}
}
