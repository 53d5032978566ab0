package storage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/storage"
)

// csrAdj is a deterministic graph with empty nodes (leading, inner and
// trailing) and enough nodes and edges to cross the CSRWriter buffers.
func csrAdj(n int64) [][]int64 {
	adj := make([][]int64, n)
	x := uint64(12345)
	for v := int64(3); v < n-5; v++ {
		if v%7 == 0 {
			continue
		}
		for range v % 9 {
			x = x*6364136223846793005 + 1442695040888963407
			adj[v] = append(adj[v], int64((x>>33)%uint64(n)))
		}
	}
	return adj
}

// writeCSR writes adj with one of the CSRWriter feeding modes and returns
// the bytes of indptr.npy and indices.npy.
func writeCSR(t *testing.T, adj [][]int64, mode string) (indptr, indices []byte) {
	t.Helper()
	dir := t.TempDir()
	b, err := storage.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := b.CreateCSR(int64(len(adj)))
	if err != nil {
		t.Fatal(err)
	}
	defer csr.Abort()
	for v, nb := range adj {
		v := int64(v)
		switch {
		case mode == "append" || (mode == "mixed" && v%2 == 0):
			if len(nb) > 0 || v%3 == 0 {
				err = csr.Append(v, nb)
			}
		case mode == "mixed" && v%5 == 1 && len(nb) > 0:
			// Edges of an open node, then the rest of its list.
			if err = csr.AppendEdge(v, nb[0]); err == nil {
				err = csr.Append(v, nb[1:])
			}
		default:
			for _, u := range nb {
				if err = csr.AppendEdge(v, u); err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatalf("%s: node %d: %v", mode, v, err)
		}
	}
	if err := csr.Commit(); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, nb := range adj {
		want += int64(len(nb))
	}
	if csr.Edges() != want {
		t.Fatalf("%s: Edges() = %d, want %d", mode, csr.Edges(), want)
	}
	read := func(name string) []byte {
		p, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return read(storage.FileIndptr), read(storage.FileIndices)
}

func TestCSRWriterModesAgree(t *testing.T) {
	adj := csrAdj(20000)
	ip0, ix0 := writeCSR(t, adj, "append")
	for _, mode := range []string{"edges", "mixed"} {
		t.Run(mode, func(t *testing.T) {
			ip, ix := writeCSR(t, adj, mode)
			if !bytes.Equal(ip, ip0) || !bytes.Equal(ix, ix0) {
				t.Fatalf("%s: CSR differs from Append's", mode)
			}
		})
	}
}

func TestCSRWriterRejectsAndCleansUp(t *testing.T) {
	cases := []struct {
		name string
		feed func(c *storage.CSRWriter) error
	}{
		{"append after edge of later node", func(c *storage.CSRWriter) error {
			if err := c.AppendEdge(2, 0); err != nil {
				return err
			}
			return c.Append(1, nil)
		}},
		{"edge after append of same node", func(c *storage.CSRWriter) error {
			if err := c.Append(1, []int64{0}); err != nil {
				return err
			}
			return c.AppendEdge(1, 2)
		}},
		{"source out of range", func(c *storage.CSRWriter) error { return c.AppendEdge(4, 0) }},
		{"negative destination", func(c *storage.CSRWriter) error { return c.AppendEdge(0, -1) }},
		{"destination out of range", func(c *storage.CSRWriter) error { return c.AppendEdge(0, 4) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := storage.Create(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := b.CreateCSR(4)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.feed(c); err == nil {
				t.Fatal("no error")
			}
			c.Abort()
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if atomicfile.IsTemp(e.Name()) || e.Name() == storage.FileIndptr || e.Name() == storage.FileIndices {
					t.Errorf("left behind %s", e.Name())
				}
			}
		})
	}
}
