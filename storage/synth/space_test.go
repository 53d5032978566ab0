package synth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateChecksSpace: a file system with less free than the
// features, labels and indptr need is refused before anything is
// written, naming both numbers, and leaves no file (sweep 26, P3: a
// 3e9-node graph on a 57 GB disk started writing); with room it
// generates. The sizes are counted by hand: 1000 nodes of 8 float32
// features (32,000 B), labels (4,000 B), indptr (8,008 B), three headers.
func TestGenerateChecksSpace(t *testing.T) {
	const sure = 32000 + 4000 + 8008 + 3*128
	old := freeBytes
	defer func() { freeBytes = old }()
	for _, c := range []struct {
		free int64
		ok   bool
	}{{sure - 1, false}, {sure, true}, {1 << 40, true}} {
		freeBytes = func(string) (int64, error) { return c.free, nil }
		dir := filepath.Join(t.TempDir(), "g")
		_, err := Generate(dir, Config{Nodes: 1000, FeatDim: 8, Classes: 2, AvgDegree: 4}, &Options{MemBytes: MinMemBytes})
		if c.ok != (err == nil) {
			t.Errorf("%d bytes free: %v", c.free, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "need 44392 bytes") {
				t.Errorf("%d bytes free: %v, want ErrNoSpace naming 44392 bytes", c.free, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("%d bytes free: refused, but left %v in %s", c.free, ents, dir)
			}
		}
	}
}
