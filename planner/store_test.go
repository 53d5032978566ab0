package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

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
