package partition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlainNameLength: a partitioning name is at most maxNameBytes, so
// that --force's staging names (".NAME.new", ".NAME.old") can be made;
// before, a 252-byte name was partitioned once and every --force then
// failed with "mkdir .NAME.new: file name too long".
func TestPlainNameLength(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		n  int
		ok bool
	}{
		{1, true},
		{maxNameBytes, true},
		{maxNameBytes + 1, false},
		{255, false},
	} {
		name := strings.Repeat("q", tc.n)
		if got := plainName(name); got != tc.ok {
			t.Fatalf("%d-byte name: plainName %v, want %v", tc.n, got, tc.ok)
		}
		if !tc.ok {
			continue
		}
		staged, old := replaceNames(filepath.Join(dir, name))
		for _, d := range []string{staged, old} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Errorf("%d-byte name allowed, but its staging directory cannot be made: %v", tc.n, err)
			}
		}
	}
}
