package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// tinyGraph is a 4-node path 0-1-2-3, symmetric, with 3-dim features.
type tinyGraph struct {
	adj    [][]int64
	feats  [][]float32
	labels []int32
	splits [3][]int64
}

func newTiny() tinyGraph {
	return tinyGraph{
		adj:    [][]int64{{1}, {0, 2}, {1, 3}, {2}},
		feats:  [][]float32{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}},
		labels: []int32{0, 1, 1, -1},
		splits: [3][]int64{{0, 1}, {2}, {}},
	}
}

// writeTiny builds g in dir with the given feature dtype.
func writeTiny(t *testing.T, dir string, g tinyGraph, featDType string) {
	t.Helper()
	b, err := storage.Create(dir, &storage.CreateOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(g.adj))
	csr, err := b.CreateCSR(n)
	if err != nil {
		t.Fatal(err)
	}
	var edges int64
	for v, nb := range g.adj {
		if err := csr.Append(int64(v), nb); err != nil {
			t.Fatal(err)
		}
		edges += int64(len(nb))
	}
	if err := csr.Commit(); err != nil {
		t.Fatal(err)
	}
	fd := npy.Float32
	if featDType == "float16" {
		fd = npy.Float16
	}
	fw, err := b.CreateArray(storage.FileFeatures, fd, []int64{3})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range g.feats {
		if fd == npy.Float16 {
			err = fw.WriteFloat32sAsFloat16(row)
		} else {
			err = fw.WriteFloat32s(row)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Commit(); err != nil {
		t.Fatal(err)
	}
	lw, _ := b.CreateArray(storage.FileLabels, npy.Int32, nil)
	lw.WriteInt32s(g.labels)
	if err := lw.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{storage.FileTrain, storage.FileValid, storage.FileTest} {
		w, _ := b.CreateArray(name, npy.Int64, nil)
		w.WriteInt64s(g.splits[i])
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	err = b.Finish(storage.Manifest{Name: "tiny", NumNodes: n, NumEdges: edges, FeatDim: 3, FeatDType: featDType, NumClasses: 2, Symmetrized: true})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, fdt := range []string{"float32", "float16"} {
		t.Run(fdt, func(t *testing.T) {
			dir := t.TempDir()
			g := newTiny()
			writeTiny(t, dir, g, fdt)
			d, err := storage.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.NumNodes() != 4 || d.NumEdges() != 6 {
				t.Fatalf("got %d nodes %d edges", d.NumNodes(), d.NumEdges())
			}
			for v, want := range g.adj {
				got := d.Neighbors(int64(v)).AppendTo(nil)
				if len(got) != len(want) {
					t.Fatalf("node %d: got %v want %v", v, got, want)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("node %d: got %v want %v", v, got, want)
					}
				}
				row := d.FeatureRow(int64(v), nil)
				for i := range row {
					if row[i] != g.feats[v][i] {
						t.Fatalf("feature %d: got %v want %v", v, row, g.feats[v])
					}
				}
			}
			if got := d.TrainIdx(); len(got) != 2 || got[1] != 1 {
				t.Fatalf("train %v", got)
			}
			if len(d.TestIdx()) != 0 {
				t.Fatalf("test %v", d.TestIdx())
			}
			if d.Labels()[3] != -1 {
				t.Fatalf("labels %v", d.Labels())
			}
			// Feature rows start on a 4096-byte boundary (O_DIRECT reads
			// take only a row's own blocks); the other arrays keep the
			// default 128-byte header.
			for _, f := range d.Manifest().Files {
				want := int64(npy.HeaderSize)
				if f.Name == storage.FileFeatures {
					want = npy.AlignedHeaderSize
				}
				if f.DataOffset != want {
					t.Errorf("%s: data offset %d, want %d", f.Name, f.DataOffset, want)
				}
			}
		})
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	writeTiny(t, dir, newTiny(), "float32")
	if _, err := storage.Create(dir, nil); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
}

func TestUnfinishedIsNotADataset(t *testing.T) {
	dir := t.TempDir()
	b, err := storage.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := b.CreateCSR(2)
	csr.Append(0, []int64{1})
	csr.Commit()
	// No Finish: simulates a crash before the manifest.
	if _, err := storage.Open(dir, nil); !errors.Is(err, storage.ErrNotDataset) {
		t.Fatalf("got %v, want ErrNotDataset", err)
	}
}

func TestOpenDetectsMismatch(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(dir string) error
	}{
		{"missing file", func(dir string) error { return os.Remove(filepath.Join(dir, storage.FileLabels)) }},
		{"truncated file", func(dir string) error { return os.Truncate(filepath.Join(dir, storage.FileIndices), 130) }},
		{"bad header", func(dir string) error {
			f, err := os.OpenFile(filepath.Join(dir, storage.FileIndptr), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte("XX"), 0)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTiny(t, dir, newTiny(), "float32")
			if err := c.mutate(dir); err != nil {
				t.Fatal(err)
			}
			_, err := storage.Open(dir, nil)
			if !errors.Is(err, storage.ErrMismatch) {
				t.Fatalf("got %v, want ErrMismatch", err)
			}
		})
	}
}
