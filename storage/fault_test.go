package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// lastNeighbor reads the CSR's last neighbour id, in a goroutine that
// turns faults into panics, as the engine's readers do (or panics with
// panicWith instead). passed is the panic that CatchFault let through.
func lastNeighbor(d *storage.Dataset, panicWith any) (v int64, passed any, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { passed = recover() }()
		func() {
			defer storage.CatchFault(&err)
			if panicWith != nil {
				panic(panicWith)
			}
			v = d.Neighbors(d.NumNodes() - 1).At(int(d.Degree(d.NumNodes()-1)) - 1)
		}()
	}()
	<-done
	return v, passed, err
}

// TestCatchFault: a read of a mapped array whose file another program
// truncated after Open is a *ChangedError naming the file (before: the
// process died of SIGBUS with "unexpected fault address" and a trace of
// every goroutine); a whole file reads as before, and a panic that is not
// a fault in a mapping goes on.
func TestCatchFault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		truncate  bool
		panicWith any
		wantErr   bool
		wantPanic bool
	}{
		{name: "whole"},
		{name: "truncated", truncate: true, wantErr: true},
		{name: "other panic", panicWith: "not a fault", wantPanic: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := storagetest.Generate(t, synth.Config{Nodes: 3000, FeatDim: 4, Classes: 4, AvgDegree: 12, Seed: 3}, nil)
			path := filepath.Join(d.Dir(), storage.FileIndices)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() < 3*4096 {
				t.Fatalf("%s has %d bytes: too few pages to truncate", path, st.Size())
			}
			if tc.truncate {
				if err := os.Truncate(path, 4096); err != nil {
					t.Fatal(err)
				}
			}
			_, recovered, err := lastNeighbor(d, tc.panicWith)
			if (recovered != nil) != tc.wantPanic {
				t.Fatalf("panic %v, want a panic: %v", recovered, tc.wantPanic)
			}
			if tc.wantPanic {
				return
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			if !tc.wantErr {
				return
			}
			var ce *storage.ChangedError
			if !errors.Is(err, storage.ErrChanged) || !errors.As(err, &ce) {
				t.Fatalf("err %v is not a *ChangedError", err)
			}
			if ce.Path != path || ce.Size != st.Size() || ce.Offset < 4096 || ce.Offset >= st.Size() {
				t.Errorf("ChangedError %+v: want path %s, size %d, offset in [4096, %d)", ce, path, st.Size(), st.Size())
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
		})
	}
}

// fault is a recovered value with an address, as a memory fault's is.
type fault uintptr

func (f fault) Addr() uintptr { return uintptr(f) }

// TestFaultErrorUntracked: a fault in a tracked mapping is a
// ChangedError; one in a mapping untracked since (a deferred Close ran
// before the CatchFault further up) is one only when the file is now
// too short to hold the byte read, else (a read after Close) nil; one
// outside every mapping, or a panic without an address, is nil.
func TestFaultErrorUntracked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		untrack  bool
		fileSize int64 // -1: no file
		at       int   // offset of the fault from the mapping's start
		want     bool
	}{
		{name: "live", fileSize: 64, at: 10, want: true},
		{name: "live, file gone", fileSize: -1, at: 10, want: true},
		{name: "before", fileSize: 64, at: -1},
		{name: "past the end", fileSize: 64, at: 64},
		{name: "untracked, file truncated", untrack: true, fileSize: 8, at: 10, want: true},
		{name: "untracked, file gone", untrack: true, fileSize: -1, at: 10, want: true},
		{name: "untracked, file whole", untrack: true, fileSize: 64, at: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.npy")
			if tc.fileSize >= 0 {
				if err := os.WriteFile(path, make([]byte, tc.fileSize), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b := make([]byte, 64)
			lo := uintptr(unsafe.Pointer(&b[0]))
			untrack := storage.TrackMapping(b, path)
			if tc.untrack {
				untrack()
			} else {
				defer untrack()
			}
			err := storage.FaultError(fault(lo + uintptr(tc.at)))
			if (err != nil) != tc.want {
				t.Fatalf("fault at %d: %v, want an error: %v", tc.at, err, tc.want)
			}
			var ce *storage.ChangedError
			if tc.want && (!errors.As(err, &ce) || ce.Path != path || ce.Offset != int64(tc.at) || ce.Size != 64) {
				t.Errorf("fault at %d: %#v", tc.at, err)
			}
		})
	}
	if err := storage.FaultError("no address"); err != nil {
		t.Errorf("a value without an address: %v", err)
	}
}
