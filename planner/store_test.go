package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// decodeArray decodes raw, the bytes of the array file path, as
// readArrayFile reads a file, into a new slice: readArray over bytes, for
// the tests that damage an array's bytes (the package reads files).
func decodeArray(raw []byte, path string, n int64, checksum string) ([]uint32, error) {
	var a []uint32
	err := readArray(bytes.NewReader(raw), int64(len(raw)), path, n, checksum, func() []uint32 {
		a = make([]uint32, n)
		return a
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// TestDecodeArrayErrors: every damage to an array file names the file, the
// field and the byte offset.
func TestDecodeArrayErrors(t *testing.T) {
	feat := []uint32{7, 0, 1 << 31, 42}
	raw, sum := savedArray(t, t.TempDir(), feat)
	h, err := npy.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	off := h.DataOffset
	if a, err := decodeArray(raw, "a.npy", 4, sum); err != nil || !slices.Equal(a, feat) {
		t.Fatalf("good file: %v, %v", a, err)
	}
	flip := func(i int64) []byte {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return b
	}
	for _, tc := range []struct {
		name   string
		raw    []byte
		n      int64
		field  string
		offset int64
		reason string
	}{
		{"not npy", []byte("PK\x03\x04 zip"), 4, "header", 0, "magic"},
		{"other length", raw, 5, "header", 0, "want uint32 [5]"},
		{"truncated data", raw[:off+13], 4, "data", off, "truncated: 4 elements of 4 bytes, 13 bytes left"},
		{"trailing bytes", append(bytes.Clone(raw), 1, 2), 4, "trailing", off + 16, "2 bytes after the 4 elements"},
		{"flipped data", flip(off + 5), 4, "data", off, "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeArray(tc.raw, "dir/a.npy", tc.n, sum)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != "dir/a.npy" || ce.Field != tc.field || ce.Offset != tc.offset || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("err %v, want %s at %d: %q", err, tc.field, tc.offset, tc.reason)
			}
			if !strings.Contains(err.Error(), "dir/a.npy") || !strings.Contains(err.Error(), "("+tc.field+")") {
				t.Fatalf("message %q does not name the file and field", err)
			}
		})
	}
}

// TestParseMetaErrors: a bad profile.json names the key at fault.
func TestParseMetaErrors(t *testing.T) {
	good := handProfile([]uint32{1}, []uint32{0}, []uint32{0}, 1).Meta
	for _, tc := range []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"format", func(m map[string]any) { m["format"] = "x" }, "format"},
		{"version", func(m map[string]any) { m["version"] = 2 }, "version"},
		{"num_nodes", func(m map[string]any) { m["num_nodes"] = -1 }, "num_nodes"},
		{"feat_row_bytes", func(m map[string]any) { m["feat_row_bytes"] = -1 }, "feat_row_bytes"},
		{"id_bytes", func(m map[string]any) { m["id_bytes"] = 2 }, "id_bytes"},
		{"beta", func(m map[string]any) { m["beta"] = 0 }, "beta"},
		{"presample_epochs", func(m map[string]any) { m["presample_epochs"] = 0 }, "presample_epochs"},
		{"wrong type", func(m map[string]any) { m["num_nodes"] = "many" }, "num_nodes"},
		{"read costs", func(m map[string]any) { m["reads"] = map[string]any{"random_reads_per_s": 0, "seq_bytes_per_s": 1e9} }, "reads"},
		{"read counts", func(m map[string]any) {
			m["reads"] = map[string]any{"random_reads_per_s": 1, "seq_bytes_per_s": 1, "rows": -1}
		}, "reads"},
		{"more reads than rows", func(m map[string]any) {
			m["reads"] = map[string]any{"random_reads_per_s": 1, "seq_bytes_per_s": 1, "rows": 2, "reads": 3}
		}, "reads"},
		{"more single reads than reads", func(m map[string]any) {
			m["reads"] = map[string]any{"random_reads_per_s": 1, "seq_bytes_per_s": 1, "rows": 3, "reads": 2, "single_reads": 3}
		}, "reads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(good)
			var m map[string]any
			json.Unmarshal(b, &m)
			tc.edit(m)
			b, _ = json.Marshal(m)
			_, err := ParseMeta(b, "p/profile.json")
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != "p/profile.json" || ce.Field != tc.field {
				t.Fatalf("err %v, want field %s", err, tc.field)
			}
		})
	}
}

// TestSaveKeepsOldProfile: a save that fails part way (here at the third
// array, whose length is wrong) leaves the profile that was there whole
// and loadable, with or without the directory exchange. Before, Save
// removed profile.json first and rewrote the arrays in place, so the old
// profile was lost. A save that succeeds replaces the profile, carries a
// plan.json written beside it over, drops the old recounts and leaves no
// staging directory.
func TestSaveKeepsOldProfile(t *testing.T) {
	for _, exchange := range []bool{true, false} {
		t.Run(fmt.Sprintf("exchange=%v", exchange), func(t *testing.T) {
			if !exchange {
				saved := exchangeDirs
				exchangeDirs = func(a, b string) error { return unix.EINVAL }
				t.Cleanup(func() { exchangeDirs = saved })
			}
			dir := t.TempDir()
			p1 := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
			if err := p1.Save(dir); err != nil {
				t.Fatal(err)
			}
			out := ProfilePath(dir, p1.Meta.Name)
			if err := os.WriteFile(filepath.Join(out, "plan.json"), []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(out, RemodelDir, "k"), 0o755); err != nil {
				t.Fatal(err)
			}
			bad := handProfile([]uint32{9, 9, 9, 9}, []uint32{9, 9, 9, 9}, []uint32{9, 9, 9}, 0.25)
			if err := bad.Save(dir); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("save of a bad profile: %v, want ErrInvalidOptions", err)
			}
			q, err := LoadProfile(dir, p1.Meta.Name)
			if err != nil {
				t.Fatalf("the old profile after a failed save: %v", err)
			}
			if !slices.Equal(q.Feat, p1.Feat) || !slices.Equal(q.HistGather, p1.HistGather) || q.Meta.Beta != p1.Meta.Beta {
				t.Fatalf("the old profile changed: %+v", q)
			}
			p2 := handProfile([]uint32{1, 1, 1, 1}, []uint32{2, 2, 2, 2}, []uint32{3, 3, 3, 3}, 0.75)
			if err := p2.Save(dir); err != nil {
				t.Fatal(err)
			}
			if q, err = LoadProfile(dir, p1.Meta.Name); err != nil || !slices.Equal(q.Feat, p2.Feat) || q.Meta.Beta != 0.75 {
				t.Fatalf("after a good save: %v, %+v", err, q)
			}
			if b, err := os.ReadFile(filepath.Join(out, "plan.json")); err != nil || string(b) != "{}\n" {
				t.Errorf("plan.json not carried over: %q, %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(out, RemodelDir)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the old profile's recounts survived the save: %v", err)
			}
			ents, _ := os.ReadDir(filepath.Join(dir, ProfileDir))
			if len(ents) != 1 {
				t.Errorf("profile directory holds %v, want only %s", ents, p1.Meta.Name)
			}
		})
	}
}

// TestSaveRecoversMovedAside: an old profile moved aside by the fallback
// swap and stranded by a crash (.NAME.old, no NAME) goes back to its name
// at the next save, which then replaces it.
func TestSaveRecoversMovedAside(t *testing.T) {
	dir := t.TempDir()
	p1 := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
	if err := p1.Save(dir); err != nil {
		t.Fatal(err)
	}
	out := ProfilePath(dir, p1.Meta.Name)
	_, old := profileSwapNames(out)
	if err := os.Rename(out, old); err != nil {
		t.Fatal(err)
	}
	bad := handProfile([]uint32{9, 9, 9, 9}, []uint32{9, 9, 9}, []uint32{9, 9, 9, 9}, 0.25)
	if err := bad.Save(dir); err == nil {
		t.Fatal("save of a bad profile succeeded")
	}
	if q, err := LoadProfile(dir, p1.Meta.Name); err != nil || !slices.Equal(q.Feat, p1.Feat) {
		t.Fatalf("stranded profile not recovered: %v", err)
	}
}

// TestLoadProfileNotFoundNames: a missing profile's error names the
// profiles the dataset has (sweep 26, P13: plan without --profile on a
// dataset of seven profiles, none "default", said only "run 'ssdgnn
// profile' first").
func TestLoadProfileNotFoundNames(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadProfile(dir, "default"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "run 'ssdgnn profile' first") {
		t.Fatalf("no profiles: %v", err)
	}
	for _, name := range []string{"b", "a"} {
		p := handProfile([]uint32{1, 0}, []uint32{0, 0}, []uint32{0, 1}, 0.5)
		p.Meta.Name = name
		if err := p.Save(dir); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadProfile(dir, "default"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "this dataset's profiles: a, b") {
		t.Fatalf("two profiles, none default: %v", err)
	}
}

// TestOfPartition: a partition-batch profile matches only the assignment
// it was profiled on; one of random batches matches any; a partitioning
// that is gone, or a partition-batch profile written before part_checksum,
// is a mismatch, as train's Reusable judges it (sweep 26, P14; review R11).
func TestOfPartition(t *testing.T) {
	part := []int32{0, 1, 1, 0}
	m := Meta{Name: "p", Partition: "fennel", PartChecksum: PartChecksum(part)}
	for _, c := range []struct {
		name string
		m    Meta
		part []int32
		ok   bool
	}{
		{"same", m, []int32{0, 1, 1, 0}, true},
		{"reassigned", m, []int32{1, 0, 1, 0}, false},
		{"gone", m, nil, false},
		{"random batches", Meta{Name: "r"}, []int32{1, 0, 1, 0}, true},
		{"not recorded", Meta{Name: "o", Partition: "fennel"}, []int32{0, 1, 1, 0}, false},
	} {
		err := c.m.OfPartition(c.part)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrMismatch)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
