package storage_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// resum recomputes file's checksum in dir's manifest, as a writer that
// produced wrong values would have.
func resum(t testing.TB, dir, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ParseHeader(b)
	if err != nil || h.DataOffset > int64(len(b)) {
		return
	}
	mpath := filepath.Join(dir, storage.ManifestName)
	mb, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m storage.Manifest
	if json.Unmarshal(mb, &m) != nil {
		return
	}
	if e := m.File(file); e != nil {
		e.Checksum = fmt.Sprintf("xxhash64:%016x", xxhash.Sum64(b[h.DataOffset:]))
	}
	mb, _ = json.Marshal(&m)
	os.WriteFile(mpath, mb, 0o644)
}

func TestOpenChecks(t *testing.T) {
	for _, c := range []struct {
		file  string
		off   int64
		b     []byte
		resum bool
		want  string
	}{
		{storage.FileIndices, 4 * 2, le32(99999), false, "indices.npy: indices[2]: node id 99999 out of range [0,4)"},
		{storage.FileIndices, 0, le32(-1), true, "indices[0]: node id -1 out of range"},
		{storage.FileIndices, 0, le32(3), false, "indices.npy: byte 128: checksum"},
		{storage.FileIndptr, 0, le64(1), true, "indptr.npy: indptr[0]: first offset is 1, want 0"},
		{storage.FileIndptr, 8 * 2, le64(0), true, "indptr[2]: offset 0 decreases (previous 1)"},
		{storage.FileIndptr, 8 * 4, le64(5), true, "indptr[4]: last offset is 5, want num_edges 6"},
		{storage.FileLabels, 4 * 3, le32(-2), true, "labels.npy: labels[3]: label -2 out of range [-1,2)"},
		{storage.FileTrain, 8, le64(0), true, "train_idx.npy: train_idx[1]: id 0 not strictly ascending (previous 0)"},
		{storage.FileValid, 0, le64(4), true, "valid_idx.npy: valid_idx[0]: node id 4 out of range [0,4)"},
	} {
		t.Run(c.want, func(t *testing.T) {
			dir := t.TempDir()
			writeTiny(t, dir, newTiny(), "float32")
			poke(t, dir, c.file, c.off, c.b)
			if c.resum {
				resum(t, dir, c.file)
			}
			_, err := storage.Open(dir, nil)
			var ce *storage.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a *CorruptError containing %q", err, c.want)
			}
			// Validate still opens it and lists the problem.
			rep, err := storage.Validate(dir, nil)
			if err != nil || rep.OK() {
				t.Fatalf("Validate: %v, %+v", err, rep)
			}
		})
	}
}

// FuzzOpen sets one element of one array of a tiny dataset (optionally
// fixing the checksum) or xors one byte anywhere in it: Open either fails
// or returns a dataset whose every view is safe to index.
func FuzzOpen(f *testing.F) {
	files := []string{storage.FileIndptr, storage.FileIndices, storage.FileLabels, storage.FileTrain, storage.FileValid, storage.FileTest, storage.ManifestName}
	f.Add(uint8(1), false, uint16(2), int64(99999), true)
	f.Add(uint8(0), false, uint16(2), int64(0), true)
	f.Add(uint8(0), false, uint16(4), int64(1<<40), false)
	f.Add(uint8(6), true, uint16(30), int64(7), false)
	f.Add(uint8(3), false, uint16(0), int64(-5), true)
	f.Fuzz(func(t *testing.T, which uint8, xorByte bool, pos uint16, val int64, fix bool) {
		dir := t.TempDir()
		writeTiny(t, dir, newTiny(), "float32")
		file := files[int(which)%len(files)]
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, herr := npy.ParseHeader(b)
		switch {
		case xorByte || herr != nil:
			b[int(pos)%len(b)] ^= byte(val) | 1
		case h.Len() > 0:
			size := int64(h.DType.Size())
			at := h.DataOffset + (int64(pos)%h.Len())*size
			for i := range size {
				b[at+i] = byte(val >> (8 * i))
			}
		}
		os.WriteFile(path, b, 0o644)
		if fix && file != storage.ManifestName {
			resum(t, dir, file)
		}
		d, err := storage.Open(dir, nil)
		if err != nil {
			return
		}
		defer d.Close()
		n := d.NumNodes()
		for v := range n {
			l := d.Neighbors(v)
			for i := range l.Len() {
				if u := l.At(i); u < 0 || u >= n {
					t.Fatalf("Open accepted neighbour %d of %d, N=%d", u, v, n)
				}
			}
			_ = d.FeatureBytes(v)
		}
		for _, l := range d.Labels() {
			if l < -1 || int64(l) >= d.Manifest().NumClasses {
				t.Fatalf("Open accepted label %d", l)
			}
		}
		for _, s := range [][]int64{d.TrainIdx(), d.ValidIdx(), d.TestIdx()} {
			for i, v := range s {
				if v < 0 || v >= n || (i > 0 && s[i-1] >= v) {
					t.Fatalf("Open accepted split %v", s)
				}
			}
		}
	})
}
