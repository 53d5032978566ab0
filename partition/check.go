package partition

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// check verifies every invariant a reader indexes with and every checksum
// (doc.go, "Checked at open"). Open runs it once; the verdict is kept in
// p.checked so Verify does not read the files again. The N- and K-sized
// arrays are checked in place and then hashed; adj_indices, the one
// E-sized array, is range-checked and hashed in the same pass.
func (p *Partitioning) check() error {
	corrupt := func(file string, i int64, format string, args ...any) error {
		return &CorruptError{File: filepath.Join(p.dir, file), Index: i, Offset: -1, Msg: fmt.Sprintf(format, args...)}
	}
	k := int64(p.man.K)
	n := p.man.NumNodes
	for v, q := range p.part {
		if q < 0 || int64(q) >= k {
			return corrupt(FilePart, int64(v), "part %d out of range [0,%d)", q, k)
		}
	}
	for v, c := range p.cross {
		if c < 0 {
			return corrupt(FileCross, int64(v), "count %d is negative", c)
		}
	}
	for _, o := range []struct {
		name string
		off  []int64
		end  int64
	}{
		{FileMembersOffsets, p.off, n},
		{FileTrainOffsets, p.toff, p.man.NumTrain},
		{FileAdjIndptr, p.adjPtr, p.man.NumEdges},
	} {
		if err := checkOffsets(o.off, o.end, func(i int64, format string, args ...any) error {
			return corrupt(o.name, i, format, args...)
		}); err != nil {
			return err
		}
	}
	for _, list := range []struct {
		name string
		off  []int64
		ids  []int64
	}{{FileMembers, p.off, p.members}, {FileTrainMembers, p.toff, p.tmembers}} {
		for q := range k {
			prev := int64(-1)
			for j := list.off[q]; j < list.off[q+1]; j++ {
				v := list.ids[j]
				switch {
				case uint64(v) >= uint64(n):
					return corrupt(list.name, j, "node id %d out of range [0,%d)", v, n)
				case p.part[v] != int32(q):
					return corrupt(list.name, j, "node %d listed in part %d, but part.npy puts it in %d", v, q, p.part[v])
				case v <= prev:
					return corrupt(list.name, j, "node %d not strictly ascending within part %d (previous %d)", v, q, prev)
				}
				prev = v
			}
		}
	}
	// Hash the arrays checked above, then range-check and hash adj_indices.
	for _, name := range []string{FilePart, FileCross, FileMembersOffsets, FileMembers, FileTrainOffsets, FileTrainMembers, FileAdjIndptr} {
		if err := p.arrays[name].Scan(1, true, nil); err != nil {
			return p.corruptFrom(err)
		}
	}
	a := p.arrays[FileAdjIndices]
	wide := p.adj64 != nil
	elem := 4
	if wide {
		elem = 8
	}
	err := a.Scan(elem, true, func(first int64, b []byte) error {
		if wide {
			x := npy.AsInt64(b)
			if i := storage.FirstOutOfRange64(x, n); i >= 0 {
				return corrupt(FileAdjIndices, first+int64(i), "node id %d out of range [0,%d)", x[i], n)
			}
			return nil
		}
		x := npy.AsInt32(b)
		if i := storage.FirstOutOfRange32(x, n); i >= 0 {
			return corrupt(FileAdjIndices, first+int64(i), "node id %d out of range [0,%d)", x[i], n)
		}
		return nil
	})
	if err != nil {
		return p.corruptFrom(err)
	}
	if e := p.man.File(FileStats); e != nil {
		if got := storage.FormatChecksum(xxhash.Sum64(p.statsJSON)); got != e.Checksum {
			return &CorruptError{File: filepath.Join(p.dir, FileStats), Index: -1, Offset: 0,
				Msg: fmt.Sprintf("checksum %s, manifest says %s", got, e.Checksum)}
		}
	}
	return nil
}

// checkOffsets checks a CSR-style offsets array: off[0] = 0, never
// decreasing, off[len-1] = end.
func checkOffsets(off []int64, end int64, bad func(i int64, format string, args ...any) error) error {
	if len(off) == 0 {
		return nil
	}
	if off[0] != 0 {
		return bad(0, "first offset is %d, want 0", off[0])
	}
	if i, prev := storage.CheckOffsets(off, 0); i >= 0 {
		return bad(int64(i), "offset %d decreases (previous %d)", off[i], prev)
	}
	if last := off[len(off)-1]; last != end {
		return bad(int64(len(off)-1), "last offset is %d, want %d", last, end)
	}
	return nil
}

// corruptFrom turns a storage.CorruptError (a checksum mismatch found by
// storage.Array.Scan) into this package's type, so every corruption of a
// partition file is a *CorruptError wrapping ErrCorrupt.
func (p *Partitioning) corruptFrom(err error) error {
	var se *storage.CorruptError
	if errors.As(err, &se) {
		return &CorruptError{File: se.File, Index: se.Index, Offset: se.Offset, Msg: se.Msg}
	}
	return err
}

// CheckTrain reports whether train_members.npy lists exactly d's training
// nodes. Partition batches take their targets from it, and Open compares
// only N and E with a dataset, so a partitioning of the same graph made
// for another split (copied from a dataset generated or imported with
// other split fractions or seed) would train on that split's nodes,
// validation and test nodes among them, and Relabel would carry it into a
// copy whose partitioning no reader accepts. With the counts equal, it
// walks the sorted train_idx once: each training node v must be the next
// member of its part's list (part.npy's part[v]; a part's members ascend),
// so the walk reads train_idx, part.npy at ascending ids and each part's
// list in order, in O(T) with one cursor a part (8 bytes each). Every
// training node matched and the counts equal, the lists hold nothing
// else. Binary-searching each member in train_idx instead (O(T log T),
// random reads of train_idx) took 190-205 ms on a 1M-node graph with
// 800,000 training nodes (k 1,000), against 5 ms for the walk and 22 ms
// for the rest of sample.NewPartitionFiles' checks. A mismatch is
// ErrMismatch naming the file and the count or element.
func (p *Partitioning) CheckTrain(d *storage.Dataset) error {
	train := d.TrainIdx()
	file := filepath.Join(p.dir, FileTrainMembers)
	redo := fmt.Sprintf("the partitioning was made for another training split; partition the dataset again (ssdgnn partition %s --method %s --parts %d --name %s --force)",
		d.Dir(), p.man.Method, p.man.K, p.man.Name)
	if n := p.toff[p.K()]; n != int64(len(train)) {
		return fmt.Errorf("%w: %s lists %d training nodes, the dataset's %s %d: %s", ErrMismatch, file, n, storage.FileTrain, len(train), redo)
	}
	next := slices.Clone(p.toff[:p.K()]) // each part's next unmatched element
	for i, v := range train {
		if uint64(v) >= uint64(len(p.part)) {
			return fmt.Errorf("%w: %s: element %d: node %d out of range [0,%d)", ErrMismatch, storage.FileTrain, i, v, len(p.part))
		}
		q := p.part[v]
		j := next[q]
		switch {
		case j == p.toff[q+1]:
			return fmt.Errorf("%w: %s: element %d: part %d's list ends before training node %d (%s element %d): %s",
				ErrMismatch, file, j, q, v, storage.FileTrain, i, redo)
		case p.tmembers[j] < v:
			// The part's training nodes below v were all matched.
			return fmt.Errorf("%w: %s: element %d: node %d is not a training node in the dataset's %s: %s",
				ErrMismatch, file, j, p.tmembers[j], storage.FileTrain, redo)
		case p.tmembers[j] > v:
			return fmt.Errorf("%w: %s: element %d: node %d where part %d's training node %d (%s element %d) belongs: %s",
				ErrMismatch, file, j, p.tmembers[j], q, v, storage.FileTrain, i, redo)
		}
		next[q]++
	}
	return nil
}
