package sample

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

// PartitionFiles adapts an open partition.Partitioning to Partitions.
// LoadAdjacency reads each partition's adjacency from adj_indices.npy with
// one sequential pread (the partition's lists are contiguous there),
// counted on the dataset's "load" stage.
type PartitionFiles struct {
	p     *partition.Partitioning
	f     *os.File
	wide  bool
	stage *storage.StageCounters
	// contiguous: every part is a contiguous id range (a relabelled
	// dataset's own partitioning, checked at construction).
	contiguous bool
	// owned: Close closes p too (OpenPartitionFiles).
	owned bool
}

// OpenPartitionFiles opens partitioning name of d, the dataset in dir
// (partition.Open: a missing one is partition.ErrNotFound, saying how to
// make it), and wraps it as NewPartitionFiles does. The result owns the
// partitioning: Close closes both.
func OpenPartitionFiles(d *storage.Dataset, dir, name string) (*PartitionFiles, error) {
	p, err := partition.Open(dir, name)
	if err != nil {
		return nil, err
	}
	pf, err := NewPartitionFiles(d, p)
	if err != nil {
		p.Close()
		return nil, err
	}
	pf.owned = true
	return pf, nil
}

// Partitioning is the partitioning pf reads.
func (pf *PartitionFiles) Partitioning() *partition.Partitioning { return pf.p }

// NewPartitionFiles wraps p, a partitioning of d. The caller still owns p
// and must Close both (this first). It checks what ties the two together,
// in O(N): every member's stored degree in adj_indptr.npy equals its
// degree in the dataset, and every cross count is at most that degree (a
// violation is a *partition.CorruptError naming the file and element);
// and in O(T) that train_members.npy lists exactly the dataset's
// training nodes (else partition.ErrMismatch, naming the element).
func NewPartitionFiles(d *storage.Dataset, p *partition.Partitioning) (*PartitionFiles, error) {
	if int64(len(p.Part())) != d.NumNodes() {
		return nil, fmt.Errorf("%w: partitioning covers %d nodes, dataset has %d", ErrInvalidOptions, len(p.Part()), d.NumNodes())
	}
	if err := checkAgainst(d, p); err != nil {
		return nil, err
	}
	f, err := os.Open(p.AdjacencyPath())
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	// adj_indices.npy is opened by path after p mapped the rest: a
	// partitioning replaced in between (partition --force) would pair
	// the new lists with p's offsets, unnoticed (sweep 27, I1's race).
	if err := p.Unchanged(); err != nil {
		f.Close()
		return nil, err
	}
	pf := &PartitionFiles{p: p, f: f, wide: d.Indices32() == nil, stage: d.Accounting().Stage(storage.StageLoad)}
	if r := d.Manifest().RelabelledFrom; r != nil && r.Partitioning == p.Manifest().Name {
		pf.contiguous = p.Contiguous() == nil
	}
	return pf, nil
}

// PartRange is part q's node ids as the range [lo, hi) when every part of
// the partitioning is a contiguous id range (the partitioning a dataset
// was relabelled by, see partition.Relabel); ok is false otherwise.
func (pf *PartitionFiles) PartRange(q int) (lo, hi int64, ok bool) {
	if !pf.contiguous || q < 0 || q >= pf.p.K() {
		return 0, 0, false
	}
	lo, hi = pf.p.MembersRange(q)
	return lo, hi, true
}

// Close closes the adjacency file, and the partitioning when pf owns it
// (OpenPartitionFiles).
func (pf *PartitionFiles) Close() error {
	err := pf.f.Close()
	if pf.owned {
		err = errors.Join(err, pf.p.Close())
	}
	return err
}

// K is the number of partitions.
func (pf *PartitionFiles) K() int { return pf.p.K() }

// TrainMembers lists partition q's training nodes.
func (pf *PartitionFiles) TrainMembers(q int) []int64 { return pf.p.TrainMembers(q) }

// Cross is the per-node cross-partition neighbour count.
func (pf *PartitionFiles) Cross() []int32 { return pf.p.Cross() }

// LoadAdjacency reads the adjacency of partitions ps into dst.
func (pf *PartitionFiles) LoadAdjacency(ps []int, dst *DynamicCache) error {
	var nodes, ids int64
	for _, q := range ps {
		if q < 0 || q >= pf.p.K() {
			return fmt.Errorf("%w: partition %d out of range [0,%d)", ErrInvalidOptions, q, pf.p.K())
		}
		a := pf.p.AdjacencyOf(q)
		nodes += int64(len(a.Nodes))
		ids += a.Indptr[len(a.Indptr)-1] - a.Indptr[0]
	}
	dst.Reserve(nodes, ids)
	for _, q := range ps {
		a := pf.p.AdjacencyOf(q)
		err := dst.addRead(a.Nodes, a.Indptr, a.Indices64 != nil, func(b []byte) error {
			if int64(len(b)) != a.FileBytes {
				return fmt.Errorf("sample: %s: partition %d: %d index bytes at byte %d, its offsets span %d", pf.p.AdjacencyPath(), q, a.FileBytes, a.FileOffset, len(b))
			}
			if _, err := pf.f.ReadAt(b, a.FileOffset); err != nil {
				return fmt.Errorf("sample: read %s at byte %d: %w", pf.p.AdjacencyPath(), a.FileOffset, storage.ShortRead(err))
			}
			return nil
		})
		if err != nil {
			return err
		}
		pf.stage.Request(int64(a.Len()), a.FileBytes)
		if a.FileBytes > 0 { // an empty list range issues no pread (os.File.ReadAt)
			pf.stage.Read(a.FileBytes)
		}
	}
	return nil
}

// MacroBound is the most one macro batch can hold of a per-partition
// quantity: the sum of cost(q) over the ppb partitions of largest cost.
// ppb 0 derives it from batchSize, as the sampler does
// (PartsPerBatchFor).
func MacroBound(parts Partitions, ppb, batchSize int, cost func(q int) int64) int64 {
	k := parts.K()
	if ppb <= 0 {
		ppb = PartsPerBatchFor(parts, batchSize)
	}
	costs := make([]int64, k)
	for q := range k {
		costs[q] = cost(q)
	}
	slices.SortFunc(costs, func(a, b int64) int { return cmp.Compare(b, a) })
	var n int64
	for _, c := range costs[:min(max(ppb, 1), k)] {
		n += c
	}
	return n
}

// MacroBytesBound bounds the memory of one macro batch's dynamic cache
// (DynamicCache.MemBytes, as LoadAdjacency fills it: it reads the lists
// straight into the cache, with no buffer of its own) by MacroBound with
// ppb and batchSize: a partition costs dynNodeBytes per member and its
// list ids, and the cache one leading offset. It reads only the
// partitioning's offsets, so memory can be checked before any macro batch
// is loaded.
func (pf *PartitionFiles) MacroBytesBound(ppb, batchSize int) int64 {
	n := MacroBound(pf, ppb, batchSize, func(q int) int64 {
		a := pf.p.AdjacencyOf(q)
		width := int64(4)
		if a.Indices64 != nil {
			width = 8
		}
		return int64(len(a.Nodes))*dynNodeBytes + (a.Indptr[len(a.Indptr)-1]-a.Indptr[0])*width
	})
	return n + 8
}

// checkAgainst checks p's adjacency degrees and cross counts against d.
func checkAgainst(d *storage.Dataset, p *partition.Partitioning) error {
	bad := func(file string, i int64, format string, args ...any) error {
		return &partition.CorruptError{File: filepath.Join(p.Dir(), file), Index: i, Offset: -1, Msg: fmt.Sprintf(format, args...)}
	}
	j := int64(0)
	for q := range p.K() {
		a := p.AdjacencyOf(q)
		for i, v := range a.Nodes {
			if got, want := a.Indptr[i+1]-a.Indptr[i], d.Degree(v); got != want {
				return bad(partition.FileAdjIndptr, j, "node %d has %d neighbours here, %d in the dataset", v, got, want)
			}
			j++
		}
	}
	for v, c := range p.Cross() {
		if deg := d.Degree(int64(v)); int64(c) > deg {
			return bad(partition.FileCross, int64(v), "count %d exceeds the node's degree %d", c, deg)
		}
	}
	return p.CheckTrain(d)
}
