package storage_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestCreateForceReplaces: replacing a dataset (CreateOptions.Force)
// leaves the old one whole and valid until Finish, through an abandoned
// run (Abort) and a killed one (its staging directory removed by the next
// Create); a completed run swaps the new dataset in, removes the old
// arrays it does not list and the derived directories, and keeps the
// directory's other entries.
func TestCreateForceReplaces(t *testing.T) {
	dir := t.TempDir()
	writeTiny(t, dir, newTiny(), "float32")
	for _, p := range []string{"partitions/fennel/manifest.json", "profile/default/x", "checkpoints/ck.bin", "plan.json"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldMan, err := os.ReadFile(filepath.Join(dir, storage.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	stillOld := func(when string) {
		t.Helper()
		m, err := os.ReadFile(filepath.Join(dir, storage.ManifestName))
		if err != nil || string(m) != string(oldMan) {
			t.Fatalf("%s: manifest %v, changed %v", when, err, string(m) != string(oldMan))
		}
		rep, err := storage.Validate(dir, nil)
		if err != nil || !rep.OK() {
			t.Fatalf("%s: the old dataset does not validate: %v %v", when, err, rep)
		}
		if _, err := os.Stat(filepath.Join(dir, "partitions/fennel/manifest.json")); err != nil {
			t.Fatalf("%s: the old partitioning is gone: %v", when, err)
		}
	}
	staging := func() []string {
		t.Helper()
		ents, _ := os.ReadDir(dir)
		var s []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".staged-") {
				s = append(s, e.Name())
			}
		}
		return s
	}
	// Half written, then abandoned.
	start := func() *storage.Builder {
		t.Helper()
		b, err := storage.Create(dir, &storage.CreateOptions{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if !b.Replacing() || b.Dir() == dir {
			t.Fatalf("Replacing %v, Dir %s: want a staging directory", b.Replacing(), b.Dir())
		}
		w, err := b.CreateArray(storage.FileFeatures, npy.Float32, []int64{3})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFloat32s([]float32{7, 7, 7}); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start()
	stillOld("while a replacement is written")
	b.Abort()
	stillOld("after Abort")
	if s := staging(); len(s) != 0 {
		t.Errorf("after Abort: staging directories %v", s)
	}
	// Killed: its staging directory carries a PID that no longer runs.
	b = start()
	if err := os.Rename(b.Dir(), filepath.Join(dir, ".staged-2147483646-killed")); err != nil {
		t.Fatal(err)
	}
	stillOld("after a killed replacement")
	b2, err := storage.Create(dir, &storage.CreateOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := staging(); len(s) != 1 || s[0] != filepath.Base(b2.Dir()) {
		t.Errorf("the next Create left staging directories %v, want only its own", s)
	}
	b2.Abort()
	// Completed: a graph without labels or splits replaces the tiny one.
	d := storagetest.Write(t, dir, storagetest.Graph{Name: "new", Adj: [][]int64{{1}, {0}, {}}, Symmetrized: true})
	if d.NumNodes() != 3 || d.Manifest().Name != "new" {
		t.Fatalf("after the swap: %d nodes, name %q", d.NumNodes(), d.Manifest().Name)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	slices.Sort(left)
	want := []string{"checkpoints", "dataset.json", "indices.npy", "indptr.npy", "plan.json"}
	if !slices.Equal(left, want) {
		t.Errorf("after the swap the directory holds %v, want %v (old arrays, derived directories and staging gone; other entries kept)", left, want)
	}
	if rep, err := storage.Validate(dir, nil); err != nil || !rep.OK() {
		t.Errorf("the new dataset does not validate: %v %v", err, rep)
	}
}
