package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenNamesForeignLayouts: a directory holding another tool's layout
// (an export ssdgnn wrote, an OGB or IGB download) is still
// ErrNotDataset, and the error says what it holds and what to do; before,
// Open said only "not a dataset (no dataset.json)".
func TestOpenNamesForeignLayouts(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"metadata.yaml", "import graphbolt"},
		{"metadata.json", "does not import"},
		{"partition_meta.json", "distributed partitioning"},
		{"raw/edge.csv.gz", "import ogb"},
		{"raw/data.npz", "import ogb"},
		{"paper/node_feat.npy", "import npy"},
		{"unrelated.txt", ""},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, tc.file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, nil)
		if !errors.Is(err, ErrNotDataset) {
			t.Fatalf("%s: %v, want ErrNotDataset", tc.file, err)
		}
		if tc.want == "" {
			if strings.Contains(err.Error(), "holds") {
				t.Errorf("%s: %v names a layout", tc.file, err)
			}
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.file, err, tc.want)
		}
	}
}
