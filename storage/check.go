package storage

import (
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// scanChunk is how many bytes Scan hands to its callback at a time: a few
// MiB stay in cache between the check and the hash of the same bytes.
const scanChunk = 4 << 20

// Scan reads the array's data section once, in order, handing fn chunks
// of whole elements of elemSize bytes (first is the index of the chunk's
// first element), and stops at the first error fn returns. With sum set it
// also hashes the bytes and, when fn found nothing, compares the hash with
// the manifest's checksum; a mismatch is a *CorruptError at the data
// offset. The mapping is advised sequential during the scan and normal
// afterwards; callers that want another hint apply it after.
func (a *Array) Scan(elemSize int, sum bool, fn func(first int64, b []byte) error) error {
	if len(a.Data) > 0 {
		_ = a.Advise(AdviceSequential)
		defer a.Advise(AdviceNormal)
	}
	var h *xxhash.Digest
	if sum {
		h = xxhash.New()
	}
	step := scanChunk - scanChunk%elemSize
	for off := 0; off < len(a.Data); off += step {
		b := a.Data[off:min(off+step, len(a.Data))]
		if fn != nil {
			if err := fn(int64(off/elemSize), b); err != nil {
				return err
			}
		}
		if h != nil {
			h.Write(b)
		}
	}
	if h == nil {
		return nil
	}
	if got := FormatChecksum(h.Sum64()); got != a.Entry.Checksum {
		return &CorruptError{File: a.path, Index: -1, Offset: a.Entry.DataOffset,
			Msg: fmt.Sprintf("checksum %s, manifest says %s", got, a.Entry.Checksum)}
	}
	return nil
}

// FirstOutOfRange32 returns the index of the first x[i] outside [0, n),
// or -1. It is the id check every reader of an int32 id array runs once at
// open, so it is one unsigned compare per element.
func FirstOutOfRange32(x []int32, n int64) int {
	if n > 1<<31 {
		for i, v := range x {
			if v < 0 {
				return i
			}
		}
		return -1
	}
	un := uint32(n)
	for i, v := range x {
		if uint32(v) >= un {
			return i
		}
	}
	return -1
}

// FirstOutOfRange64 is FirstOutOfRange32 for int64 ids.
func FirstOutOfRange64(x []int64, n int64) int {
	un := uint64(max(n, 0))
	for i, v := range x {
		if uint64(v) >= un {
			return i
		}
	}
	return -1
}

// CheckOffsets checks a CSR-style offsets array chunk: every element is at
// least the one before it (prev carries the last element of the previous
// chunk, -1 before the first), and it returns the index within b of the
// first that is not, or -1, with the new prev.
func CheckOffsets(b []int64, prev int64) (int, int64) {
	for i, x := range b {
		if x < prev {
			return i, prev
		}
		prev = x
	}
	return -1, prev
}

// check verifies, once, the invariants of every array a reader indexes
// with (see doc.go, "Checked at open"), and the checksums of all but the
// features. The features are neither read nor checksummed: their values
// index nothing, and reading them would cost as much as an epoch.
func (d *Dataset) check() error {
	n, m := d.m.NumNodes, d.m.NumEdges
	if a := d.arrays[FileIndptr]; a != nil {
		prev := int64(-1)
		err := a.Scan(8, true, func(first int64, b []byte) error {
			x := npy.AsInt64(b)
			if first == 0 && len(x) > 0 && x[0] != 0 {
				return corruptAt(a.path, "indptr", 0, "first offset is %d, want 0", x[0])
			}
			i, p := CheckOffsets(x, prev)
			if i >= 0 {
				return corruptAt(a.path, "indptr", first+int64(i), "offset %d decreases (previous %d)", x[i], p)
			}
			prev = p
			if end := first + int64(len(x)); end == n+1 && x[len(x)-1] != m {
				return corruptAt(a.path, "indptr", n, "last offset is %d, want num_edges %d", x[len(x)-1], m)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if a := d.arrays[FileIndices]; a != nil {
		elem := IndicesDType(n).Size()
		err := a.Scan(elem, true, func(first int64, b []byte) error {
			if elem == 4 {
				x := npy.AsInt32(b)
				if i := FirstOutOfRange32(x, n); i >= 0 {
					return corruptAt(a.path, "indices", first+int64(i), "node id %d out of range [0,%d)", x[i], n)
				}
				return nil
			}
			x := npy.AsInt64(b)
			if i := FirstOutOfRange64(x, n); i >= 0 {
				return corruptAt(a.path, "indices", first+int64(i), "node id %d out of range [0,%d)", x[i], n)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if a := d.arrays[FileLabels]; a != nil {
		c := d.m.NumClasses
		err := a.Scan(4, true, func(first int64, b []byte) error {
			for i, l := range npy.AsInt32(b) {
				if l < -1 || int64(l) >= c {
					return corruptAt(a.path, "labels", first+int64(i), "label %d out of range [-1,%d)", l, c)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// A relabelled copy's id maps: IDMap checks each lookup against the
	// other map, but two entries swapped in both (still inverse
	// permutations) would give infer's predictions to the wrong
	// original nodes; only the checksums tell.
	for _, name := range []string{FileOrigIDs, FileNewIDs} {
		a := d.arrays[name]
		if a == nil {
			continue
		}
		field := name[:len(name)-len(".npy")]
		err := a.Scan(8, true, func(first int64, b []byte) error {
			if i := FirstOutOfRange64(npy.AsInt64(b), n); i >= 0 {
				return corruptAt(a.path, field, first+int64(i), "node id %d out of range [0,%d)", npy.AsInt64(b)[i], n)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, name := range []string{FileTrain, FileValid, FileTest} {
		a := d.arrays[name]
		if a == nil {
			continue
		}
		field := name[:len(name)-len(".npy")]
		last := int64(-1)
		err := a.Scan(8, true, func(first int64, b []byte) error {
			x := npy.AsInt64(b)
			if i := FirstOutOfRange64(x, n); i >= 0 {
				return corruptAt(a.path, field, first+int64(i), "node id %d out of range [0,%d)", x[i], n)
			}
			for i, v := range x {
				if v <= last {
					return corruptAt(a.path, field, first+int64(i), "id %d not strictly ascending (previous %d)", v, last)
				}
				last = v
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
