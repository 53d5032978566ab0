package csrstream

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

var adj = [][]int64{{1, 2}, {}, {0, 1, 3}, {2}, {}}

// readAll streams the CSR with a chunk of k edges.
func readAll(dir string, k int) (rows, nbrs []int64, err error) {
	m, err := storage.LoadManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	r, err := Open(dir, m)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	dst, nb := make([]int64, k), make([]int64, k)
	for {
		n, err := r.Next(dst, nb)
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			return rows, nbrs, nil
		}
		rows, nbrs = append(rows, dst[:n]...), append(nbrs, nb[:n]...)
	}
}

func TestStream(t *testing.T) {
	dir := t.TempDir()
	storagetest.Write(t, dir, storagetest.Graph{Adj: adj})
	for k := 1; k <= 7; k++ {
		rows, nbrs, err := readAll(dir, k)
		if err != nil {
			t.Fatal(err)
		}
		var wr, wn []int64
		for v, l := range adj {
			for _, u := range l {
				wr, wn = append(wr, int64(v)), append(wn, u)
			}
		}
		if len(rows) != len(wr) {
			t.Fatalf("chunk %d: %d edges, want %d", k, len(rows), len(wr))
		}
		for i := range wr {
			if rows[i] != wr[i] || nbrs[i] != wn[i] {
				t.Fatalf("chunk %d: edge %d = (%d, %d), want (%d, %d)", k, i, rows[i], nbrs[i], wr[i], wn[i])
			}
		}
	}
}

func TestCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		off        int64
		val        []byte
		want       string
	}{
		{"neighbour out of range", storage.FileIndices, 128 + 4*2, []byte{9, 0, 0, 0}, "indices[2]: node id 9 out of range [0,5)"},
		{"indptr decreases", storage.FileIndptr, 128 + 8*2, []byte{1, 0, 0, 0, 0, 0, 0, 0}, "indptr[2]: 1 decreases"},
		{"indptr[0]", storage.FileIndptr, 128, []byte{1, 0, 0, 0, 0, 0, 0, 0}, "indptr[0]: is 1, want 0"},
		{"indptr past E", storage.FileIndptr, 128 + 8*3, []byte{99, 0, 0, 0, 0, 0, 0, 0}, "indptr[3]: 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			storagetest.Write(t, dir, storagetest.Graph{Adj: adj})
			f, err := os.OpenFile(filepath.Join(dir, tc.file), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt(tc.val, tc.off)
			f.Close()
			_, _, err = readAll(dir, 3)
			var ce *storage.CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %v, want a *storage.CorruptError naming %s and %q", err, tc.file, tc.want)
			}
		})
	}
}
