package histcache_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/histcache"
)

// BenchmarkIteration runs Lookup, Pull, Push and EndBatch for one batch of
// 8192 second-layer nodes over 1M nodes with 100k candidates of width 128,
// and reports rows/s (rows looked up per second) and the hit rate.
func BenchmarkIteration(b *testing.B) {
	const n, cand, h, batch = 1 << 20, 100_000, 128, 8192
	rng := rand.New(rand.NewPCG(1, 1))
	scores := make([]float32, n)
	for i := range cand {
		scores[rng.IntN(n)] = float32(1 + i%7)
	}
	c, err := histcache.New(histcache.Config{Scores: scores, Hidden: h, BudgetBytes: histcache.BytesFor(n, cand, h)}, &histcache.Options{Staleness: 20})
	if err != nil {
		b.Fatal(err)
	}
	cands := c.Candidates()
	nodes := make([]int64, batch)
	hits := make([]bool, batch)
	emb := make([]float32, batch*h)
	dst := make([]float32, batch*h)
	var lookups, hitsN int64
	b.ResetTimer()
	for i := range int64(b.N) {
		for j := range nodes {
			nodes[j] = cands[rng.IntN(len(cands))]
		}
		k, err := c.Lookup(i, nodes, hits)
		if err != nil {
			b.Fatal(err)
		}
		lookups += batch
		hitsN += int64(k)
		var pull, push []int64
		for j, ok := range hits {
			if ok {
				pull = append(pull, nodes[j])
			} else {
				push = append(push, nodes[j])
			}
		}
		if err := c.Pull(i, pull, dst); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Push(i, push, emb[:len(push)*h], nil); err != nil {
			b.Fatal(err)
		}
		c.EndBatch()
	}
	b.ReportMetric(float64(lookups)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(100*float64(hitsN)/float64(lookups), "hit%")
}
