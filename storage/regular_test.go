package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestOpenNotRegular: a dataset file that is not a regular file is
// refused by Open naming it and its kind. Before, a named pipe in place
// of labels.npy or dataset.json blocked the open until a writer came
// (info hung, past SIGINT and SIGTERM), and a directory or a symlink to
// /dev/null was reported by the size it happened to have ("size 4096
// bytes, manifest says 16128").
func TestOpenNotRegular(t *testing.T) {
	for _, tc := range []struct {
		name, file, kind string
		make             func(path string) error
	}{
		{"pipe", storage.FileLabels, "a named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"manifest pipe", storage.ManifestName, "a named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"directory", storage.FileLabels, "a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"device", storage.FileLabels, "a character device", func(p string) error { return os.Symlink("/dev/null", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := storagetest.Write(t, dir, storagetest.Graph{Adj: [][]int64{{1}, {0}}, Symmetrized: true, FeatDim: 2, Labels: []int32{0, 1}, NumClasses: 2})
			d.Close()
			path := filepath.Join(dir, tc.file)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			d2, err := storage.Open(dir, nil)
			if err == nil {
				d2.Close()
				t.Fatalf("%s as %s opened", tc.file, tc.kind)
			}
			if !errors.Is(err, storage.ErrMismatch) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file but "+tc.kind) {
				t.Errorf("%s as %s: %v", tc.file, tc.kind, err)
			}
		})
	}
}
