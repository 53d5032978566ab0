package storage

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestIDMapLookups(t *testing.T) {
	// new = 2, 0, 1 for old 0, 1, 2.
	m, err := NewIDMap([]int64{1, 2, 0}, []int64{2, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range []int64{1, 2, 0} {
		if u, err := m.Orig(int64(v)); err != nil || u != want {
			t.Errorf("Orig(%d) = %d, %v; want %d", v, u, err, want)
		}
	}
	if got, err := m.ToNew([]int64{2, 2, 0}); err != nil || got[0] != 1 || got[1] != 1 || got[2] != 2 {
		t.Errorf("ToNew = %v, %v", got, err)
	}
	if got, err := m.InOrigOrder([]int64{0, 1, 2}); err != nil || got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Errorf("InOrigOrder = %v, %v", got, err)
	}
	if got, err := m.AllInOrigOrder(); err != nil || got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Errorf("AllInOrigOrder = %v, %v", got, err)
	}
	if _, err := m.New(3); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("New(3) out of range: %v, want a range error", err)
	}
	bad, _ := NewIDMap([]int64{1, 1, 0}, []int64{2, 0, 1})
	if _, err := bad.Orig(1); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "new_ids") {
		t.Errorf("Orig through a non-inverse pair: %v, want ErrCorrupt naming new_ids", err)
	}
	if _, err := NewIDMap([]int64{0}, nil); !errors.Is(err, ErrMismatch) {
		t.Errorf("maps of different lengths: %v", err)
	}
}

func TestManifestIDMapsNeedRelabelledFrom(t *testing.T) {
	e := func(name string, n int64) FileEntry {
		return FileEntry{Name: name, DType: "int64", Shape: []int64{n}, Bytes: 128 + 8*n, DataOffset: 128}
	}
	base := Manifest{Format: FormatName, Version: FormatVersion, NumNodes: 2, NumEdges: 0,
		Files: []FileEntry{e(FileIndptr, 3), {Name: FileIndices, DType: "int32", Shape: []int64{0}, Bytes: 128, DataOffset: 128}}}
	m := base
	m.Files = append(m.Files, e(FileOrigIDs, 2), e(FileNewIDs, 2))
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "relabelled_from") {
		t.Errorf("maps without relabelled_from: %v", err)
	}
	m.RelabelledFrom = &Relabelling{Partitioning: "fennel", K: 2}
	if err := m.Validate(); err != nil {
		t.Errorf("relabelled manifest: %v", err)
	}
	m = base
	m.RelabelledFrom = &Relabelling{Partitioning: "fennel", K: 2}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), FileOrigIDs) {
		t.Errorf("relabelled_from without maps: %v", err)
	}
}

// FuzzIDMap: lookups through arbitrary maps never panic, and whatever
// they return is consistent with both maps.
func FuzzIDMap(f *testing.F) {
	enc := func(v ...int64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b
	}
	f.Add(enc(1, 2, 0, 2, 0, 1))
	f.Add(enc(0, 0, 1, 1))
	f.Add(enc(-1, 5, 7, 0))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b) / 16
		orig, nw := make([]int64, n), make([]int64, n)
		for i := range n {
			orig[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			nw[i] = int64(binary.LittleEndian.Uint64(b[8*(n+i):]))
		}
		m, err := NewIDMap(orig, nw)
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(-1); v <= int64(n); v++ {
			if u, err := m.Orig(v); err == nil && (u < 0 || u >= int64(n) || nw[u] != v) {
				t.Fatalf("Orig(%d) = %d, inconsistent", v, u)
			}
			if w, err := m.New(v); err == nil && (w < 0 || w >= int64(n) || orig[w] != v) {
				t.Fatalf("New(%d) = %d, inconsistent", v, w)
			}
		}
		all := make([]int64, n)
		for i := range all {
			all[i] = int64(i)
		}
		m.InOrigOrder(all)
		m.AllInOrigOrder()
		m.ToNew(all)
	})
}
