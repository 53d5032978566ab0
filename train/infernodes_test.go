package train

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

// TestReadNodeListStreams: a --nodes file is read into the returned slice
// alone, 8 bytes an id, not into a copy of the file and then the slice
// (16 bytes an id): a list of 4 M ids was OOM-killed in a 64 MiB memory
// cgroup before infer could refuse the budget. int64 and int32 files give
// the same ids.
func TestReadNodeListStreams(t *testing.T) {
	const n = 1 << 20
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i*7919%n) - 3 // a few negative ones: readNodeList does not judge them
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
		got, err := readNodeList(p, nil)
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
	_, err := readNodeList(filepath.Join(dir, "ids64.npy"), func(got int64) error {
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
	if _, err := readNodeList(p, nil); err == nil || !strings.Contains(err.Error(), "16 bytes after") {
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
	if _, err := readNodeList(p, nil); err == nil {
		t.Fatal("a truncated file of ids was read")
	}
}

// TestReadNodeListDTypes: ids saved with any integer dtype are read (a
// uint32 or int16 np.save of ids was refused: "want int64 or int32");
// float and bool arrays are refused naming the dtype.
func TestReadNodeListDTypes(t *testing.T) {
	dir := t.TempDir()
	want := []int64{3, 0, 120, 7}
	for _, tc := range []struct {
		d  npy.DType
		ok bool
	}{
		{npy.Int64, true}, {npy.Uint64, true}, {npy.Int32, true}, {npy.Uint32, true},
		{npy.Int16, true}, {npy.Uint16, true}, {npy.Int8, true}, {npy.Uint8, true},
		{npy.Float32, false}, {npy.Float64, false}, {npy.Bool, false},
	} {
		b := make([]byte, len(want)*tc.d.Size())
		for i, v := range want {
			switch tc.d.Size() {
			case 8:
				binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
			case 4:
				binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
			case 2:
				binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
			case 1:
				b[i] = byte(v)
			}
		}
		p := filepath.Join(dir, tc.d.String()+".npy")
		if _, err := npy.WriteFile(p, tc.d, []int64{int64(len(want))}, b); err != nil {
			t.Fatal(err)
		}
		got, err := readNodeList(p, nil)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%v ids: %v", tc.d, err)
		case tc.ok && !slices.Equal(got, want):
			t.Errorf("%v ids: got %v, want %v", tc.d, got, want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "dtype "+tc.d.String())):
			t.Errorf("%v ids: %v, want a refusal naming the dtype", tc.d, err)
		}
	}
}
