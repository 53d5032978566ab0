package histcache_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/histcache"
)

// filled returns a cache over 20 nodes with candidates 2, 5, 9, 11, 14 of
// width 3 holding Valid, MustRefresh and Empty entries.
func filled(t testing.TB) *histcache.Cache {
	c := newCache(t, 20, []int64{2, 5, 9, 11, 14}, 3, &histcache.Options{Policy: histcache.PolicyGrad, PGrad: 0.5})
	nodes := []int64{2, 5, 9, 11}
	if _, err := c.Push(7, nodes, rows(nodes, 3, 7), []float32{1, 2, 3, 4}); err != nil { // admits 2, 5
		t.Fatal(err)
	}
	if _, err := c.EvictUnstable([]int64{5}, []float32{10}); err != nil { // 5 → MustRefresh
		t.Fatal(err)
	}
	if err := c.MarkInBatch([]int64{2}); err != nil { // written as Valid
		t.Fatal(err)
	}
	return c
}

func TestSnapshotRoundTrip(t *testing.T) {
	c := filled(t)
	var buf bytes.Buffer
	n, err := c.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo %d, %v (buffer %d)", n, err, buf.Len())
	}
	if want := int64(48 + 2*(8+1+8+4*3) + 5 + 8); n != want { // header, records, threshold, checksum
		t.Fatalf("snapshot is %d bytes, want %d", n, want)
	}
	d := newCache(t, 20, []int64{2, 5, 9, 11, 14}, 3, nil)
	trailing := append(buf.Bytes(), "next"...)
	r := bytes.NewReader(trailing)
	m, err := d.ReadFrom(r)
	if err != nil || m != n || r.Len() != 4 {
		t.Fatalf("ReadFrom %d, %v, left %d", m, err, r.Len())
	}
	for v := int64(0); v < 20; v++ {
		want := c.State(v)
		if want == histcache.InBatchCompute {
			want = histcache.Valid
		}
		if got := d.State(v); got != want {
			t.Fatalf("node %d: %v, want %v", v, got, want)
		}
	}
	dst := make([]float32, 3)
	if err := d.Pull(8, []int64{2}, dst); err != nil || fmt.Sprint(dst) != fmt.Sprint(rows([]int64{2}, 3, 7)) {
		t.Fatalf("pull after restore: %v %v", dst, err)
	}
	if s := d.Stats(); s.Valid != 1 {
		t.Fatalf("valid %d", s.Valid)
	}
	var again bytes.Buffer
	if _, err := d.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Fatalf("rewrite differs: %v", err)
	}
}

func TestSnapshotDamage(t *testing.T) {
	c := filled(t)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 0x40
		return b
	}
	cases := []struct {
		name   string
		data   []byte
		cache  func() *histcache.Cache
		want   error
		offset int64 // for corrupt errors, -1 to skip
	}{
		{"empty", nil, nil, histcache.ErrCorrupt, 0},
		{"bad magic", flip(0), nil, histcache.ErrCorrupt, 0},
		{"bad version", flip(8), nil, histcache.ErrCorrupt, 8},
		{"truncated header", good[:30], nil, histcache.ErrCorrupt, 30},
		{"truncated record", good[:60], nil, histcache.ErrCorrupt, 60},
		{"no checksum", good[:len(good)-8], nil, histcache.ErrCorrupt, int64(len(good) - 8)},
		{"flipped embedding", flip(48 + 8 + 1 + 8), nil, histcache.ErrCorrupt, int64(len(good) - 8)},
		{"flipped checksum", flip(len(good) - 1), nil, histcache.ErrCorrupt, int64(len(good) - 8)},
		{"bad state", flip(48 + 8), nil, histcache.ErrCorrupt, -1},
		{"other width", good, func() *histcache.Cache { return newCache(t, 20, []int64{2, 5, 9, 11, 14}, 4, nil) }, histcache.ErrMismatch, -1},
		{"other candidates", good, func() *histcache.Cache { return newCache(t, 20, []int64{1, 5, 9, 11, 14}, 3, nil) }, histcache.ErrMismatch, -1},
		// Another budget: told apart, so that a resumed trainer can
		// start its history empty instead of refusing.
		{"other size", good, func() *histcache.Cache { return newCache(t, 20, []int64{2, 5, 9, 11, 14, 17}, 3, nil) }, histcache.ErrOtherSize, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := filled(t)
			if tc.cache != nil {
				d = tc.cache()
			}
			var before bytes.Buffer
			d.WriteTo(&before)
			_, err := d.ReadFrom(bytes.NewReader(tc.data))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if errors.Is(err, histcache.ErrOtherSize) != (tc.want == histcache.ErrOtherSize) {
				t.Fatalf("err %v: ErrOtherSize %v, want %v", err, errors.Is(err, histcache.ErrOtherSize), tc.want == histcache.ErrOtherSize)
			}
			var ce *histcache.CorruptError
			if tc.offset >= 0 && errors.As(err, &ce) && ce.Offset != tc.offset {
				t.Fatalf("offset %d, want %d (%v)", ce.Offset, tc.offset, err)
			}
			var after bytes.Buffer
			d.WriteTo(&after)
			if !bytes.Equal(before.Bytes(), after.Bytes()) {
				t.Fatal("a failed ReadFrom changed the cache")
			}
		})
	}
}

func FuzzReadFrom(f *testing.F) {
	c := filled(f)
	var buf bytes.Buffer
	c.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte("SSDHIST\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newCache(t, 20, []int64{2, 5, 9, 11, 14}, 3, nil)
		n, err := d.ReadFrom(bytes.NewReader(data))
		if n > int64(len(data)) {
			t.Fatalf("read %d of %d bytes", n, len(data))
		}
		if err != nil {
			return
		}
		// Whatever was accepted must write back its records byte for
		// byte (the staleness field is informational: the cache's own is
		// written).
		var out bytes.Buffer
		if _, err := d.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		o := out.Bytes()
		if int64(len(o)) != n || !bytes.Equal(o[40:len(o)-8], data[40:n-8]) || !bytes.Equal(o[:32], data[:32]) {
			t.Fatalf("accepted snapshot does not round-trip")
		}
	})
}

// TestSnapshotErrorFields: each damage names the field that failed and
// its offset (where a bad value begins; where the data ends for a short
// read), and the file when the reader is one.
func TestSnapshotErrorFields(t *testing.T) {
	c := filled(t)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	set := func(off int, b ...byte) []byte {
		out := bytes.Clone(good)
		copy(out[off:], b)
		return out
	}
	const rec = 48 // first record
	for _, tc := range []struct {
		name   string
		data   []byte
		field  string
		offset int64
		reason string
	}{
		{"empty", nil, "magic", 0, "truncated: 8 bytes wanted at byte 0, 0 left"},
		{"bad magic", set(0, 'X'), "magic", 0, "not a histcache snapshot"},
		{"bad version", set(8, 3), "version", 8, "version 3, want 1 or 2"},
		{"truncated slots", good[:30], "slots", 30, "truncated: 8 bytes wanted at byte 24, 6 left"},
		{"zero staleness", set(32, 0), "staleness", 32, "0, want >= 1"},
		{"too many entries", set(40, 9), "entries", 40, "9 entries for 5 slots"},
		{"node out of range", set(rec, 20), "node", rec, "node 20 of 20"},
		{"nodes not ascending", set(rec+29, 2), "node", rec + 29, "node 2 after 2, want ascending"},
		{"bad state", set(rec+8, 9), "state", rec + 8, "want Valid or MustRefresh"},
		{"truncated iter", good[:rec+12], "iter", rec + 12, "truncated: 8 bytes wanted at byte 57, 3 left"},
		{"truncated embedding", good[:rec+20], "embedding", rec + 20, "truncated: 12 bytes wanted at byte 65, 3 left"},
		{"no checksum", good[:len(good)-3], "checksum", int64(len(good) - 3), "truncated: 8 bytes wanted"},
		{"bad checksum", set(len(good)-8, 0), "checksum", int64(len(good) - 8), "xxhash64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newCache(t, 20, []int64{2, 5, 9, 11, 14}, 3, nil)
			_, err := d.ReadFrom(bytes.NewReader(tc.data))
			var ce *histcache.CorruptError
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.Offset != tc.offset || !strings.Contains(ce.Reason, tc.reason) || ce.File != "" {
				t.Fatalf("err %v, want field %s at %d: %q", err, tc.field, tc.offset, tc.reason)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "hist.snap")
	if err := os.WriteFile(path, good[:60], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ce *histcache.CorruptError
	if _, err := newCache(t, 20, []int64{2, 5, 9, 11, 14}, 3, nil).ReadFrom(f); !errors.As(err, &ce) || ce.File != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("from a file: %v, want it named", err)
	}
}

// TestSnapshotChunks: records wider than ReadFrom's chunk are decoded one
// chunk each, and a snapshot truncated in a later chunk fails there.
func TestSnapshotChunks(t *testing.T) {
	const h = 20000 // 80 KB a record
	cand := []int64{2, 5, 9, 11, 14}
	c := newCache(t, 20, cand, h, nil)
	if _, err := c.Push(1, cand, rows(cand, h, 1), nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := c.WriteTo(&buf)
	if err != nil || c.Stats().Valid != 5 {
		t.Fatalf("WriteTo: %v, %d valid", err, c.Stats().Valid)
	}
	d := newCache(t, 20, cand, h, nil)
	if m, err := d.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil || m != n {
		t.Fatalf("ReadFrom %d of %d: %v", m, n, err)
	}
	var again bytes.Buffer
	if _, err := d.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Fatalf("round trip differs: %v", err)
	}
	recBytes := int64(17 + 4*h)
	cut := 48 + 3*recBytes + 100 // in the fourth record's embedding
	var ce *histcache.CorruptError
	if _, err := d.ReadFrom(bytes.NewReader(buf.Bytes()[:cut])); !errors.As(err, &ce) || ce.Field != "embedding" || ce.Offset != cut {
		t.Fatalf("truncated fourth record: %v", err)
	}
}

// TestSnapshotKeepsThreshold: under PolicyGrad the threshold the last
// Push set survives a snapshot, so that after a push with no candidates
// (which keeps the threshold) the restored cache evicts an unstable
// pulled entry as the original does. Version 1 dropped it: the original
// evicted node 1 (norm 5 > threshold 2), the restored cache kept it.
// Version-1 snapshots still restore, without a threshold.
func TestSnapshotKeepsThreshold(t *testing.T) {
	const h = 2
	o := &histcache.Options{Staleness: 10, Policy: histcache.PolicyGrad, PGrad: 0.5}
	nodes := []int64{1, 2, 3, 4}
	a := newCache(t, 10, nodes, h, o)
	if _, err := a.Push(0, nodes, rows(nodes, h, 1), []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != a.SnapshotBytes() {
		t.Fatalf("snapshot %d bytes, SnapshotBytes %d", buf.Len(), a.SnapshotBytes())
	}
	snap := bytes.Clone(buf.Bytes())
	b := newCache(t, 10, nodes, h, o)
	if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	ta, oka := a.Threshold()
	tb, okb := b.Threshold()
	if ta != tb || oka != okb || !oka {
		t.Fatalf("threshold %v (set %v), restored %v (set %v)", ta, oka, tb, okb)
	}
	for name, c := range map[string]*histcache.Cache{"original": a, "restored": b} {
		if _, err := c.Push(1, []int64{7}, rows([]int64{7}, h, 2), []float32{0.5}); err != nil {
			t.Fatal(err)
		}
		if n, err := c.EvictUnstable([]int64{1}, []float32{5}); err != nil || n != 1 || c.State(1) != histcache.MustRefresh {
			t.Errorf("%s: evicted %d (%v), state %v; want node 1 evicted", name, n, err, c.State(1))
		}
	}
	// Version 1: the same records without the trailer, version field 1,
	// its own checksum.
	v1 := bytes.Clone(snap[:len(snap)-8-5])
	binary.LittleEndian.PutUint32(v1[8:], 1)
	v1 = binary.LittleEndian.AppendUint64(v1, xxhash.Sum64(v1))
	c := newCache(t, 10, nodes, h, o)
	if _, err := c.ReadFrom(bytes.NewReader(v1)); err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if _, ok := c.Threshold(); ok || c.State(1) != histcache.Valid {
		t.Errorf("version 1 restored a threshold, or not node 1: state %v", c.State(1))
	}
}
