package planner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/storage"
)

// FuzzParseMeta checks that ParseMeta never panics and that what it
// accepts round-trips through JSON.
func FuzzParseMeta(f *testing.F) {
	good, _ := json.Marshal(handProfile([]uint32{1}, []uint32{0}, []uint32{0}, 1).Meta)
	f.Add(good)
	f.Add([]byte(`{"format":"ssdgnn-profile","version":1}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeta(b, "profile.json")
		if err != nil {
			return
		}
		again, _ := json.Marshal(m)
		if _, err := ParseMeta(again, "profile.json"); err != nil {
			t.Fatalf("re-encoded meta rejected: %v", err)
		}
	})
}

// savedArray is the saved_io_feat.npy file Profile.Save writes for feat,
// and the checksum its profile.json records.
func savedArray(t testing.TB, dir string, feat []uint32) ([]byte, string) {
	t.Helper()
	n := len(feat)
	p := handProfile(feat, make([]uint32, n), make([]uint32, n), 1)
	if err := p.Save(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(ProfilePath(dir, p.Meta.Name), FileSavedIOFeat))
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range p.Meta.Files {
		if fi.Name == FileSavedIOFeat {
			return raw, fi.Checksum
		}
	}
	t.Fatal("no manifest entry for " + FileSavedIOFeat)
	return nil, ""
}

// FuzzDecodeArray checks that decodeArray never panics on damaged files,
// and that an array it accepts is the file's data: re-encoded, its bytes
// are the file's after the header. The checksum handed in is that of the
// file's last 4n bytes, so that damage to the header or the length is
// reached and not stopped by the checksum.
func FuzzDecodeArray(f *testing.F) {
	raw, _ := savedArray(f, f.TempDir(), []uint32{7, 0, 1 << 31, 42, 0xffffffff})
	f.Add(raw, int64(5))
	f.Add(raw, int64(4))
	f.Add(raw[:len(raw)-3], int64(5))
	f.Add(append(bytes.Clone(raw), 0), int64(5))
	f.Add([]byte("\x93NUMPY\x01\x00"), int64(3))
	f.Fuzz(func(t *testing.T, raw []byte, n int64) {
		if n < 0 || n > 1<<16 {
			return
		}
		tail := raw[max(0, int64(len(raw))-4*n):]
		a, err := decodeArray(raw, "a.npy", n, storage.FormatChecksum(xxhash.Sum64(tail)))
		if err != nil {
			return
		}
		if int64(len(a)) != n {
			t.Fatalf("%d elements, want %d", len(a), n)
		}
		var data []byte
		for _, x := range a {
			data = binary.LittleEndian.AppendUint32(data, x)
		}
		if !bytes.Equal(data, tail) || len(raw) < 4*len(a) {
			t.Fatalf("accepted array %v is not the file's data", a)
		}
	})
}
