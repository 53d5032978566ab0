package storage_test

import (
	"errors"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestReadNeighborsAccounting: ReadNeighbors counts one request per
// neighbour list (an empty one too), of the list's bytes, and one read
// call per list it reads, in every read mode: the units the mapping and
// batch sources count in. It counted the list's ids as rows: on a
// 50k-node graph the sample stage requested 693,405 "rows" an epoch with
// --source pread or direct, 35,322 (the lists) with mmap, for the same
// batches.
func TestReadNeighborsAccounting(t *testing.T) {
	adj := [][]int64{{1, 2, 3}, {0}, {0}, {0, 4}, {3}, {}}
	d := storagetest.Write(t, t.TempDir(), storagetest.Graph{Adj: adj})
	for _, mode := range []storage.ReadMode{storage.ReadBuffered, storage.ReadDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			acct := storage.NewAccounting()
			r, err := d.OpenRowReader(storage.FileIndices, mode, acct.Stage(storage.StageSample))
			if errors.Is(err, storage.ErrDirectUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			open := acct.Snapshot()[0] // O_DIRECT's probe read at open
			var lists, bytes, nonEmpty int64
			for v := range int64(len(adj)) {
				l, _, err := d.ReadNeighbors(r, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				if l.Len() != len(adj[v]) {
					t.Fatalf("node %d: %d neighbours, want %d", v, l.Len(), len(adj[v]))
				}
				lists++
				bytes += l.Bytes()
				if l.Len() > 0 {
					nonEmpty++
				}
			}
			s := acct.Snapshot()[0]
			s.Rows, s.BytesRequested, s.ReadCalls = s.Rows-open.Rows, s.BytesRequested-open.BytesRequested, s.ReadCalls-open.ReadCalls
			if s.Rows != lists || s.BytesRequested != bytes || s.ReadCalls != nonEmpty {
				t.Fatalf("accounting %+v, want %d requests of %d bytes in %d read calls", s, lists, bytes, nonEmpty)
			}
		})
	}
}
