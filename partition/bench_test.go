package partition

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
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

// BenchmarkLookupByFilterSize measures level 1's filter lookup alone
// (countBatched, the done-bit test included) against the size of the
// filters, sized as a 100-part first level of a graph of the given node
// count at the default false-positive rate, with the previous pass's
// filters beside them as in restreaming. Filter words are random with
// half their bits set, the fill of a Bloom filter at its optimal h. The
// neighbours are 2^21 random ids, 19 per node (the generated graphs'
// average degree), their hash locations computed before the timer starts
// (117 MiB of them, read in order, so that the rows they hit cover even
// the largest filters rather than a cached subset). One iteration looks
// up 2^20 neighbours. Metrics: ns/neighbour and
// filter-MiB (both passes' matrices). What it shows is the machine: the
// work per lookup is the same at every size, so any growth of
// ns/neighbour is the cost of random loads into a larger array.
func BenchmarkLookupByFilterSize(b *testing.B) {
	const k1, deg, pool = 100, 19, 1 << 21 / 19
	for _, nodes := range []int64{2_684_354, 5_368_709, 10_737_418, 20_000_000, 40_000_000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			r := rand.New(rand.NewPCG(uint64(nodes), 1))
			capN := int64(math.Ceil(1.1 * float64(nodes) / k1))
			cur, prev := newSliced(k1, capN, DefaultFalsePositive), newSliced(k1, capN, DefaultFalsePositive)
			for _, f := range []*sliced{cur, prev} {
				for i := range f.bits {
					f.bits[i] = r.Uint64()
					if i%f.words == f.words-1 {
						f.bits[i] &= 1<<(k1%64) - 1
					}
				}
			}
			s := &streamer{filters: cur, prev: prev, counts: make([]int32, k1), mark: make([]bool, k1)}
			s.spec.done = make([]uint64, (nodes+63)/64)
			for i := range s.spec.done {
				s.spec.done[i] = r.Uint64()
			}
			hs := newHasher(cur.h)
			nbrs := make([]int64, pool*deg)
			locs := make([]uint64, 0, pool*deg*int(cur.h))
			for i := range nbrs {
				nbrs[i] = r.Int64N(nodes)
				locs = append(locs, hs.locations(nbrs[i])...)
			}
			h := int(cur.h)
			const per = 1 << 20
			b.ResetTimer()
			for range b.N {
				for i := 0; i < per/deg; i++ {
					j := i % pool
					s.nbrs = nbrs[j*deg : (j+1)*deg]
					s.locs = locs[j*deg*h : (j+1)*deg*h]
					s.countBatched()
					for _, q := range s.touched {
						s.counts[q], s.mark[q] = 0, false
					}
					s.touched = s.touched[:0]
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(per/deg*deg)), "ns/neighbour")
			b.ReportMetric(float64(cur.bytes()+prev.bytes())/(1<<20), "filter-MiB")
		})
	}
}
