// Package storagetest writes small datasets for the tests of the packages
// built on storage, so each of them does not carry its own copy of the
// Builder calls. It is test support, not part of the engine.
package storagetest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// Generate generates c (synth.Generate with opts) into a directory of the
// test's own and returns the dataset opened; it is closed when the test
// ends.
func Generate(t testing.TB, c synth.Config, opts *synth.Options) *storage.Dataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "g")
	if _, err := synth.Generate(dir, c, opts); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Graph describes a dataset to write. Only Adj is required.
type Graph struct {
	Name string
	// Adj is the neighbour list of every node; each list is sorted when
	// written.
	Adj         [][]int64
	Symmetrized bool
	// FeatDim > 0 writes features of that width; Feature fills node v's row
	// (nil: zeros). FeatDType is "float32" (default) or "float16".
	FeatDim   int
	FeatDType string
	Feature   func(v int64, row []float32)
	// Labels, when non-nil, has one class per node; NumClasses goes to the
	// manifest.
	Labels     []int32
	NumClasses int64
	// Train, Valid and Test are written (sorted) when non-nil.
	Train, Valid, Test []int64
}

// Write builds g in dir, overwriting any dataset there, and returns it
// opened; it is closed when the test ends.
func Write(t testing.TB, dir string, g Graph) *storage.Dataset {
	t.Helper()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := storage.Create(dir, &storage.CreateOptions{Force: true})
	check(err)
	n := int64(len(g.Adj))
	csr, err := b.CreateCSR(n)
	check(err)
	for v, nb := range g.Adj {
		nb = slices.Clone(nb)
		slices.Sort(nb)
		check(csr.Append(int64(v), nb))
	}
	edges := csr.Edges()
	check(csr.Commit())
	m := storage.Manifest{Name: g.Name, NumNodes: n, NumEdges: edges, Symmetrized: g.Symmetrized, NumClasses: g.NumClasses}
	if m.Name == "" {
		m.Name = "test"
	}
	if g.FeatDim > 0 {
		m.FeatDim, m.FeatDType = int64(g.FeatDim), g.FeatDType
		if m.FeatDType == "" {
			m.FeatDType = "float32"
		}
		fd := npy.Float32
		if m.FeatDType == "float16" {
			fd = npy.Float16
		}
		fw, err := b.CreateArray(storage.FileFeatures, fd, []int64{int64(g.FeatDim)})
		check(err)
		row := make([]float32, g.FeatDim)
		for v := range n {
			clear(row)
			if g.Feature != nil {
				g.Feature(v, row)
			}
			if fd == npy.Float16 {
				check(fw.WriteFloat32sAsFloat16(row))
			} else {
				check(fw.WriteFloat32s(row))
			}
		}
		check(fw.Commit())
	}
	if g.Labels != nil {
		lw, err := b.CreateArray(storage.FileLabels, npy.Int32, nil)
		check(err)
		check(lw.WriteInt32s(g.Labels))
		check(lw.Commit())
	}
	for _, s := range []struct {
		name string
		ids  []int64
	}{{storage.FileTrain, g.Train}, {storage.FileValid, g.Valid}, {storage.FileTest, g.Test}} {
		if s.ids == nil {
			continue
		}
		w, err := b.CreateArray(s.name, npy.Int64, nil)
		check(err)
		ids := slices.Clone(s.ids)
		slices.Sort(ids)
		check(w.WriteInt64s(ids))
		check(w.Commit())
	}
	check(b.Finish(m))
	d, err := storage.Open(dir, nil)
	check(err)
	t.Cleanup(func() { d.Close() })
	return d
}

// ReadNPY reads a whole .npy file (test sizes only) and returns its
// header and data section.
func ReadNPY(t testing.TB, path string) (npy.Header, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ParseHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if int64(len(b)) < h.DataOffset+h.DataBytes() {
		t.Fatalf("%s: %d bytes, header says %d", path, len(b), h.DataOffset+h.DataBytes())
	}
	return h, b[h.DataOffset : h.DataOffset+h.DataBytes()]
}
