// Package atomicfile writes files so that a reader, or a process restarted
// after a crash, sees either the old content or the complete new content of
// a path, never a partial file.
//
// A File is written under a temporary name in the destination directory
// (NAME.tmp-PID-START-RANDOM: the writer's pid and start time, see
// CleanStale). Commit fsyncs it, renames it over NAME and fsyncs the
// directory. Abort, or a crash, leaves only the temporary file, which
// CleanTemps removes.
//
// A File that Defer was called on is the exception: its Commit renames
// without either fsync, so a crash may leave NAME empty, absent or old
// even though Commit returned. It is for writers of many files that
// vouch for them all with one file written after them (an export's
// metadata): they call SyncFS after the last deferred Commit and before
// writing that file with a plain Commit (interop/distdgl does).
//
// Invariants and caveats: the temporary file lives in the destination
// directory, so the rename never crosses file systems; every failed Commit
// removes the temporary file; Commit and Abort are each effective once and
// the File is then unusable (ErrDone). CleanTemps removes every temporary
// name in a directory, including those of writers still running there, so
// call it only while no File in that directory is open (package storage
// calls it from Create, before any array is written).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/pidstamp"
)

// tmpMarker separates the final name from the random suffix.
const tmpMarker = ".tmp-"

// MaxNameBytes is the longest final name (base name, in bytes) whose
// temporary name fits the 255 bytes a Linux file system allows a name:
// the suffix is ".tmp-" (5), the stamp "PID-START" (at most 7 + 1 + 20)
// and "-RANDOM" (at most 11), 44 bytes in all. A longer name fails at
// Create with ENAMETOOLONG, which for a command's output comes after all
// its work: check it up front (outpath.CheckParent does).
const MaxNameBytes = 255 - 44

// ErrDone is returned when a committed or aborted File is used again.
var ErrDone = errors.New("atomicfile: file already committed or aborted")

// File is a file being written atomically. It is not safe for concurrent
// use.
type File struct {
	f        *os.File
	final    string
	done     bool
	deferred bool // Defer: Commit does not fsync
}

// Create starts writing path. The directory must exist. The file gets
// mode 0666 less the process's umask, as os.Create's files do (not
// os.CreateTemp's 0600): datasets and exports are shared with other users
// and tools.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, base+tmpMarker+pidstamp.Stamp()+"-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) && try < 10000 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("atomicfile: %w", err)
		}
		return &File{f: f, final: path}, nil
	}
}

// Name is the final path.
func (f *File) Name() string { return f.final }

// TempName is the temporary path being written.
func (f *File) TempName() string { return f.f.Name() }

// Write implements io.Writer.
func (f *File) Write(p []byte) (int, error) {
	if f.done {
		return 0, ErrDone
	}
	return f.f.Write(p)
}

// WriteAt implements io.WriterAt.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if f.done {
		return 0, ErrDone
	}
	return f.f.WriteAt(p, off)
}

// Sync makes what was written durable before Commit, so that a writer of
// several files learns of a full disk or a failing device before it
// commits any of them (Commit's own fsync then has little left to do).
func (f *File) Sync() error {
	if f.done {
		return ErrDone
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: sync %s: %w", f.final, err)
	}
	return nil
}

// Commit makes the written content visible under the final name.
func (f *File) Commit() error {
	if f.done {
		return ErrDone
	}
	f.done = true
	tmp := f.f.Name()
	if !f.deferred {
		if err := f.f.Sync(); err != nil {
			f.f.Close()
			os.Remove(tmp)
			return fmt.Errorf("atomicfile: sync %s: %w", f.final, err)
		}
	}
	if err := f.f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: close %s: %w", f.final, err)
	}
	if err := os.Rename(tmp, f.final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: %w", err)
	}
	if f.deferred {
		return nil
	}
	return SyncDir(filepath.Dir(f.final))
}

// Defer makes Commit rename the file into place without fsyncing it or
// its directory: the rename is atomic, but not durable until SyncFS (or
// a crash may leave the name empty or absent). For writers of many small
// files that vouch for them all with one file written last (a manifest,
// an export's metadata): they call SyncFS before writing it. Two fsyncs
// a file bounded an export of 12,003 files at 317 a second.
func (f *File) Defer() { f.deferred = true }

// SyncFS makes every write to the file system holding path durable
// (syncfs(2)): the files committed after Defer among them, with their
// names.
func SyncFS(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("atomicfile: syncfs %s: %w", path, err)
	}
	return nil
}

// Abort discards the file. It is a no-op after Commit, so it can be
// deferred.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	f.f.Close()
	return os.Remove(f.f.Name())
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	return f.Commit()
}

// SyncDir fsyncs a directory so that renames in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: sync dir %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name looks like a temporary file of this package.
func IsTemp(name string) bool { return strings.Contains(filepath.Base(name), tmpMarker) }

// CleanTemps removes temporary files left in dir by crashed writers. It
// returns how many it removed.
func CleanTemps(dir string) (int, error) {
	return removeTemps(dir, func(string, string) bool { return true })
}

// CleanTempsOf is CleanTemps for the temporary files of the given final
// names only (base names in dir): for a directory other writers may share,
// whose own temporary files must stay.
func CleanTempsOf(dir string, names ...string) (int, error) {
	return removeTemps(dir, func(final, _ string) bool { return slices.Contains(names, final) })
}

// CleanStale removes the temporary files of path (NAME.tmp-…, beside it)
// whose writer no longer runs: a writer killed outright (kill -9) between
// Create and Commit leaves its file, as large as what it wrote. The
// temporary name carries the writer's pid and start time
// (internal/pidstamp), so a file of a writer still running, in this
// process or another, stays; so does one named before the stamp (a
// random number alone), whose writer cannot be told. It returns how many
// it removed.
func CleanStale(path string) (int, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return removeTemps(dir, func(final, stamp string) bool { return final == base && pidstamp.Gone(stamp) })
}

// removeTemps removes the regular temporary files in dir (FINAL.tmp-STAMP)
// for which remove(FINAL, STAMP) holds, and returns how many it removed.
func removeTemps(dir string, remove func(final, stamp string) bool) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("atomicfile: %w", err)
	}
	n := 0
	for _, e := range ents {
		final, stamp, ok := strings.Cut(e.Name(), tmpMarker)
		if !ok || !e.Type().IsRegular() || !remove(final, stamp) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}
