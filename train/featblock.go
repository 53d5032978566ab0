package train

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// partRanges returns o.Partitions as sample.RangeParts when every part is
// a contiguous id range and the feature block is not turned off, else nil.
func partRanges(o *Options) sample.RangeParts {
	if o.NoFeatureBlock || o.Selection != sample.ModePartition || o.Partitions == nil {
		return nil
	}
	return sample.AsRanges(o.Partitions)
}

// FeatureBlockBytes is the memory of the dynamic feature block for
// training d with o: the feature rows of the o.PartsPerBatch largest
// parts (sample.PartsPerBatchFor when 0), the most one macro batch can
// hold; 0 when the partitioning is not partition-major or the block is
// off. The block is held by the gather stage, one macro batch at a time.
func FeatureBlockBytes(d *storage.Dataset, o *Options) int64 {
	rp := partRanges(o)
	if rp == nil || d.FeatDim() == 0 {
		return 0
	}
	rows := sample.MacroBound(o.Partitions, o.PartsPerBatch, o.BatchSize, func(q int) int64 {
		lo, hi, _ := rp.PartRange(q)
		return hi - lo
	})
	return rows * d.FeatRowBytes()
}

// featBlock is the dynamic feature cache of a partition-major dataset: the
// feature rows of the current macro batch's parts, which are a handful of
// contiguous id ranges, loaded with one sequential read per range (as
// sample.PartitionFiles loads their adjacency) and served to the gather
// stage before the feature cache and storage. Only the gather goroutine
// uses it; it holds one macro batch at a time.
type featBlock struct {
	parts    sample.RangeParts
	rd       *storage.RowReader
	rowBytes int64
	dtype    string
	gather   *storage.StageCounters

	macro  int // loaded macro batch, -1 none
	ranges []blockRange
	buf    []byte // counted in memacct.DynamicCache by its capacity

	// at and missIDs are gatherF32's scratch (blockIDBytes per id of its
	// largest call), counted in memacct.BatchBuffers by their capacities.
	at, missIDs []int64

	// Epoch counters: rows served, macro batches loaded, bytes loaded.
	hits, loads, loadBytes atomic.Int64
}

// blockIDBytes is the feature block's gather scratch per id: a row offset
// and a miss id.
const blockIDBytes = 16

// blockRange is rows [lo, hi) of the features, at row off of buf.
type blockRange struct{ lo, hi, off int64 }

// newFeatBlock returns the trainer's feature block, or nil when o's
// partitioning is not partition-major (or the block is off).
func newFeatBlock(d *storage.Dataset, o *Options) (*featBlock, error) {
	rp := partRanges(o)
	if rp == nil || d.FeatDim() == 0 {
		return nil, nil
	}
	rd, err := d.OpenRowReader(storage.FileFeatures, o.FeatRead, d.Accounting().Stage(storage.StageLoad))
	if err != nil {
		return nil, err
	}
	return &featBlock{parts: rp, rd: rd, rowBytes: d.FeatRowBytes(), dtype: d.Manifest().FeatDType,
		gather: d.Accounting().Stage(storage.StageGather), macro: -1}, nil
}

// close releases the buffer and the reader.
func (b *featBlock) close() error {
	memacct.Add(memacct.DynamicCache, -int64(cap(b.buf)))
	memacct.Add(memacct.BatchBuffers, -blockIDBytes*int64(cap(b.at)))
	b.buf, b.ranges, b.macro, b.at, b.missIDs = nil, nil, -1, nil, nil
	return b.rd.Close()
}

// load makes macro batch m, of parts ps, the block's content, unless it
// is already.
func (b *featBlock) load(m int, ps []int) error {
	if m == b.macro {
		return nil
	}
	b.ranges = b.ranges[:0]
	for _, q := range ps {
		lo, hi, ok := b.parts.PartRange(q)
		if !ok {
			return fmt.Errorf("train: feature block: part %d has no id range", q)
		}
		if hi > lo {
			b.ranges = append(b.ranges, blockRange{lo: lo, hi: hi})
		}
	}
	slices.SortFunc(b.ranges, func(x, y blockRange) int { return cmp.Compare(x.lo, y.lo) })
	// Merge touching ranges: parts next to each other are one read.
	merged := b.ranges[:0]
	var rows int64
	for _, r := range b.ranges {
		if n := len(merged); n > 0 && merged[n-1].hi == r.lo {
			merged[n-1].hi = r.hi
		} else {
			merged = append(merged, r)
		}
	}
	b.ranges = merged
	for i := range b.ranges {
		b.ranges[i].off = rows
		rows += b.ranges[i].hi - b.ranges[i].lo
	}
	need := rows * b.rowBytes
	if int64(cap(b.buf)) < need {
		memacct.Add(memacct.DynamicCache, need-int64(cap(b.buf)))
		b.buf = nil
		b.buf = make([]byte, need)
	}
	b.buf = b.buf[:need]
	b.macro = -1
	for _, r := range b.ranges {
		if err := b.rd.ReadRange(r.lo, r.hi-r.lo, b.buf[r.off*b.rowBytes:r.off*b.rowBytes+(r.hi-r.lo)*b.rowBytes]); err != nil {
			return err
		}
	}
	b.macro = m
	b.loads.Add(1)
	b.loadBytes.Add(need)
	return nil
}

// offset is the byte offset of v's feature row in buf, or -1 when the
// block does not hold it.
func (b *featBlock) offset(v int64) int64 {
	i, _ := slices.BinarySearchFunc(b.ranges, v, func(r blockRange, v int64) int {
		switch {
		case r.hi <= v:
			return -1
		case r.lo > v:
			return 1
		}
		return 0
	})
	if i == len(b.ranges) || v < b.ranges[i].lo || v >= b.ranges[i].hi {
		return -1
	}
	return (b.ranges[i].off + v - b.ranges[i].lo) * b.rowBytes
}

// gatherF32 fills dst (len(ids)·dim floats) with the rows of ids: those
// in the block from memory, the rest through miss, which receives the
// missing ids and a dst prefix of their size. The misses are gathered
// compactly and then moved to their places from the back, so no second
// buffer is needed. Each id is looked up in the block once.
func (b *featBlock) gatherF32(ids []int64, dst []float32, dim int, miss func(ids []int64, dst []float32) error) error {
	if n := len(ids); cap(b.at) < n {
		memacct.Add(memacct.BatchBuffers, blockIDBytes*int64(n-cap(b.at)))
		b.at, b.missIDs = make([]int64, n), make([]int64, 0, n)
	}
	at := b.at[:len(ids)] // row offset in buf, -1: a miss
	missIDs := b.missIDs[:0]
	for i, v := range ids {
		if at[i] = b.offset(v); at[i] < 0 {
			missIDs = append(missIDs, v)
		}
	}
	hits := int64(len(ids) - len(missIDs))
	if err := miss(missIDs, dst[:len(missIDs)*dim]); err != nil {
		return err
	}
	if hits == 0 {
		return nil
	}
	m := len(missIDs) - 1
	for i := len(ids) - 1; i >= 0; i-- {
		out := dst[i*dim : (i+1)*dim]
		if off := at[i]; off >= 0 {
			storage.DecodeFeatureRow(b.dtype, b.buf[off:off+b.rowBytes], out)
			continue
		}
		if m != i {
			copy(out, dst[m*dim:(m+1)*dim])
		}
		m--
	}
	b.gather.Request(hits, hits*b.rowBytes)
	b.hits.Add(hits)
	return nil
}
