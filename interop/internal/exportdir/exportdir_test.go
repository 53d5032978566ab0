package exportdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/outpath"
)

func TestPrepare(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	out := filepath.Join(t.TempDir(), "out")
	owned := []string{"edges"}
	if err := Prepare(src, out, "meta", owned, false); err != nil {
		t.Fatal(err)
	}
	// An interrupted export (owned entries, no metadata) is cleaned.
	os.MkdirAll(filepath.Join(out, "edges"), 0o755)
	os.WriteFile(filepath.Join(out, "edges", "x"), []byte("x"), 0o644)
	if err := Prepare(src, out, "meta", owned, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "edges")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("owned entry left: %v", err)
	}
	// A complete export needs force.
	os.WriteFile(filepath.Join(out, "meta"), []byte("m"), 0o644)
	if err := Prepare(src, out, "meta", owned, false); !errors.Is(err, ErrExists) {
		t.Fatalf("complete export without force: %v", err)
	}
	// Foreign files need force, and force leaves them alone.
	os.WriteFile(filepath.Join(out, "mine.txt"), []byte("keep"), 0o644)
	if err := Prepare(src, out, "meta", owned, false); !errors.Is(err, ErrExists) {
		t.Fatalf("foreign file without force: %v", err)
	}
	if err := Prepare(src, out, "meta", owned, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "meta")); !errors.Is(err, os.ErrNotExist) {
		t.Error("metadata survived a forced prepare")
	}
	if b, err := os.ReadFile(filepath.Join(out, "mine.txt")); err != nil || string(b) != "keep" {
		t.Errorf("foreign file: %q %v", b, err)
	}
	// Never into the dataset, under it, or around it, even with force:
	// the dataset's own "edges" must survive.
	if err := os.MkdirAll(filepath.Join(src, "edges", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{src, filepath.Join(src, "edges"), filepath.Join(src, "edges", "..", "edges", "sub"), filepath.Dir(src)} {
		if err := Prepare(src, o, "meta", owned, true); !errors.Is(err, outpath.ErrInput) {
			t.Errorf("Prepare into %s: %v, want outpath.ErrInput", o, err)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "edges", "sub")); err != nil {
		t.Errorf("the dataset's entry: %v", err)
	}
}

func TestLinkOrCopy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a")
	os.WriteFile(src, []byte("data"), 0o644)
	linked, err := LinkOrCopy(context.Background(), src, filepath.Join(dir, "b"))
	if err != nil || !linked {
		t.Fatalf("same directory: linked %v, %v", linked, err)
	}
	if err := Copy(context.Background(), src, filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c"} {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); string(b) != "data" {
			t.Errorf("%s = %q", n, b)
		}
	}
	a, _ := os.Stat(src)
	b, _ := os.Stat(filepath.Join(dir, "b"))
	c, _ := os.Stat(filepath.Join(dir, "c"))
	if !os.SameFile(a, b) || os.SameFile(a, c) {
		t.Error("b should be a hard link of a, c a copy")
	}
}

// TestLinkOrCopySymlink: a src that is a symbolic link, absolute or
// relative to its own directory (a dataset sharing another's
// features.npy), gives dst a hard link of the file it names, readable
// from dst's directory.
func TestLinkOrCopySymlink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target func(dir string) string
	}{
		{"relative", func(string) string { return filepath.Join("..", "real", "a") }},
		{"absolute", func(dir string) string { return filepath.Join(dir, "real", "a") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"real", "ds", "out/node_data"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			real := filepath.Join(dir, "real", "a")
			if err := os.WriteFile(real, []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, "ds", "a")
			if err := os.Symlink(tc.target(dir), src); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "out", "node_data", "b")
			linked, err := LinkOrCopy(context.Background(), src, dst)
			if err != nil || !linked {
				t.Fatalf("linked %v, %v", linked, err)
			}
			if b, err := os.ReadFile(dst); err != nil || string(b) != "data" {
				t.Fatalf("dst reads %q, %v", b, err)
			}
			l, err := os.Lstat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if l.Mode()&os.ModeSymlink != 0 {
				t.Fatalf("dst has mode %v: a copy of the symlink, not a link of the file", l.Mode())
			}
			a, _ := os.Stat(real)
			if !os.SameFile(a, l) {
				t.Error("dst is not a hard link of the file src names")
			}
		})
	}
}

// TestPrepareRefusesDataset: an OUT that is an ssdgnn dataset is refused
// even with force, and keeps the entries an export owns by the same
// names (a DistDGL export's partitions/ removed the dataset's
// partitionings).
func TestPrepareRefusesDataset(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	out := t.TempDir()
	for _, f := range []string{"dataset.json", "partitions/fennel/manifest.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(out, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, force := range []bool{false, true} {
		err := Prepare(src, out, "metadata.json", []string{"edges", "partitions"}, force)
		if !errors.Is(err, ErrDataset) {
			t.Errorf("Prepare into a dataset (force %v): %v, want ErrDataset", force, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "partitions/fennel/manifest.json")); err != nil {
		t.Errorf("the dataset's partitioning is gone: %v", err)
	}
}

// TestAbandon: Abandon removes what a failed export wrote after Prepare,
// its metadata file included (an export fails with it in place when the
// directory's fsync after its rename fails), and leaves the files an
// export does not write (kept by a forced Prepare) and out itself.
// Before, the metadata stayed beside the removed entries: a
// complete-looking export without its files.
func TestAbandon(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	out := filepath.Join(t.TempDir(), "out")
	owned := []string{"edges", "node_data"}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "mine.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(src, out, "meta", owned, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"edges/e-0.txt", "node_data/feat.npy", "meta"} {
		p := filepath.Join(out, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Abandon(out, "meta", owned)
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "mine.txt" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("after Abandon, out holds %v, want only the foreign mine.txt", names)
	}
}
