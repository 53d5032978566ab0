package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCommitReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("new content")); err != nil {
		t.Fatal(err)
	}
	// Until Commit, readers see the old content; the new bytes sit in a
	// temporary file in the same directory.
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("before commit: %q", b)
	}
	if !IsTemp(f.TempName()) || filepath.Dir(f.TempName()) != dir {
		t.Fatalf("temp name %q", f.TempName())
	}
	if _, err := f.WriteAt([]byte("N"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "New content" {
		t.Fatalf("after commit: %q", b)
	}
	if _, err := os.Stat(f.TempName()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left: %v", err)
	}
	// A committed file rejects further use; Abort after Commit is a no-op.
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrDone) {
		t.Fatalf("write after commit: %v", err)
	}
	if err := f.Commit(); !errors.Is(err, ErrDone) {
		t.Fatalf("second commit: %v", err)
	}
	if err := f.Abort(); err != nil {
		t.Fatalf("abort after commit: %v", err)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.bin")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("partial"))
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("abort left %v", ents)
	}
}

func TestCleanTempsRemovesCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	// A writer that "crashed": its temporary file stays behind.
	f, err := Create(filepath.Join(dir, "c.npy"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half"))
	f.f.Close() // simulate the process dying without Commit or Abort
	keep := filepath.Join(dir, "keep.npy")
	if err := WriteFile(keep, []byte("done")); err != nil {
		t.Fatal(err)
	}
	n, err := CleanTemps(dir)
	if err != nil || n != 1 {
		t.Fatalf("CleanTemps removed %d, err %v", n, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "keep.npy" {
		t.Fatalf("left %v", ents)
	}
}

func TestCreateInMissingDir(t *testing.T) {
	if _, err := Create(filepath.Join(t.TempDir(), "no", "such", "f")); err == nil {
		t.Fatal("Create in a missing directory succeeded")
	}
}

// TestModeFollowsUmask: a committed file has mode 0666 less the umask, as
// os.Create's would, not os.CreateTemp's 0600.
func TestModeFollowsUmask(t *testing.T) {
	for _, c := range []struct{ umask, want int }{{0o022, 0o644}, {0o077, 0o600}, {0o002, 0o664}} {
		old := syscall.Umask(c.umask)
		path := filepath.Join(t.TempDir(), "f")
		err := WriteFile(path, []byte("x"))
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(st.Mode().Perm()); got != c.want {
			t.Errorf("umask %#o: mode %#o, want %#o", c.umask, got, c.want)
		}
	}
}

// TestDeferredCommit: a deferred Commit puts the content under the final
// name and leaves no temporary file, like Commit; SyncFS then succeeds on
// the directory and names a path it cannot open.
func TestDeferredCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chunk.txt")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Defer()
	if _, err := f.Write([]byte("0 1\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "0 1\n" {
		t.Fatalf("after a deferred Commit %s reads %q, %v", path, got, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Fatalf("after a deferred Commit the directory holds %d entries, want the file alone", len(ents))
	}
	if err := f.Commit(); !errors.Is(err, ErrDone) {
		t.Errorf("second Commit: %v, want ErrDone", err)
	}
	if err := SyncFS(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncFS(filepath.Join(dir, "gone")); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("SyncFS of a missing path: %v, want an error naming it", err)
	}
}

// TestCleanStale: the temporary files of a writer that no longer runs go;
// this process's, one named before the stamp and another path's stay.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "preds.npy")
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Skipf("no child process to stand for a killed writer: %v", err)
	}
	dead := fmt.Sprintf("%d-0-12345", child.Process.Pid)
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk("preds.npy" + tmpMarker + dead)
	old := mk("preds.npy" + tmpMarker + "987654321")
	other := mk("logits.npy" + tmpMarker + dead)
	live, err := Create(path) // this process's, still being written
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	n, err := CleanStale(path)
	if err != nil || n != 1 {
		t.Fatalf("CleanStale removed %d, %v; want the dead writer's one", n, err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v, want it removed", stale, err)
	}
	for _, p := range []string{old, other, live.TempName()} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
}
