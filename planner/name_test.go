package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidNameLength: a profile name is at most maxNameBytes, so that
// saving it can stage ".NAME.new"; before, profile --name with 252 bytes
// ran the profiling epoch and then failed with "unlinkat .NAME.new: file
// name too long".
func TestValidNameLength(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		n  int
		ok bool
	}{
		{1, true},
		{maxNameBytes, true},
		{maxNameBytes + 1, false},
	} {
		name := strings.Repeat("q", tc.n)
		if got := validName(name); got != tc.ok {
			t.Fatalf("%d-byte name: validName %v, want %v", tc.n, got, tc.ok)
		}
		if tc.ok {
			if err := os.Mkdir(filepath.Join(dir, "."+name+".new"), 0o755); err != nil {
				t.Errorf("%d-byte name allowed, but its staging directory cannot be made: %v", tc.n, err)
			}
		}
	}
}
