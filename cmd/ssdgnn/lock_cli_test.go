package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/dirlock"
)

// Every command that writes into a dataset directory fails at once, with
// the holder's pid, while another writer holds it; readers are not
// blocked.
func TestWritersLockDatasetDir(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "500", "--feat-dim", "4", "--classes", "2"); err != nil {
		t.Fatal(err)
	}
	edges := filepath.Join(tmp, "e.txt")
	if err := os.WriteFile(edges, []byte("0 1\n1 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lk, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	want := fmt.Sprintf("%s is in use by pid %d", dir, os.Getpid())
	for _, args := range [][]string{
		{"gen", dir, "--nodes", "100", "--force"},
		{"import", "edgelist", edges, dir, "--force"},
		{"partition", dir, "--parts", "4"},
		{"profile", dir, "--selection", "random", "--fanouts", "2"},
		{"plan", dir, "--mem", "1MiB"},
	} {
		_, _, err := run(t, args...)
		if !errors.Is(err, dirlock.ErrInUse) || err.Error() != want {
			t.Errorf("%v while locked: %v, want %q", args, err, want)
		}
	}
	for _, args := range [][]string{{"info", dir}, {"validate", dir}} {
		if _, _, err := run(t, args...); err != nil {
			t.Errorf("reader %v while locked: %v", args, err)
		}
	}
	lk.Release()
	if _, _, err := run(t, "partition", dir, "--parts", "4"); err != nil {
		t.Fatalf("partition after release: %v", err)
	}
	if _, _, err := run(t, "validate", dir); err != nil {
		t.Fatalf("validate with a .lock file: %v", err)
	}
}

// Two trainers cannot write one checkpoint directory.
func TestTrainLocksCheckpointDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "300", "--feat-dim", "4", "--classes", "2"); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "checkpoints")
	lk, err := dirlock.Acquire(ck)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	_, _, err = run(t, "train", dir, "--epochs", "1", "--selection", "random")
	if want := fmt.Sprintf("%s is in use by pid %d", ck, os.Getpid()); !errors.Is(err, dirlock.ErrInUse) || err.Error() != want {
		t.Fatalf("train while its checkpoint dir is locked: %v, want %q", err, want)
	}
}
