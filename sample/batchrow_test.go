package sample_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/ssdgnn/ssdgnn/sample"
)

// TestBatchBytesBound: sampled batches take at most BatchBytesBound
// (Batch.MemBytes), whatever the fanouts.
func TestBatchBytesBound(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 21))
	adj, _, train := communityGraph(r, 8, 200, 12, 3, 3)
	d := writeDataset(t, adj, train, 0)
	for _, fanouts := range [][]int{{10, 10, 10}, {1, 1}, {25, 10}, {-1, -1}, {-1, 3}} {
		s, err := sample.New(d, nil, &sample.Options{Fanouts: fanouts, BatchSize: 64, Seed: seed, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		it := s.Epoch(context.Background(), 0)
		for {
			b, err := it.Next()
			if err != nil {
				break
			}
			bound := sample.BatchBytesBound(int64(len(b.Targets())), fanouts, d.NumNodes(), d.NumEdges())
			if b.MemBytes() > bound {
				t.Errorf("fanouts %v: batch %d: %d bytes, bound %d", fanouts, b.Index, b.MemBytes(), bound)
			}
			b.Release()
		}
		it.Close()
		s.Close()
	}
}
