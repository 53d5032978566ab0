package sample

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/topk"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Partitions is what batch construction needs from a partitioning. The
// sampler calls it from several goroutines at once, so implementations
// must be safe for concurrent use.
type Partitions interface {
	// K is the number of partitions.
	K() int
	// TrainMembers lists partition p's training nodes. The sampler does
	// not modify the slice.
	TrainMembers(p int) []int64
	// LoadAdjacency adds the neighbour list of every member of the
	// partitions ps to dst (the macro batch's dynamic cache).
	LoadAdjacency(ps []int, dst *DynamicCache) error
	// Cross is the per-node number of cross-partition neighbours (for the
	// neighbour cache's cross policy), or nil when unknown.
	Cross() []int32
}

// checkPartsPerBatch refuses a PartsPerBatch above parts' K: a macro
// batch takes at most every part, so the batches would be those of K
// while reports (rr's header, a profile's parts_per_batch) named the
// larger number. 0 (the default) is fine.
func checkPartsPerBatch(ppb int, parts Partitions) error {
	if parts != nil && ppb > parts.K() {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want at most the partitioning's %d parts", opterr.Field("PartsPerBatch"), ppb, parts.K())
	}
	return nil
}

// PartsPerBatchFor is the partitions per macro batch that make a macro
// batch hold about batchSize training nodes: batchSize divided by the
// partitioning's mean training nodes per partition (empty partitions
// included, as macro batches draw partitions uniformly), rounded, within
// [1, K]. A macro batch then yields about one batch, so partition batches
// are as large as random ones: fewer partitions per batch give smaller
// batches and a worse RR than random batches of batchSize, more split
// macro batches into several batches that share its dynamic cache but not
// their neighbourhoods. Without training nodes it is
// min(DefaultPartsPerBatch, K).
func PartsPerBatchFor(parts Partitions, batchSize int) int {
	k := parts.K()
	if k < 1 {
		return 1
	}
	var train int64
	for p := range k {
		train += int64(len(parts.TrainMembers(p)))
	}
	if train == 0 || batchSize < 1 {
		return min(DefaultPartsPerBatch, k)
	}
	ppb := int((int64(batchSize)*int64(k) + train/2) / train)
	return max(1, min(ppb, k))
}

// DynamicCache is a macro batch's dynamic neighbour cache: the neighbour
// lists of its partitions' members, held while the macro batch is active.
// It is filled by one goroutine (Add) and then read concurrently (Lookup).
type DynamicCache struct {
	index map[int64]int32
	// indexHigh is the most entries index has held: clear keeps a map's
	// table, so a reused cache's map is as large as its fullest load.
	indexHigh int
	offs      []int64
	ids32     []int32
	ids64     []int64
	wide      bool
}

// NewDynamicCache returns an empty cache that stores ids as int64 when
// wideIDs, else int32 (the dataset's indices width; see
// storage.IndicesDType).
func NewDynamicCache(wideIDs bool) *DynamicCache {
	return &DynamicCache{index: map[int64]int32{}, offs: []int64{0}, wide: wideIDs}
}

// Reserve sizes the cache for nodes more lists holding ids more ids in
// all, so that loading a macro batch allocates each array once instead of
// growing it by doubling (which held up to twice the adjacency, plus the
// garbage of every smaller copy, until the next GC). An empty cache keeps
// arrays (and an index) that are already large enough: a cache reused
// after Reset allocates nothing for a macro batch no larger than its
// largest.
func (c *DynamicCache) Reserve(nodes, ids int64) {
	if c.Len() == 0 {
		// Empty: keep what is held if every part of it is large enough,
		// else allocate every part exactly. Either way MemBytes is one
		// whole load's, never a mix of several loads' largest parts.
		fits := c.index != nil && int64(c.indexHigh) >= nodes && int64(cap(c.offs)) >= nodes+1
		if c.wide {
			fits = fits && int64(cap(c.ids64)) >= ids
		} else {
			fits = fits && int64(cap(c.ids32)) >= ids
		}
		if fits {
			return
		}
		c.index = make(map[int64]int32, nodes)
		c.indexHigh = int(nodes)
		c.offs = append(make([]int64, 0, nodes+1), 0)
		c.ids32, c.ids64 = nil, nil
		if c.wide {
			c.ids64 = make([]int64, 0, ids)
		} else {
			c.ids32 = make([]int32, 0, ids)
		}
		return
	}
	c.offs = slices.Grow(c.offs, int(nodes))
	if c.wide {
		c.ids64 = slices.Grow(c.ids64, int(ids))
	} else {
		c.ids32 = slices.Grow(c.ids32, int(ids))
	}
}

// Reset empties the cache and keeps its arrays and index for the next
// macro batch (see Reserve). Lists returned by Lookup before Reset must no
// longer be used.
func (c *DynamicCache) Reset() {
	c.indexHigh = max(c.indexHigh, len(c.index))
	clear(c.index)
	c.offs = append(c.offs[:0], 0)
	c.ids32 = c.ids32[:0]
	c.ids64 = c.ids64[:0]
}

// addRead appends the lists of nodes, which lie back to back in a file
// (node i's list is entries indptr[i]-indptr[0] to indptr[i+1]-indptr[0]
// of the bytes read fills), reading them with read straight into the id
// array. wide is the file's id width; it must be the cache's. A node
// already cached keeps its first list.
func (c *DynamicCache) addRead(nodes, indptr []int64, wide bool, read func([]byte) error) error {
	if wide != c.wide {
		return fmt.Errorf("%w: adjacency ids are %d-bit, the cache's %d-bit", ErrInvalidOptions, idBits(wide), idBits(c.wide))
	}
	n := int(indptr[len(nodes)] - indptr[0])
	n32, n64 := len(c.ids32), len(c.ids64)
	var raw []byte
	var at int64
	if c.wide {
		at = int64(len(c.ids64))
		c.ids64 = slices.Grow(c.ids64, n)[:int(at)+n]
		if n > 0 {
			raw = unsafe.Slice((*byte)(unsafe.Pointer(&c.ids64[at])), 8*n)
		}
	} else {
		at = int64(len(c.ids32))
		c.ids32 = slices.Grow(c.ids32, n)[:int(at)+n]
		if n > 0 {
			raw = unsafe.Slice((*byte)(unsafe.Pointer(&c.ids32[at])), 4*n)
		}
	}
	if n > 0 {
		if err := read(raw); err != nil {
			c.ids32, c.ids64 = c.ids32[:n32], c.ids64[:n64] // as it was
			return err
		}
	}
	base := indptr[0]
	for i, v := range nodes {
		if _, ok := c.index[v]; !ok {
			c.index[v] = int32(len(c.offs) - 1)
		}
		c.offs = append(c.offs, at+indptr[i+1]-base)
	}
	return nil
}

func idBits(wide bool) int {
	if wide {
		return 64
	}
	return 32
}

// Add stores v's list. Adding a node twice keeps the first list.
func (c *DynamicCache) Add(v int64, l neighborcache.List) {
	if _, ok := c.index[v]; ok {
		return
	}
	c.index[v] = int32(len(c.offs) - 1)
	if c.wide {
		c.ids64 = l.AppendTo(c.ids64)
		c.offs = append(c.offs, int64(len(c.ids64)))
		return
	}
	if l.I32 != nil {
		c.ids32 = append(c.ids32, l.I32...)
	} else {
		for _, u := range l.I64 {
			c.ids32 = append(c.ids32, int32(u))
		}
	}
	c.offs = append(c.offs, int64(len(c.ids32)))
}

// AllocatedBytes is the capacity of the id and offset arrays (not the
// index map): after Reserve with exact counts it equals DataBytes plus
// 8 bytes per node and one offset.
func (c *DynamicCache) AllocatedBytes() int64 {
	return int64(cap(c.ids32))*4 + int64(cap(c.ids64))*8 + int64(cap(c.offs))*8
}

// dynIndexEntryBytes bounds the index map's memory per cached node: Go
// 1.24+ maps of int64 → int32 keep 16-byte slots and one control byte in
// groups of 8, at most 7/8 full, in tables of a power-of-two number of
// groups. TestDynamicCacheMemBytes measured 23–39.5 bytes per entry
// (heap after GC, arrays subtracted); 48 leaves a margin.
const dynIndexEntryBytes = 48

// dynNodeBytes is what a cached node costs beside its list's ids: its
// 8-byte offset and its index entry. A cache adds one leading offset.
const dynNodeBytes = 8 + dynIndexEntryBytes

// MemBytes bounds the cache's memory: AllocatedBytes plus
// dynIndexEntryBytes per entry the index map has held (its fullest load,
// for a cache reused after Reset). A nil cache is 0.
func (c *DynamicCache) MemBytes() int64 {
	if c == nil {
		return 0
	}
	return c.AllocatedBytes() + dynIndexEntryBytes*int64(max(c.Len(), c.indexHigh))
}

// NeedBytes is what a cache holding exactly the current load takes: the
// MemBytes of a fresh cache filled the same way. A reused cache's MemBytes
// may be larger (it keeps a larger load's arrays); NeedBytes depends only
// on the load.
func (c *DynamicCache) NeedBytes() int64 {
	if c == nil {
		return 0
	}
	return c.DataBytes() + dynNodeBytes*int64(c.Len()) + 8
}

// Lookup returns v's list, or false when v is not in the cache. A nil
// cache is empty.
func (c *DynamicCache) Lookup(v int64) (neighborcache.List, bool) {
	if c == nil {
		return neighborcache.List{}, false
	}
	s, ok := c.index[v]
	if !ok {
		return neighborcache.List{}, false
	}
	lo, hi := c.offs[s], c.offs[s+1]
	if c.wide {
		return neighborcache.List{I64: c.ids64[lo:hi:hi]}, true
	}
	return neighborcache.List{I32: c.ids32[lo:hi:hi]}, true
}

// Len is the number of nodes cached.
func (c *DynamicCache) Len() int { return len(c.offs) - 1 }

// DataBytes is the size of the cached lists as stored (the bytes a load
// reads from the partition files' indices).
func (c *DynamicCache) DataBytes() int64 {
	if c.wide {
		return int64(len(c.ids64)) * 8
	}
	return int64(len(c.ids32)) * 4
}

// MemPartitions is an in-memory Partitions built from a node → partition
// assignment; adjacency is copied from the dataset on LoadAdjacency. It
// serves tests and datasets without partition files.
type MemPartitions struct {
	d       *storage.Dataset
	k       int
	memOff  []int64 // members of p: members[memOff[p]:memOff[p+1]], ascending
	members []int64
	train   [][]int64
	cross   []int32
}

// NewMemPartitions groups d's nodes by part (length NumNodes, values in
// [0, k)) and counts cross-partition neighbours.
func NewMemPartitions(d *storage.Dataset, k int, part []int32) (*MemPartitions, error) {
	n := d.NumNodes()
	if int64(len(part)) != n {
		return nil, fmt.Errorf("%w: part has %d entries, dataset has %d nodes", ErrInvalidOptions, len(part), n)
	}
	if k <= 0 {
		return nil, fmt.Errorf("%w: k = %d, want > 0", ErrInvalidOptions, k)
	}
	m := &MemPartitions{d: d, k: k, memOff: make([]int64, k+1), train: make([][]int64, k), cross: make([]int32, n)}
	for v, p := range part {
		if p < 0 || int(p) >= k {
			return nil, fmt.Errorf("%w: part[%d] = %d, want in [0,%d)", ErrInvalidOptions, v, p, k)
		}
		m.memOff[p+1]++
	}
	for p := 0; p < k; p++ {
		m.memOff[p+1] += m.memOff[p]
	}
	m.members = make([]int64, n)
	fill := append([]int64(nil), m.memOff[:k]...)
	for v, p := range part {
		m.members[fill[p]] = int64(v)
		fill[p]++
	}
	for _, v := range d.TrainIdx() {
		m.train[part[v]] = append(m.train[part[v]], v)
	}
	for v := int64(0); v < n; v++ {
		l := d.Neighbors(v)
		var c int32
		for i := 0; i < l.Len(); i++ {
			if part[l.At(i)] != part[v] {
				c++
			}
		}
		m.cross[v] = c
	}
	return m, nil
}

// K is the number of partitions.
func (m *MemPartitions) K() int { return m.k }

// Members lists partition p's nodes in ascending order.
func (m *MemPartitions) Members(p int) []int64 { return m.members[m.memOff[p]:m.memOff[p+1]] }

// TrainMembers lists partition p's training nodes in ascending order.
func (m *MemPartitions) TrainMembers(p int) []int64 { return m.train[p] }

// Cross is the per-node number of cross-partition neighbours.
func (m *MemPartitions) Cross() []int32 { return m.cross }

// LoadAdjacency copies the lists of the members of ps into dst.
func (m *MemPartitions) LoadAdjacency(ps []int, dst *DynamicCache) error {
	st := m.d.Accounting().Stage(storage.StageLoad)
	var nodes, ids int64
	for _, p := range ps {
		if p < 0 || p >= m.k {
			return fmt.Errorf("%w: partition %d out of range [0,%d)", ErrInvalidOptions, p, m.k)
		}
		for _, v := range m.Members(p) {
			ids += m.d.Degree(v)
		}
		nodes += int64(len(m.Members(p)))
	}
	dst.Reserve(nodes, ids)
	for _, p := range ps {
		var bytes int64
		for _, v := range m.Members(p) {
			l := m.d.Neighbors(v)
			bytes += l.Bytes()
			dst.Add(v, neighborcache.FromNodeList(l))
		}
		st.Request(int64(len(m.Members(p))), bytes)
	}
	return nil
}

// Bitmap is a fixed-size set of node ids.
type Bitmap []uint64

// NewBitmap returns an empty set over ids [0, n).
func NewBitmap(n int64) Bitmap { return make(Bitmap, (n+63)/64) }

// Set adds v.
func (b Bitmap) Set(v int64) { b[v>>6] |= 1 << (v & 63) }

// Contains reports whether v is in the set; ids out of range are not.
func (b Bitmap) Contains(v int64) bool {
	return v >= 0 && v>>6 < int64(len(b)) && b[v>>6]&(1<<(v&63)) != 0
}

// TopDegree returns the ceil(frac·N) highest-degree nodes of d (ties by
// ascending id, on a relabelled dataset by ascending original id, as the
// trainer's history cache takes them): OUTRE's historical-embedding reuse
// candidates (§3.3). Ties went by the copy's own ids until 2026-11-29, so
// rr's partition+hist row on a relabelled Cora (--order id) reused other
// nodes than on the source (RR 5.92 against 5.94) while training reused
// the same.
func TopDegree(d *storage.Dataset, frac float64) Bitmap {
	n := d.NumNodes()
	b := NewBitmap(n)
	want := int64(frac*float64(n) + 0.999999)
	if want <= 0 {
		return b
	}
	var tie func(v int64) int64
	if m := d.IDMap(); m != nil {
		orig := m.OrigIDs()
		tie = func(v int64) int64 { return orig[v] }
	}
	// degree+1 keeps isolated nodes selectable (topk skips scores <= 0).
	for _, v := range topk.SelectTies(n, min(want, n), func(v int64) int64 { return d.Degree(v) + 1 }, tie) {
		b.Set(v)
	}
	return b
}

// RangeParts is implemented by Partitions whose parts may be contiguous id
// ranges: PartitionFiles of the partitioning a dataset was relabelled by.
type RangeParts interface {
	PartRange(q int) (lo, hi int64, ok bool)
}

// AsRanges returns p as RangeParts when its parts are contiguous id
// ranges, else nil. A trainer serves a macro batch's own feature rows
// from such ranges with sequential reads (train's feature block).
func AsRanges(p Partitions) RangeParts {
	rp, ok := p.(RangeParts)
	if !ok || p.K() == 0 {
		return nil
	}
	if _, _, ok := rp.PartRange(0); !ok {
		return nil
	}
	return rp
}
