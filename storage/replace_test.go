package storage_test

import (
	"errors"
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

// TestReplaceSwapInterrupted: a swap that fails half way (a rename in the
// dataset directory refused) keeps the complete new dataset in its staging
// directory, Open says so, and the next Create there, once the process is
// gone, finishes the swap: the new dataset, whole. A staging directory
// whose pid now names another process (started at another time) counts
// as gone.
func TestReplaceSwapInterrupted(t *testing.T) {
	dir, staged := interruptedSwap(t)
	// An import's scratch directory left in the staging directory goes
	// with it, not into the dataset (C10).
	if err := os.MkdirAll(filepath.Join(staged, ".import-tmp-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A staging directory of a reused pid (pid 1 runs, but did not start
	// at tick 99999999) is stale too: removed, as it has no journal.
	if err := os.MkdirAll(filepath.Join(dir, ".staged-1-99999999-reused", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Create(dir, nil); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("Create after recovery: %v, want ErrExists (the swap finished)", err)
	}
	d, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Manifest().Name != "new" || d.NumNodes() != 2 {
		t.Errorf("after recovery: %q with %d nodes, want the new dataset", d.Manifest().Name, d.NumNodes())
	}
	if rep, err := storage.Validate(dir, nil); err != nil || !rep.OK() {
		t.Errorf("the recovered dataset does not validate: %v %v", err, rep)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{"dataset.json", "indices.npy", "indptr.npy"}; !slices.Equal(left, want) {
		t.Errorf("after recovery the directory holds %v, want %v (old arrays, staging directories gone)", left, want)
	}
}

// TestReplaceDropsStaleDevice: device.json survives a replacement with
// features of the same row size, and goes with one of another size (it
// was probed for those rows, and training would refuse it).
func TestReplaceDropsStaleDevice(t *testing.T) {
	dir := t.TempDir()
	adj := [][]int64{{1}, {0}}
	storagetest.Write(t, dir, storagetest.Graph{Name: "a", Adj: adj, FeatDim: 4})
	if err := storage.WriteDeviceProfile(dir, storage.DefaultDeviceProfile(16)); err != nil {
		t.Fatal(err)
	}
	has := func() bool { _, err := os.Stat(filepath.Join(dir, storage.FileDevice)); return err == nil }
	storagetest.Write(t, dir, storagetest.Graph{Name: "b", Adj: adj, FeatDim: 4})
	if !has() {
		t.Error("device.json gone after a replacement with rows of the same size")
	}
	storagetest.Write(t, dir, storagetest.Graph{Name: "c", Adj: adj, FeatDim: 8})
	if has() {
		t.Error("device.json of 16-byte rows kept beside 32-byte rows")
	}
}

// interruptedSwap is a dataset directory whose replacement's swap failed
// half way (a rename refused), with the process gone: the staging
// directory's name carries a pid no process has. It checks what the
// failure leaves: an error naming the staging directory, which Abort
// keeps, and Open naming the pending replacement.
func interruptedSwap(t *testing.T) (dir, staged string) {
	t.Helper()
	dir = t.TempDir()
	writeTiny(t, dir, newTiny(), "float32")
	b, err := storage.Create(dir, &storage.CreateOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	csr, err := b.CreateCSR(2)
	if err != nil {
		t.Fatal(err)
	}
	for v, nb := range [][]int64{{1}, {0}} {
		if err := csr.Append(int64(v), nb); err != nil {
			t.Fatal(err)
		}
	}
	if err := csr.Commit(); err != nil {
		t.Fatal(err)
	}
	// The old indptr.npy turned into a non-empty directory: the swap's
	// rename over it fails after the old manifest is gone.
	block := filepath.Join(dir, storage.FileIndptr)
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = b.Finish(storage.Manifest{Name: "new", NumNodes: 2, NumEdges: 2})
	if err == nil || !strings.Contains(err.Error(), "the new dataset is complete in") {
		t.Fatalf("swap over a directory: %v, want the staging directory named", err)
	}
	b.Abort() // as the commands do on failure: it must keep the new dataset
	pending := storage.PendingReplacement(dir)
	if pending == "" {
		t.Fatal("no pending replacement after a failed swap")
	}
	if _, err := storage.Open(dir, nil); !errors.Is(err, storage.ErrNotDataset) || !strings.Contains(err.Error(), "finishes it") {
		t.Errorf("Open during the interrupted swap: %v", err)
	}
	// The cause mended, and the process gone (a pid no process has).
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	staged = filepath.Join(dir, ".staged-2147483646-0-gone")
	if err := os.Rename(pending, staged); err != nil {
		t.Fatal(err)
	}
	return dir, staged
}

// TestReplaceJournalChecked: a journal that names a phase finishSwap does
// not know, or a file to remove that is no plain dataset file's name (a
// path out of the directory, a hidden file) or is one of the new
// dataset's arrays, is refused with the staging directory named, and
// nothing is removed; a sound one finishes.
func TestReplaceJournalChecked(t *testing.T) {
	for _, tc := range []struct {
		journal, want string
	}{
		{`{"phase":"moving","remove":["../victim.txt"]}`, `remove[0] "../victim.txt" is not the name of a dataset's file`},
		{`{"phase":"moving","remove":[".lock"]}`, `remove[0] ".lock"`},
		{`{"phase":"moving","remove":["indptr.npy"]}`, `remove[0] "indptr.npy" is an array of the new dataset`},
		{`{"phase":"bogus"}`, `phase "bogus"`},
		{`{}`, `phase ""`},
		{`{"phase":"moving","remove":["labels.npy","features.npy"]}`, ""},
	} {
		dir, staged := interruptedSwap(t)
		victim := filepath.Join(filepath.Dir(dir), "victim.txt")
		if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(staged, ".swap.json"), []byte(tc.journal), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := storage.Create(dir, &storage.CreateOptions{Force: true})
		if tc.want == "" {
			if err != nil {
				t.Errorf("journal %s: %v", tc.journal, err)
			} else if d, err := storage.Open(dir, nil); err != nil || d.Manifest().Name != "new" {
				t.Errorf("journal %s: after recovery: %v", tc.journal, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), staged) {
			t.Errorf("journal %s: %v, want %q and the staging directory", tc.journal, err, tc.want)
		}
		if _, err := os.Stat(victim); err != nil {
			t.Errorf("journal %s: the file outside the dataset is gone", tc.journal)
		}
		if _, err := os.Stat(filepath.Join(staged, storage.FileIndptr)); err != nil {
			t.Errorf("journal %s: the staged indptr.npy is gone: %v", tc.journal, err)
		}
	}
}
