package extsort

import (
	"math"
	"math/rand/v2"
	"testing"
)

const benchEdges = 4 << 20

func benchInput(n int, idMax int64) []Edge {
	r := rand.New(rand.NewPCG(1, 2))
	es := make([]Edge, n)
	for i := range es {
		es[i] = Edge{r.Int64N(idMax), r.Int64N(idMax)}
	}
	return es
}

// BenchmarkSort sorts 4Mi random edges end to end (Add, Sort, iterate).
// MB/s counts 16 bytes per input edge.
func BenchmarkSort(b *testing.B) {
	cases := []struct {
		name     string
		idMax    int64
		memBytes int64
		dedup    bool
	}{
		// 4 MiB buffer: 8 packed runs / 16 wide runs, merged in one pass.
		{"packed/spill", 1 << 24, 4 << 20, false},
		{"packed/spill/dedup", 1 << 24, 4 << 20, true},
		{"wide/spill", math.MaxInt64, 4 << 20, false},
		{"packed/inmem", 1 << 24, 64 << 20, false},
		{"wide/inmem", math.MaxInt64, 128 << 20, false},
	}
	for _, c := range cases {
		in := benchInput(benchEdges, c.idMax)
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(int64(len(in)) * 16)
			var st Stats
			for b.Loop() {
				s, err := New(&Options{TempDir: dir, MemBytes: c.memBytes, Dedup: c.dedup})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.AddBatch(in); err != nil {
					b.Fatal(err)
				}
				it, err := s.Sort()
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, ok := it.Next(); ok; _, ok = it.Next() {
					n++
				}
				if err := it.Err(); err != nil {
					b.Fatal(err)
				}
				st = s.Stats()
				if int64(n)+st.Duplicates != int64(len(in)) {
					b.Fatalf("got %d edges", n)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(in))*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
			b.ReportMetric(float64(st.Runs), "runs")
			b.ReportMetric(float64(st.SpilledBytes)/float64(len(in)), "spilled-B/edge")
		})
	}
}
