package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
