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
	for _, args := range [][]string{
		{"partition", dir, "--parts", "4"},
		{"profile", dir, "--selection", "random", "--fanouts", "2"},
	} {
		if _, _, err := run(t, args...); err != nil {
			t.Fatal(err)
		}
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
		{"plan", dir, "--mem", "1MiB", "--out", filepath.Join(dir, "mine.json")},
		{"probe", dir, "--duration", "20ms"},
	} {
		_, _, err := run(t, args...)
		if !errors.Is(err, dirlock.ErrInUse) || err.Error() != want {
			t.Errorf("%v while locked: %v, want %q", args, err, want)
		}
	}
	ck := filepath.Join(tmp, "ck")
	for _, args := range [][]string{
		{"info", dir},
		{"validate", dir},
		{"plan", dir, "--mem", "1MiB", "--out", filepath.Join(tmp, "plan.json")},
		{"probe", dir, "--duration", "20ms", "--dry-run"},
		{"relabel", dir, filepath.Join(tmp, "pm"), "--partition", "fennel"},
		// train writes its profile into DIR only when it can lock it;
		// otherwise it keeps it in memory (and the plan goes to the
		// checkpoint directory either way).
		{"train", dir, "--epochs", "1", "--selection", "random", "--layers", "1", "--fanouts", "2", "--hidden", "8", "--mem", "256MiB", "--reprofile", "--checkpoint", ck},
	} {
		if _, _, err := run(t, args...); err != nil {
			t.Errorf("reader %v while locked: %v", args, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ck, "plan.json")); err != nil {
		t.Errorf("train's plan: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "profile", "train")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("train saved a profile into a locked dataset: %v", err)
	}
	// relabel is the writer of its OUT.
	out := filepath.Join(tmp, "pm2")
	olk, err := dirlock.Acquire(out)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "relabel", dir, out, "--partition", "fennel")
	if wantOut := fmt.Sprintf("%s is in use by pid %d", out, os.Getpid()); !errors.Is(err, dirlock.ErrInUse) || err.Error() != wantOut {
		t.Errorf("relabel into a locked OUT: %v, want %q", err, wantOut)
	}
	olk.Release()
	lk.Release()
	if _, _, err := run(t, "partition", dir, "--parts", "4", "--force"); err != nil {
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
