package iostat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	in := "rchar: 100\nwchar: 20\nsyscr: 3\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n"
	c, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c != (Counters{RChar: 100, WChar: 20, ReadBytes: 4096, WriteBytes: 8192}) {
		t.Fatalf("got %+v", c)
	}
	d := c.Sub(Counters{RChar: 50, ReadBytes: 96})
	if d.RChar != 50 || d.ReadBytes != 4000 {
		t.Fatalf("Sub: %+v", d)
	}
	for _, bad := range []string{"", "rchar: 1\n", "read_bytes: x\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := Parse([]byte("rchar: 1\n")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("missing read_bytes: %v, want ErrUnavailable", err)
	}
}

// TestSelf checks that the counters of this process move when it writes
// and reads a file (rchar/wchar; read_bytes depends on the page cache and
// is not asserted). Without /proc the test skips.
func TestSelf(t *testing.T) {
	before, err := Self()
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	after, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d.RChar < 1<<20 || d.WChar < 1<<20 {
		t.Fatalf("rchar/wchar did not count 1 MiB each: %+v", d)
	}
}
