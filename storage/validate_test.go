package storage_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// poke overwrites data bytes of file at data offset off.
func poke(t *testing.T, dir, file string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := npy.ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, h.DataOffset+off); err != nil {
		t.Fatal(err)
	}
}

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		// mutate corrupts a fresh tiny dataset.
		mutate func(t *testing.T, dir string)
		// want are substrings of the first problem; empty means valid.
		want []string
	}{
		{"clean", func(*testing.T, string) {}, nil},
		{"index out of range", func(t *testing.T, dir string) { poke(t, dir, storage.FileIndices, 4*3, le32(99)) },
			[]string{"indices.npy", "indices[3]", "node id 99 out of range"}},
		{"indptr decreasing", func(t *testing.T, dir string) { poke(t, dir, storage.FileIndptr, 8*2, le64(0)) },
			[]string{"indptr.npy", "indptr[2]", "decreases"}},
		{"NaN feature", func(t *testing.T, dir string) {
			poke(t, dir, storage.FileFeatures, 4*(3*2+1), le32(int32(math.Float32bits(float32(math.NaN())))))
		}, []string{"features.npy", "features[2]", "NaN at column 1"}},
		{"label out of range", func(t *testing.T, dir string) { poke(t, dir, storage.FileLabels, 4, le32(7)) },
			[]string{"labels.npy", "labels[1]", "label 7 out of range"}},
		{"split overlap", func(t *testing.T, dir string) { poke(t, dir, storage.FileValid, 0, le64(1)) },
			[]string{"valid_idx.npy", "valid_idx[0]", "earlier split"}},
		{"split out of range", func(t *testing.T, dir string) { poke(t, dir, storage.FileTrain, 8, le64(4)) },
			[]string{"train_idx.npy", "train_idx[1]", "out of range"}},
		{"split unsorted", func(t *testing.T, dir string) { poke(t, dir, storage.FileTrain, 0, le64(3)) },
			[]string{"train_idx.npy", "train_idx[1]", "ascending"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTiny(t, dir, newTiny(), "float32")
			c.mutate(t, dir)
			rep, err := storage.Validate(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == nil {
				if !rep.OK() {
					t.Fatalf("unexpected problems: %v", rep.Problems)
				}
				return
			}
			if rep.OK() {
				t.Fatal("corruption not detected")
			}
			for _, w := range c.want {
				if !strings.Contains(rep.Problems[0], w) {
					t.Errorf("problem %q lacks %q", rep.Problems[0], w)
				}
			}
			// Every mutation also breaks the data checksum.
			found := false
			for _, p := range rep.Problems {
				found = found || strings.Contains(p, "checksum")
			}
			if !found {
				t.Errorf("checksum mismatch not reported: %v", rep.Problems)
			}
		})
	}
}

func TestManifestErrors(t *testing.T) {
	cases := []struct {
		name, json, want string
	}{
		{"syntax", `{"format": `, "invalid JSON"},
		{"type", `{"format":"ssdgnn-dataset","version":1,"num_nodes":"x"}`, "num_nodes"},
		{"format", `{"format":"other","version":1}`, `field "format"`},
		{"version", `{"format":"ssdgnn-dataset","version":9}`, `field "version"`},
		{"missing files", `{"format":"ssdgnn-dataset","version":1,"num_nodes":2,"files":[]}`, "missing entry for indptr.npy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := storage.ParseManifest([]byte(c.json), "x/dataset.json")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want error containing %q", err, c.want)
			}
		})
	}
}

func FuzzManifest(f *testing.F) {
	dir := f.TempDir()
	writeTiny(&testing.T{}, dir, newTiny(), "float32")
	good, err := os.ReadFile(filepath.Join(dir, storage.ManifestName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":"ssdgnn-dataset","version":1,"num_nodes":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := storage.ParseManifest(b, "dataset.json")
		if err == nil {
			// Anything accepted must satisfy the invariants Open relies on.
			if m.NumNodes < 0 || m.NumEdges < 0 || m.File(storage.FileIndptr) == nil {
				t.Fatalf("accepted invalid manifest %+v", m)
			}
		}
	})
}

func TestRowReader(t *testing.T) {
	dir := t.TempDir()
	g := newTiny()
	writeTiny(t, dir, g, "float32")
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, mode := range []storage.ReadMode{storage.ReadBuffered, storage.ReadDirect, storage.ReadAuto} {
		t.Run(mode.String(), func(t *testing.T) {
			acct := storage.NewAccounting()
			st := acct.Stage(storage.StageGather)
			r, err := d.OpenRowReader(storage.FileFeatures, mode, st)
			if errors.Is(err, storage.ErrDirectUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if mode == storage.ReadAuto {
				// Auto is direct where O_DIRECT works, else buffered.
				dr, derr := d.OpenRowReader(storage.FileFeatures, storage.ReadDirect, storage.NewAccounting().Stage(storage.StageGather))
				want := storage.ReadDirect
				if errors.Is(derr, storage.ErrDirectUnsupported) {
					want = storage.ReadBuffered
				} else if derr != nil {
					t.Fatal(derr)
				} else {
					dr.Close()
				}
				if r.Mode() != want {
					t.Fatalf("auto resolved to %s, want %s", r.Mode(), want)
				}
				mode = r.Mode()
			}
			ids := []int64{3, 0, 2}
			buf := make([]byte, int64(len(ids))*r.RowBytes())
			if err := r.ReadRows(ids, buf); err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				got := storage.DecodeFeatureRow("float32", buf[int64(i)*r.RowBytes():int64(i+1)*r.RowBytes()], nil)
				for j := range got {
					if got[j] != g.feats[id][j] {
						t.Fatalf("row %d: got %v want %v", id, got, g.feats[id])
					}
				}
			}
			s := acct.Snapshot()[0]
			if s.Rows != 3 || s.BytesRequested != 36 {
				t.Fatalf("accounting %+v", s)
			}
			if mode == storage.ReadDirect {
				a := r.DirectAlign()
				t.Logf("O_DIRECT alignment %d bytes", a)
				if a < 512 || 4096%a != 0 {
					t.Fatalf("DirectAlign %d, want a divisor of 4096 of at least 512", a)
				}
				// Whole aligned blocks (the file's last one may be short):
				// at least the rows, at most two blocks per row.
				if s.BytesRead < 36 || s.BytesRead > 3*2*a {
					t.Fatalf("direct read %d bytes for 3 rows, want 36..%d (%d-byte blocks)", s.BytesRead, 3*2*a, a)
				}
			}
			if mode == storage.ReadBuffered && s.BytesRead != 36 {
				t.Fatalf("buffered read %d bytes, want 36", s.BytesRead)
			}
			ir, err := d.OpenRowReader(storage.FileIndices, mode, st)
			if err != nil {
				t.Fatal(err)
			}
			defer ir.Close()
			l, _, err := d.ReadNeighbors(ir, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.AppendTo(nil); len(got) != 2 || got[0] != 1 || got[1] != 3 {
				t.Fatalf("neighbours of 2: %v", got)
			}
			if err := r.ReadRange(4, 1, buf); err == nil {
				t.Fatal("read past the end succeeded")
			}
		})
	}
}

// TestValidateSplitUnlabelled (I17): split nodes whose label is -1 are a
// warning naming the split file, the count and the first node, and not a
// problem (the dataset stays OK).
func TestValidateSplitUnlabelled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		splits [3][]int64
		want   [3]int64
		warn   []string
	}{
		{"none", [3][]int64{{0, 1}, {2}, {}}, [3]int64{}, nil},
		{"test lists node 3", [3][]int64{{0, 1}, {2}, {3}}, [3]int64{0, 0, 1}, []string{"test_idx.npy", "1 of its nodes have no label", "first node 3 at element 0"}},
		{"train lists node 3", [3][]int64{{0, 3}, {1}, {2}}, [3]int64{1, 0, 0}, []string{"train_idx.npy", "first node 3 at element 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			g := newTiny()
			g.splits = tc.splits
			writeTiny(t, dir, g, "float32")
			rep, err := storage.Validate(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("problems: %v", rep.Problems)
			}
			if rep.SplitUnlabelled != tc.want {
				t.Errorf("SplitUnlabelled %v, want %v", rep.SplitUnlabelled, tc.want)
			}
			if len(tc.warn) == 0 {
				if len(rep.Warnings) != 0 {
					t.Errorf("warnings %v", rep.Warnings)
				}
				return
			}
			if len(rep.Warnings) != 1 {
				t.Fatalf("warnings %v, want one", rep.Warnings)
			}
			for _, w := range tc.warn {
				if !strings.Contains(rep.Warnings[0], w) {
					t.Errorf("warning %q lacks %q", rep.Warnings[0], w)
				}
			}
		})
	}
}
