package main

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// TestReadIDsStreams: a --nodes file is read into the returned slice
// alone, 8 bytes an id, not into a copy of the file and then the slice
// (16 bytes an id): a list of 4 M ids was OOM-killed in a 64 MiB memory
// cgroup before infer could refuse the budget. int64 and int32 files give
// the same ids.
func TestReadIDsStreams(t *testing.T) {
	const n = 1 << 20
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i*7919%n) - 3 // a few negative ones: readIDs does not judge them
	}
	dir := t.TempDir()
	write := func(name string, d npy.DType) string {
		b := make([]byte, n*d.Size())
		for i, v := range ids {
			if d == npy.Int64 {
				binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
			} else {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v)))
			}
		}
		p := filepath.Join(dir, name)
		if _, err := npy.WriteFile(p, d, []int64{n}, b); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, p := range []string{write("ids64.npy", npy.Int64), write("ids32.npy", npy.Int32)} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, err := readIDs(p, nil)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("%s: the ids read differ from those written", filepath.Base(p))
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*n+1<<20 {
			t.Errorf("%s: reading %d ids allocated %d bytes, want at most %d (the slice and a buffer)", filepath.Base(p), n, alloc, 8*n+1<<20)
		}
	}
	// A list the budget refuses (fit) is refused before its slice is
	// made: a 12 M-id list under --mem 64MiB was OOM-killed while read.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := readIDs(filepath.Join(dir, "ids64.npy"), func(got int64) error {
		if got != n {
			t.Errorf("fit asked about %d ids, want %d", got, n)
		}
		return errors.New("too many")
	})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "too many") {
		t.Errorf("a list fit refuses: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("a refused list allocated %d bytes", alloc)
	}
	// Bytes after the data the header declares are an error naming them
	// (they were read as nothing, silently).
	p := filepath.Join(dir, "ids64.npy")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readIDs(p, nil); err == nil || !strings.Contains(err.Error(), "16 bytes after") {
		t.Errorf("a file with 16 bytes after its ids: %v", err)
	}
	// A file cut short in its data is an error naming the file.
	st, _ := os.Stat(p)
	if err := os.Truncate(p, st.Size()-16); err != nil {
		t.Fatal(err)
	}
	st, _ = os.Stat(p)
	if err := os.Truncate(p, st.Size()-4); err != nil {
		t.Fatal(err)
	}
	if _, err := readIDs(p, nil); err == nil {
		t.Fatal("a truncated file of ids was read")
	}
}
