package storage

import (
	"fmt"

	mmap "github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// Array is one .npy file mapped read-only after its size and header were
// checked against a manifest entry. Data aliases the mapping: it is
// read-only and valid until Close. A read of Data that faults because
// another program truncated the file is a *ChangedError in a goroutine
// that catches faults (CatchFault).
type Array struct {
	Entry   *FileEntry
	Data    []byte // the data section; nil for an empty array
	path    string
	m       mmap.MMap
	untrack func()
}

// MapArray maps dir/e.Name after checking that the file exists, has
// e.Bytes bytes, and that its .npy header agrees with e's dtype, shape and
// data offset. Errors wrap ErrMismatch and name the file. Every ssdgnn
// directory with a manifest (datasets, partitionings) opens its arrays
// through it.
func MapArray(dir string, e *FileEntry) (*Array, error) {
	f, path, err := openChecked(dir, e)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &Array{Entry: e, path: path}
	if e.Bytes > e.DataOffset {
		a.m, err = mmap.Map(f, mmap.RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("storage: mmap %s (%d bytes): %w", path, e.Bytes, err)
		}
		a.Data = a.m[e.DataOffset:]
		a.untrack = TrackMapping(a.m, path)
	}
	return a, nil
}

// Path is the file's path (the directory given to MapArray joined with the
// entry's name).
func (a *Array) Path() string { return a.path }

// Advise applies a madvise hint to the mapping.
func (a *Array) Advise(adv Advice) error {
	if len(a.m) == 0 {
		return nil
	}
	if err := unix.Madvise(a.m, adv.unix()); err != nil {
		return fmt.Errorf("storage: madvise %s: %w", a.Entry.Name, err)
	}
	return nil
}

// Close unmaps the file. Data must not be used afterwards.
func (a *Array) Close() error {
	if a.m == nil {
		return nil
	}
	a.untrack()
	err := a.m.Unmap()
	a.m, a.Data = nil, nil
	if err != nil {
		return fmt.Errorf("storage: unmap %s: %w", a.Entry.Name, err)
	}
	return nil
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
