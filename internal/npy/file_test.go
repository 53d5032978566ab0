package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestFileStreamAndCommit: a streamed File reads back with the header
// Commit returned and the bytes written; Abort leaves no file; WriteFile
// round-trips and refuses data of the wrong size.
func TestFileStreamAndCommit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npy")
	f, err := Create(p, Int32, []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}
	if _, err := f.Write(data[:8]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data[8:]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("%s visible before Commit (%v)", p, err)
	}
	h, err := f.Commit()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadHeader(bytes.NewReader(b))
	if err != nil || got.DType != Int32 || len(got.Shape) != 2 || got.Shape[0] != 2 || got.Shape[1] != 2 || got.DataOffset != h.DataOffset {
		t.Fatalf("header %+v (%v), Commit said %+v", got, err, h)
	}
	if !bytes.Equal(b[got.DataOffset:], data) {
		t.Fatalf("data %v, want %v", b[got.DataOffset:], data)
	}

	q := filepath.Join(dir, "b.npy")
	g, err := Create(q, Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Write(data[:4])
	g.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("after Abort the directory holds %d entries, want only a.npy", len(ents))
	}

	w := filepath.Join(dir, "c.npy")
	if n, err := WriteFile(w, Int32, []int64{4}, data); err != nil || n != HeaderSize+16 {
		t.Fatalf("WriteFile: %d bytes, %v", n, err)
	}
	if err := error(nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(w); !bytes.Equal(b[len(b)-len(data):], data) {
		t.Fatal("WriteFile data differs")
	}
	if _, err := WriteFile(filepath.Join(dir, "d.npy"), Int32, []int64{3}, data); err == nil {
		t.Fatal("WriteFile accepted 16 bytes for 3 int32")
	}
}
