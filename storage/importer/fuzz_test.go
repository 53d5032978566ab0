package importer

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/storage"
)

// FuzzEdgeList imports arbitrary bytes as an edge list. Every input either
// fails with an error (leaving no dataset) or yields a dataset whose CSR
// is sorted, in range and, being symmetrised, symmetric.
func FuzzEdgeList(f *testing.F) {
	for _, s := range []string{handEdges, "", "0 1\n", "0 1 2\n", "1\t2\r\n#x\n3 0", "-1 2\n", "0 64\n", "a b\n", "0 1\n\xff\n",
		"9223372036854775807 1\n", "1 1\n1 1\n", "src dst\n0 1\n", "0 1\nx y\n", "0 1 0.5\n", "0,1\n", "0;1\r\n"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, directed bool) {
		dir := t.TempDir()
		edges := filepath.Join(dir, "e.txt")
		if err := os.WriteFile(edges, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		const n = 64
		rep, err := ImportEdgeList(edges, out, &Options{NumNodes: n, Directed: directed})
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not match ErrFormat", err)
			}
			if _, err := storage.Open(out, nil); !errors.Is(err, storage.ErrNotDataset) {
				t.Fatalf("Open after failure: %v", err)
			}
			return
		}
		l := load(t, out)
		if int64(len(l.indices)) != rep.EdgesStored || len(l.indptr) != n+1 {
			t.Fatalf("CSR sizes %d/%d, report %+v", len(l.indptr), len(l.indices), rep)
		}
		for v := int64(0); v < n; v++ {
			nb := l.indices[l.indptr[v]:l.indptr[v+1]]
			for i, u := range nb {
				if u < 0 || u >= n || u == v || (i > 0 && nb[i-1] >= u) {
					t.Fatalf("node %d: bad neighbour list %v", v, nb)
				}
				if !directed {
					if _, ok := slices.BinarySearch(l.indices[l.indptr[u]:l.indptr[u+1]], v); !ok {
						t.Fatalf("edge (%d,%d) has no reverse", v, u)
					}
				}
			}
		}
	})
}

// peakRSSMiB reads VmHWM (peak resident set) from /proc/self/status; 0
// where unavailable.
func peakRSSMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// BenchmarkImportEdgeList imports a 4-million-edge random text edge list
// (about 60 MB of text, 64 MB of symmetrised edges to sort) with an 8 MiB
// sort budget (MemBytes is the whole import's: ReserveBytes beside it),
// so the sorter spills and merges many runs. It reports input MB/s, input
// edges/s, and the process's peak RSS.
func BenchmarkImportEdgeList(b *testing.B) {
	const n, e = 1 << 20, 4 << 20
	dir := b.TempDir()
	path := filepath.Join(dir, "edges.txt")
	fw, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(fw, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for range e {
		fmt.Fprintf(w, "%d %d\n", rng.IntN(n), rng.IntN(n))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fw.Close()
	st, _ := os.Stat(path)
	var rep Report
	var total time.Duration
	for b.Loop() {
		out := filepath.Join(dir, "out")
		start := time.Now()
		rep, err = ImportEdgeList(path, out, &Options{NumNodes: n, MemBytes: ReserveBytes + 8<<20, Force: true})
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	secs := total.Seconds() / float64(b.N)
	b.ReportMetric(float64(st.Size())/1e6/secs, "MB/s")
	b.ReportMetric(float64(e)/secs, "edges/s")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
	b.ReportMetric(float64(rep.SortRuns), "runs")
}
