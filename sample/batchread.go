package sample

import (
	"fmt"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
)

// listArenaBytes is ListArenaBytes; tests lower it to take the mapping
// path.
var listArenaBytes int64 = ListArenaBytes

// listScratchBytes is the read slots one worker's two readers hold
// (indptr's and indices', each listReadDepth slots of listReadBytes),
// counted by storage in memacct.BatchBuffers and reserved with the
// worker (WorkerBytesBound).
const listScratchBytes = 2 * listReadDepth * listReadBytes

// readChunk is the most requests one read plan covers
// (storage.ScatterOptions.Chunk); tests lower it to plan in many chunks.
var readChunk = storage.DefaultScatterChunk

// listSessionBytes bounds what one worker's two reader sessions keep per
// item beyond their slots (storage.SessionItemBytes): a chunk of requests
// each, plus, for the lists, the pieces of lists longer than a read (at
// most one per half read's worth of the arena).
const listSessionBytes = storage.SessionItemBytes * (2*storage.DefaultScatterChunk + ListArenaBytes/(listReadBytes/2) + 1)

// openBatch opens the two readers of SourceBatch and resolves its gap.
func (s *Sampler) openBatch() error {
	o := &s.o
	var err error
	if s.ip, err = s.d.OpenRowReader(storage.FileIndptr, storage.ReadAuto, s.stage); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	if s.ix, err = s.d.OpenRowReader(storage.FileIndices, storage.ReadAuto, s.stage); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	for _, r := range []*storage.RowReader{s.ip, s.ix} {
		if err := r.SetEngine(o.IO); err != nil {
			return fmt.Errorf("sample: %w", err)
		}
	}
	gapBytes := o.ReadGapBytes // PerListReads: none
	if gapBytes == 0 {
		prof, _, err := storage.DeviceProfileOrDefault(s.d.Dir(), s.d.FeatRowBytes())
		if err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		gapBytes = prof.GapRows(1) // the break-even gap in bytes
	}
	amp := storage.ReadAmplification(gapBytes > 0, o.MaxReadAmp)
	opt := func(r *storage.RowReader) storage.ScatterOptions {
		var gap int64
		if gapBytes > 0 {
			gap = max(1, gapBytes/r.RowBytes()) // 1: touching items merge
		}
		return storage.ScatterOptions{GapRows: gap, MaxAmplification: amp,
			MaxReadBytes: listReadBytes, Depth: listReadDepth, Chunk: readChunk}
	}
	s.ipOpt, s.ixOpt = opt(s.ip), opt(s.ix)
	return nil
}

// readMisses reads the lists of nodes w.missV (their slots in w.lists are
// w.missAt) with SourceBatch: their offsets, then their lists, each in one
// ReadRanges call (which plans storage.DefaultScatterChunk requests at a
// time). Lists that do not fit in what is left of the worker's
// arena this batch (ListArenaBytes in all) are read through the mapping
// instead.
func (w *worker) readMisses(st *LookupStats) error {
	s := w.s
	m := len(w.missV)
	if m == 0 {
		return nil
	}
	// Offsets: rows v and v+1 of indptr, into w.offs[2k:2k+2].
	if cap(w.reqs) < m {
		w.reqs = make([]storage.RangeReq, 0, grown(int64(m)))
	}
	w.reqs = w.reqs[:0]
	for k, v := range w.missV {
		w.reqs = append(w.reqs, storage.RangeReq{Row: v, N: 2, Pos: 2 * int64(k)})
	}
	w.offs = grow(w.offs, 2*m)
	if err := s.ip.ReadRanges(w.reqs, int64Bytes(w.offs), s.ipOpt); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	// Lists: each to its place in the arena, after the lists of the
	// batch's earlier hops, in miss order. The arena is allocated once,
	// whole, and never moves: earlier hops' lists point into it.
	idBytes := int64(4)
	if s.wide {
		idBytes = 8
	}
	if w.arena32 == nil && w.arena64 == nil {
		n := max(1, min(listArenaBytes/idBytes, s.d.NumEdges()))
		if s.wide {
			w.arena64 = make([]int64, n)
		} else {
			w.arena32 = make([]int32, n)
		}
		w.recount()
	}
	room := int64(max(len(w.arena32), len(w.arena64)))
	w.reqs = w.reqs[:0]
	used := w.arenaUsed // ids
	for k, v := range w.missV {
		lo, hi := w.offs[2*k], w.offs[2*k+1]
		if lo < 0 || hi < lo || hi > s.d.NumEdges() {
			return fmt.Errorf("sample: node %d: offsets [%d,%d) read from %s outside [0,%d]", v, lo, hi, storage.FileIndptr, s.d.NumEdges())
		}
		if used+hi-lo > room {
			w.offs[2*k] = -1 // read through the mapping below
			continue
		}
		if hi > lo {
			w.reqs = append(w.reqs, storage.RangeReq{Row: lo, N: hi - lo, Pos: used})
		} else {
			s.stage.Request(1, 0) // as the other sources count an empty list
		}
		used += hi - lo
	}
	arena := int32Bytes(w.arena32)
	if s.wide {
		arena = int64Bytes(w.arena64)
	}
	w.recount() // the scratch before the reads fill it
	if err := s.ix.ReadRanges(w.reqs, arena, s.ixOpt); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	used = w.arenaUsed
	for k, v := range w.missV {
		var l neighborcache.List
		if lo := w.offs[2*k]; lo < 0 {
			l = neighborcache.FromNodeList(s.d.Neighbors(v))
			s.stage.Request(1, l.Bytes())
		} else {
			n := w.offs[2*k+1] - lo
			if s.wide {
				l.I64 = w.arena64[used : used+n : used+n]
			} else {
				l.I32 = w.arena32[used : used+n : used+n]
			}
			used += n
		}
		st.Storage.BytesRead += l.Bytes()
		w.lists[w.missAt[k]] = l
	}
	w.arenaUsed = used
	return nil
}

// grow returns s with length n, reallocating only when its capacity is
// short, with a quarter's slack (as push).
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, max(n, 256, cap(s)+cap(s)/4))
}

func int64Bytes(x []int64) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 8*len(x))
}

func int32Bytes(x []int32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}
