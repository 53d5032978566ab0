package sample_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/testseed"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

func testSeed(t testing.TB) uint64 { return testseed.Seed(t) }

// writeDataset writes a dataset with adjacency adj (lists are sorted
// here), training ids train and featDim float32 features.
func writeDataset(t testing.TB, adj [][]int64, train []int64, featDim int) *storage.Dataset {
	t.Helper()
	if train == nil {
		train = []int64{}
	}
	return storagetest.Write(t, t.TempDir(), storagetest.Graph{
		Adj: adj, Train: train, FeatDim: featDim,
		Feature: func(v int64, row []float32) { row[0] = float32(v) },
	})
}

// communityGraph returns a graph of c communities of size m with intra
// probability pin and inter-community edges, symmetric, plus its planted
// partition and a training set of every trainEvery-th node.
func communityGraph(r *rand.Rand, c, m int, intraDeg, interDeg int, trainEvery int) (adj [][]int64, part []int32, train []int64) {
	n := c * m
	sets := make([]map[int64]bool, n)
	for v := range sets {
		sets[v] = map[int64]bool{}
	}
	add := func(u, v int64) {
		if u != v {
			sets[u][v] = true
			sets[v][u] = true
		}
	}
	for v := 0; v < n; v++ {
		com := v / m
		for range intraDeg / 2 {
			add(int64(v), int64(com*m+r.IntN(m)))
		}
		for range interDeg / 2 {
			add(int64(v), int64(r.IntN(n)))
		}
	}
	adj = make([][]int64, n)
	part = make([]int32, n)
	for v := range adj {
		for u := range sets[v] {
			adj[v] = append(adj[v], u)
		}
		slices.Sort(adj[v])
		part[v] = int32(v / m)
		if v%trainEvery == 0 {
			train = append(train, int64(v))
		}
	}
	return adj, part, train
}
