package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSecondWriterFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
	}{{"existing dir", true}, {"new dir", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if tc.exists {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Acquire(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Acquire(dir)
			want := fmt.Sprintf("%s is in use by pid %d", dir, os.Getpid())
			if !errors.Is(err, ErrInUse) || err.Error() != want {
				t.Fatalf("second Acquire: %v, want %q matching ErrInUse", err, want)
			}
			// The holder writes into the directory: it must stay, with .lock.
			if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			l2, err := Acquire(dir)
			if err != nil {
				t.Fatalf("Acquire after Release: %v", err)
			}
			l2.Release()
			if _, err := os.Stat(filepath.Join(dir, Name)); err != nil {
				t.Fatalf("lock file: %v", err)
			}
		})
	}
}

func TestReleaseRemovesDirItCreatedWhenEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s after Release: %v, want not exist", dir, err)
	}
}

func TestNilRelease(t *testing.T) {
	var l *Lock
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestNotWritable(t *testing.T) {
	for _, tc := range []struct {
		err      error
		writable bool // false: a *NotWritableError
	}{
		{&os.PathError{Op: "open", Path: "d/.lock", Err: syscall.EROFS}, false},
		{&os.PathError{Op: "mkdir", Path: "d", Err: syscall.EACCES}, false},
		{&os.PathError{Op: "open", Path: "d/.lock", Err: syscall.EPERM}, false},
		{&os.PathError{Op: "open", Path: "d/.lock", Err: syscall.ENOSPC}, true},
		{&os.PathError{Op: "mkdir", Path: "d", Err: syscall.ENOTDIR}, true},
	} {
		err := failed("d", tc.err)
		var nw *NotWritableError
		if got := errors.As(err, &nw); got == tc.writable || errors.Is(err, ErrNotWritable) == tc.writable {
			t.Errorf("%v: not writable %v, want %v (%v)", tc.err, got, !tc.writable, err)
			continue
		}
		if nw != nil && (nw.Dir != "d" || !strings.HasPrefix(err.Error(), "d is not writable (")) {
			t.Errorf("%v: %q names %q", tc.err, err, nw.Dir)
		}
	}
	// A real refusal, where this process is subject to permissions.
	if os.Geteuid() == 0 {
		t.Log("running as root: permissions do not refuse; the read-only directory case is not run")
		return
	}
	ro := t.TempDir()
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o755)
	for _, dir := range []string{ro, filepath.Join(ro, "new")} {
		if _, err := Acquire(dir); !errors.Is(err, ErrNotWritable) {
			t.Errorf("Acquire(%s) in a read-only directory: %v, want ErrNotWritable", dir, err)
		}
	}
}

// TestTransient: a transient lock excludes a second writer as any lock
// does, and Release leaves the directory's files as they were: no lock
// file, the others untouched; a fresh directory that got nothing else is
// removed; the next Acquire works.
func TestTransient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metadata.yaml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := AcquireTransient(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireTransient(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("second AcquireTransient: %v, want ErrInUse", err)
	}
	if _, err := Acquire(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("Acquire beside a transient lock: %v, want ErrInUse", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "metadata.yaml" {
		t.Fatalf("after Release: %v %v, want only metadata.yaml", ents, err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	l, err = AcquireTransient(fresh)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a fresh directory left after a transient lock: %v", err)
	}
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after a transient Release: %v", err)
	}
	l.Release()
}

// TestTransientKeepsOthersLock: a transient lock taken where a lock file
// already was (another writer's directory) leaves it on Release.
func TestTransientKeepsOthersLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	l, err = AcquireTransient(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, Name)); err != nil {
		t.Fatalf("the directory's own lock file was removed: %v", err)
	}
}
