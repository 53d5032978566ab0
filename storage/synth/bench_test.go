package synth

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

var benchNodes = flag.Int64("synth.nodes", 1_000_000, "nodes for BenchmarkGenerate")

// resetPeakRSS returns freed memory to the OS and resets the process's
// VmHWM (Linux: writing 5 to /proc/self/clear_refs), so that the next
// PeakRSS measures one generation only. It reports whether the reset
// worked.
func resetPeakRSS() bool {
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func benchGenerate(b *testing.B, cfg Config, opts *Options) {
	var edges, bytes, rss int64
	var rep Report
	for b.Loop() {
		dir := filepath.Join(b.TempDir(), "d")
		if !resetPeakRSS() {
			b.Log("cannot reset VmHWM: peakRSS covers the whole process")
		}
		var err error
		rep, err = Generate(dir, cfg, opts)
		if err != nil {
			b.Fatal(err)
		}
		edges += rep.Edges
		bytes += rep.BytesWritten
		rss = max(rss, rep.PeakRSS)
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("nodes %d edges %d (dups %d, self loops %d) bytes %d sort runs %d spilled %d; wall %v (edges %v, features %v); peak RSS %d MiB",
		rep.Nodes, rep.Edges, rep.DuplicatesDropped, rep.SelfLoopsDropped, rep.BytesWritten, rep.SortRuns, rep.SpilledBytes,
		rep.Wall, rep.EdgesWall, rep.FeaturesWall, rep.PeakRSS>>20)
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(edges)/s, "edges/s")
	b.ReportMetric(float64(bytes)/s/1e6, "MB/s")
	b.ReportMetric(float64(rss)/(1<<20), "peakRSS-MiB")
}

// BenchmarkGenerate generates -synth.nodes nodes (default 1M) with the
// default config (average degree 20, 128 float32 features) and options,
// reporting edges/s, MB/s written and the peak RSS of one generation.
func BenchmarkGenerate(b *testing.B) {
	benchGenerate(b, Config{Nodes: *benchNodes, Seed: 1}, nil)
}

// BenchmarkGenerateRSS shows that peak RSS does not grow with N: two sizes
// 10× apart under the least budget (MinMemBytes: one worker, a 64 KiB sort
// buffer), which both saturate.
func BenchmarkGenerateRSS(b *testing.B) {
	for _, n := range []int64{200_000, 2_000_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			benchGenerate(b, Config{Nodes: n, Seed: 1}, &Options{MemBytes: MinMemBytes})
		})
	}
}
