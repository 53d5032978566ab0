package sample_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// TestEpochMappedFileTruncated: a CSR file that another program truncates
// while the sampler reads it through its mapping fails the batch with a
// *storage.ChangedError naming the file. Before, the worker's read raised
// SIGBUS and the process died with "unexpected fault address" and a trace
// of every goroutine (this test binary with it).
func TestEpochMappedFileTruncated(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 23))
	adj, _, train := communityGraph(r, 8, 50, 10, 2, 2)
	d := writeDataset(t, adj, train, 0)
	path := filepath.Join(d.Dir(), storage.FileIndices)
	if st, err := os.Stat(path); err != nil || st.Size() < 3*4096 {
		t.Fatalf("%s: %v, %v: want at least three pages", path, st, err)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	s, err := sample.New(d, nil, &sample.Options{Fanouts: []int{-1, -1}, BatchSize: 50, Mode: sample.ModeRandom, Seed: seed, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	it := s.Epoch(context.Background(), 0)
	defer it.Close()
	for {
		b, err := it.Next()
		if err == nil {
			b.Release()
			continue
		}
		var ce *storage.ChangedError
		if !errors.As(err, &ce) || ce.Path != path {
			t.Fatalf("truncated %s: %v, want a *storage.ChangedError naming it", path, err)
		}
		return
	}
}
