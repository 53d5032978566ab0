package planner

import (
	"encoding/json"
	"testing"
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

// FuzzDecodeArray checks that decodeArray never panics on damaged files.
func FuzzDecodeArray(f *testing.F) {
	f.Add([]byte("\x93NUMPY\x01\x00"), int64(3))
	f.Fuzz(func(t *testing.T, raw []byte, n int64) {
		if n < 0 || n > 1<<16 {
			return
		}
		_, _ = decodeArray(raw, "a.npy", n, "xxhash64:0000000000000000")
	})
}
