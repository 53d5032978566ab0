package importer

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// gz compresses s.
func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeFiles writes files (path relative to dir → content) under dir.
// Names ending in .gz get their string content gzipped.
func writeFiles(t testing.TB, dir string, files map[string]any) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var data []byte
		switch c := content.(type) {
		case string:
			data = []byte(c)
			if filepath.Ext(name) == ".gz" {
				data = gz(t, c)
			}
		case []byte:
			data = c
		default:
			t.Fatalf("writeFiles: %T", content)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rawBytes encodes values (a slice of a fixed-size numeric type, or
// []float16.Float16) little-endian.
func rawBytes(t testing.TB, values any) []byte {
	t.Helper()
	var b bytes.Buffer
	if v, ok := values.([]float16.Float16); ok {
		for _, x := range v {
			_ = binary.Write(&b, binary.LittleEndian, x.Bits())
		}
		return b.Bytes()
	}
	if err := binary.Write(&b, binary.LittleEndian, values); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npyBytes is a complete .npy file (header from internal/npy's encoder).
func npyBytes(t testing.TB, d npy.DType, shape []int64, values any) []byte {
	t.Helper()
	hdr, err := npy.EncodeHeader(d, shape)
	if err != nil {
		t.Fatal(err)
	}
	return append(hdr, rawBytes(t, values)...)
}

// zipBytes builds a zip archive of members with the given method.
func zipBytes(t testing.TB, method uint16, members map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range sortedKeys(members) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(members[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// loaded is a dataset read back into plain slices.
type loaded struct {
	m       storage.Manifest
	indptr  []int64
	indices []int64
	feats   [][]float32
	labels  []int32
	splits  [3][]int64
}

func load(t testing.TB, dir string) loaded {
	t.Helper()
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer d.Close()
	l := loaded{m: *d.Manifest()}
	l.m.Files = nil
	l.indptr = append([]int64(nil), d.Indptr()...)
	for v := int64(0); v < d.NumNodes(); v++ {
		l.indices = d.Neighbors(v).AppendTo(l.indices)
		if d.FeatDim() > 0 {
			l.feats = append(l.feats, append([]float32(nil), d.FeatureRow(v, nil)...))
		}
	}
	l.labels = append([]int32(nil), d.Labels()...)
	l.splits = [3][]int64{append([]int64(nil), d.TrainIdx()...), append([]int64(nil), d.ValidIdx()...), append([]int64(nil), d.TestIdx()...)}
	return l
}

// sameArrays reports whether two datasets hold byte-identical arrays.
func sameArrays(t testing.TB, a, b string) {
	t.Helper()
	ma, err := storage.LoadManifest(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := storage.LoadManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ma.Files, mb.Files) {
		t.Errorf("file entries differ:\n%+v\n%+v", ma.Files, mb.Files)
	}
	for _, f := range ma.Files {
		da, _ := os.ReadFile(filepath.Join(a, f.Name))
		db, _ := os.ReadFile(filepath.Join(b, f.Name))
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs", f.Name)
		}
	}
}

// assertNoDataset checks that a failed import left no dataset behind.
func assertNoDataset(t testing.TB, dir string) {
	t.Helper()
	d, err := storage.Open(dir, nil)
	if err == nil {
		d.Close()
		t.Errorf("%s: Open succeeded after a failed import", dir)
		return
	}
	if !errors.Is(err, storage.ErrNotDataset) {
		t.Errorf("%s: Open error %v, want ErrNotDataset", dir, err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("%s: leftover %s after a failed import", dir, e.Name())
	}
}

func f32near(a, b, tol float32) bool {
	return math.Abs(float64(a-b)) <= float64(tol)
}

// npyInt64s reads a whole integer .npy file (int32 or int64) as int64s.
func npyInt64s(t testing.TB, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data := b[len(b)-int(h.DataBytes()):]
	switch h.DType {
	case npy.Int64:
		return append([]int64(nil), npy.AsInt64(data)...)
	case npy.Int32:
		var out []int64
		for _, x := range npy.AsInt32(data) {
			out = append(out, int64(x))
		}
		return out
	}
	t.Fatalf("%s: dtype %v", path, h.DType)
	return nil
}
