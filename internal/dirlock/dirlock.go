// Package dirlock gives one writer at a time a directory: an advisory,
// non-blocking flock(2) on the file DIR/.lock.
//
// Every ssdgnn command that writes into a directory (a dataset directory,
// a checkpoint directory, relabel's OUT) holds its lock for the whole run;
// a second writer fails at once with an *InUseError ("DIR is in use by pid
// N"). Training, which mostly reads its dataset, holds the dataset's lock
// only while it saves a profile or a recount into it, and skips the save
// when the lock is held or the directory is not writable
// (*NotWritableError). Readers do not lock: they only ever see committed
// artefacts (package atomicfile and the manifest-last rule of package
// storage). The one exception: a partition reader that finds a
// partitioning stranded by an interrupted --force takes the lock, when it
// is free, to move it back (partition/swap.go).
//
// Invariants and caveats:
//   - The lock is advisory: only code that calls Acquire is excluded.
//   - flock locks belong to an open file description, so two Acquire calls
//     in one process exclude each other just as two processes do.
//   - The kernel drops the lock when the process dies, so a crashed writer
//     never leaves a stale lock; the .lock file itself stays, with the pid
//     of its last holder, and is ignored by readers.
//   - The .lock file is never removed while the directory is in use (doing
//     so would let two writers lock two different inodes). The only
//     exception is a directory that Acquire created and that still holds
//     nothing but .lock at Release: both are removed, so a command that
//     fails before writing leaves nothing behind. Acquire checks, after
//     locking, that the path still names the inode it locked, and retries
//     otherwise.
//   - Locks on network file systems (NFS) depend on the server.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Name is the lock file's name inside the locked directory.
const Name = ".lock"

// ErrInUse is matched (errors.Is) by the error of Acquire when another
// writer holds the directory.
var ErrInUse = errors.New("dirlock: directory in use")

// InUseError names the directory and the pid recorded by its holder (0
// when the holder has not written it yet).
type InUseError struct {
	Dir string
	PID int
}

func (e *InUseError) Error() string {
	if e.PID <= 0 {
		return fmt.Sprintf("%s is in use by another process", e.Dir)
	}
	return fmt.Sprintf("%s is in use by pid %d", e.Dir, e.PID)
}

// Is makes errors.Is(err, ErrInUse) true.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// ErrNotWritable is matched (errors.Is) by the error of Acquire when dir
// cannot be written at all: a read-only file system, or no permission.
var ErrNotWritable = errors.New("dirlock: directory not writable")

// NotWritableError names the directory a writer cannot write into and
// the system's reason (EROFS, EACCES or EPERM).
type NotWritableError struct {
	Dir string
	Err error
}

func (e *NotWritableError) Error() string {
	return fmt.Sprintf("%s is not writable (%v)", e.Dir, e.Err)
}

// Is makes errors.Is(err, ErrNotWritable) true.
func (e *NotWritableError) Is(target error) bool { return target == ErrNotWritable }

// Unwrap gives the system's error.
func (e *NotWritableError) Unwrap() error { return e.Err }

// failed wraps err from creating or opening something in dir: a
// *NotWritableError when the system refused the write itself.
func failed(dir string, err error) error {
	for _, errno := range []syscall.Errno{syscall.EROFS, syscall.EACCES, syscall.EPERM} {
		if errors.Is(err, errno) {
			return &NotWritableError{Dir: dir, Err: errno}
		}
	}
	return fmt.Errorf("dirlock: %w", err)
}

// Lock is a held directory lock.
type Lock struct {
	dir     string
	f       *os.File
	created bool // Acquire created dir
	// transient: Release removes the lock file (AcquireTransient).
	transient bool
}

// AcquireTransient is Acquire for a directory whose readers look at every
// file in it: DGL's GraphBolt hashes each file of a dataset directory and
// preprocesses again when the hash changes, so an export must not keep a
// lock file, and a refused run must not leave one rewritten. Release
// removes the lock file when this Acquire created it (a process that
// opened it before the removal finds it gone after its flock and opens
// the new one: Acquire checks that the file it locked is still the one
// named .lock); a lock file that was there before (another writer's
// directory, such as a dataset named as OUT by mistake) stays.
func AcquireTransient(dir string) (*Lock, error) {
	_, err := os.Lstat(filepath.Join(dir, Name))
	existed := err == nil
	l, err := Acquire(dir)
	if l != nil {
		l.transient = !existed
	}
	return l, err
}

// Acquire locks dir for writing, creating it (and its parents) when it
// does not exist. It never blocks: if another writer holds dir it returns
// an *InUseError at once; if dir (or the parent it would be made in)
// cannot be written, a *NotWritableError.
func Acquire(dir string) (*Lock, error) {
	created := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, failed(dir, err)
		}
		created = true
	} else if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	path := filepath.Join(dir, Name)
	for range 8 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, failed(dir, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &InUseError{Dir: dir, PID: holderPID(path)}
			}
			return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
		}
		if !sameFile(f, path) { // removed by a Release between our open and flock
			f.Close()
			continue
		}
		pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
		if _, err := f.WriteAt(pid, 0); err == nil {
			_ = f.Truncate(int64(len(pid)))
		}
		return &Lock{dir: dir, f: f, created: created}, nil
	}
	return nil, fmt.Errorf("dirlock: %s keeps changing under us", path)
}

// Release unlocks the directory. It is safe to call more than once and on
// a nil Lock, so it can be deferred.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	if l.transient {
		_ = os.Remove(filepath.Join(l.dir, Name))
	}
	if l.created {
		if ents, err := os.ReadDir(l.dir); err == nil && (len(ents) == 0 || len(ents) == 1 && ents[0].Name() == Name) {
			_ = os.Remove(filepath.Join(l.dir, Name))
			_ = os.Remove(l.dir)
		}
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	if err != nil {
		return fmt.Errorf("dirlock: %w", err)
	}
	return nil
}

// Dir is the locked directory.
func (l *Lock) Dir() string { return l.dir }

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// holderPID reads the holder's pid, waiting up to about 50ms for a holder
// that has just locked the file to write it.
func holderPID(path string) int {
	for range 10 {
		if pid := readPID(path); pid > 0 {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}
