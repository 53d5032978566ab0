package storage

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A mapped array whose file another program truncates while ssdgnn reads
// it (ssdgnn itself replaces files by rename, which leaves a running
// reader's mapping whole) makes the next read of a page past the new end
// raise SIGBUS. Go turns that into a fatal "unexpected fault address"
// with a trace of every goroutine, unless the goroutine called
// runtime/debug.SetPanicOnFault(true): then the fault panics with a
// runtime.Error carrying the address, and CatchFault turns a fault inside
// a mapping registered here into a *ChangedError naming the file.

// ErrChanged is wrapped by every *ChangedError: a mapped file changed
// under a running reader.
var ErrChanged = errors.New("storage: file changed while it was read")

// ChangedError names the mapped file whose read faulted and where.
type ChangedError struct {
	Path   string
	Offset int64 // byte of the file whose read faulted
	Size   int64 // the file's size when it was mapped
	Now    int64 // its size after the fault; -1 when it is gone
}

func (e *ChangedError) Error() string {
	now := "it is gone now"
	if e.Now >= 0 {
		now = fmt.Sprintf("it has %d bytes now", e.Now)
	}
	return fmt.Sprintf("%s changed while it was read: reading its byte %d (of %d when it was opened) faulted, and %s; another program truncated or rewrote it in place (ssdgnn replaces files by rename, which a running reader does not see), or the device failed to read it",
		e.Path, e.Offset, e.Size, now)
}

// Unwrap makes errors.Is(err, ErrChanged) true.
func (e *ChangedError) Unwrap() error { return ErrChanged }

type mapping struct {
	lo, hi uintptr
	path   string
}

// keepUnmapped is how many untracked mappings FaultError still knows.
const keepUnmapped = 256

// mappings holds the live mappings, sorted by lo (they never overlap),
// and the last keepUnmapped untracked ones, oldest first: a deferred
// Close unmaps an array while the fault it caused still unwinds to the
// CatchFault further up.
var mappings struct {
	sync.Mutex
	live, gone []mapping
}

// TrackMapping registers b, a mapping of the file path from its byte 0,
// so that CatchFault names path for a fault inside it. The returned func
// untracks it: call it before unmapping.
func TrackMapping(b []byte, path string) (untrack func()) {
	if len(b) == 0 {
		return func() {}
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mappings.Lock()
	i := sort.Search(len(mappings.live), func(i int) bool { return mappings.live[i].lo >= lo })
	mappings.live = slices.Insert(mappings.live, i, mapping{lo: lo, hi: lo + uintptr(len(b)), path: path})
	mappings.Unlock()
	return func() {
		mappings.Lock()
		defer mappings.Unlock()
		for i, m := range mappings.live {
			if m.lo == lo {
				mappings.live = slices.Delete(mappings.live, i, i+1)
				mappings.gone = append(mappings.gone, m)
				if n := len(mappings.gone); n > keepUnmapped {
					mappings.gone = slices.Delete(mappings.gone, 0, n-keepUnmapped)
				}
				return
			}
		}
	}
}

// FaultError is the *ChangedError for r, a value recovered from a panic,
// when r is a memory fault inside a tracked mapping, or inside one
// untracked since whose file is now too short to hold the byte read;
// else nil.
func FaultError(r any) error {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return nil
	}
	addr := f.Addr()
	m, live := findMapping(addr)
	if m.path == "" {
		return nil
	}
	e := &ChangedError{Path: m.path, Offset: int64(addr - m.lo), Size: int64(m.hi - m.lo), Now: -1}
	if st, err := os.Stat(m.path); err == nil {
		e.Now = st.Size()
	}
	if !live && e.Now > e.Offset {
		// Unmapped, and the file still holds the byte: a read after
		// Close, not a change of the file.
		return nil
	}
	return e
}

// findMapping finds the live mapping holding addr, else the latest
// untracked one that held it.
func findMapping(addr uintptr) (m mapping, live bool) {
	mappings.Lock()
	defer mappings.Unlock()
	i := sort.Search(len(mappings.live), func(i int) bool { return mappings.live[i].hi > addr })
	if i < len(mappings.live) && addr >= mappings.live[i].lo {
		return mappings.live[i], true
	}
	for i := len(mappings.gone) - 1; i >= 0; i-- {
		if g := mappings.gone[i]; addr >= g.lo && addr < g.hi {
			return g, false
		}
	}
	return mapping{}, false
}

// CatchFault, deferred in a goroutine that called
// runtime/debug.SetPanicOnFault(true), sets *errp to the *ChangedError of
// a fault inside a tracked mapping that panics up through the deferring
// function, and stops that panic; any other panic goes on.
//
//	func read() (err error) {
//		defer storage.CatchFault(&err)
//		...
//	}
func CatchFault(errp *error) {
	r := recover()
	if r == nil {
		return
	}
	if err := FaultError(r); err != nil {
		*errp = err
		return
	}
	panic(r)
}

// faultHook is OnFault's function.
var faultHook atomic.Pointer[func(error)]

// OnFault sets the function HandleFault calls with the *ChangedError of a
// fault it stops. The command line sets one that prints the error and
// exits; without one, HandleFault lets the panic go on.
func OnFault(f func(error)) { faultHook.Store(&f) }

// HandleFault is CatchFault for a goroutine with no error to return (a
// compute worker over mapped arrays): a fault inside a tracked mapping
// is handed to the OnFault function, which is not expected to return.
// Defer it first thing in the goroutine, with the call that makes faults
// panics as its argument (evaluated at once). It runs after the
// goroutine's other deferred calls: none of them may wait on another
// goroutine (a stage draining its input channel hung training for good
// instead of exiting); a goroutine with such cleanup and a way to fail
// defers FailFault instead.
//
//	go func() {
//		defer storage.HandleFault(debug.SetPanicOnFault(true))
//		...
//	}()
func HandleFault(bool) {
	r := recover()
	if r == nil {
		return
	}
	if err := FaultError(r); err != nil {
		if h := faultHook.Load(); h != nil && *h != nil {
			(*h)(err)
		}
	}
	panic(r)
}

// FailFault is CatchFault for a goroutine that fails through a function
// rather than a returned error (a pipeline stage): a fault inside a
// tracked mapping is handed to fail, and the goroutine then returns as
// from an ordinary failure, its other deferred calls run after fail (which
// stops the goroutines they may wait on). Defer it after the goroutine's
// other deferred calls, so that it runs before them, with the call that
// makes faults panics as its argument:
//
//	go func() {
//		defer wg.Done()
//		defer drain(in) // waits for the producer, which fail stops
//		defer storage.FailFault(fail, debug.SetPanicOnFault(true))
//		...
//	}()
func FailFault(fail func(error), _ bool) {
	r := recover()
	if r == nil {
		return
	}
	if err := FaultError(r); err != nil {
		fail(err)
		return
	}
	panic(r)
}
