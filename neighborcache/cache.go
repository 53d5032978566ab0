package neighborcache

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Policy selects which nodes' lists are cached.
type Policy string

// Policies.
const (
	// PolicyDegree caches the highest-degree nodes.
	PolicyDegree Policy = "degree"
	// PolicyCross caches the nodes with the most cross-partition
	// neighbours; it needs Options.Cross.
	PolicyCross Policy = "cross"
)

// ParsePolicy parses "degree" or "cross".
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case PolicyDegree, PolicyCross:
		return Policy(s), nil
	}
	return "", fmt.Errorf("%w: policy %q: want degree or cross", ErrInvalidOptions, s)
}

var (
	// ErrInvalidOptions is wrapped by every error of Options.Validate.
	ErrInvalidOptions = errors.New("neighborcache: invalid options")
)

// Options configures Build. A nil *Options means the defaults: an empty
// cache (Budget 0) with PolicyDegree.
type Options struct {
	// Budget is the most bytes the cache may use, table included.
	Budget int64
	// Policy is the selection policy (default PolicyDegree).
	Policy Policy
	// Cross is the per-node number of cross-partition neighbours, length
	// NumNodes; required by PolicyCross.
	Cross []int32
	// Progress receives the fill task (nil: none).
	Progress progress.Reporter
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.Budget < 0 {
		return fmt.Errorf("%w: Budget %d, want >= 0", ErrInvalidOptions, o.Budget)
	}
	switch o.Policy {
	case "", PolicyDegree:
	case PolicyCross:
		if o.Cross == nil {
			return fmt.Errorf("%w: policy cross needs Cross counts", ErrInvalidOptions)
		}
	default:
		return fmt.Errorf("%w: policy %q: want degree or cross", ErrInvalidOptions, o.Policy)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Policy == "" {
		c.Policy = PolicyDegree
	}
	c.Progress = progress.Or(c.Progress)
	return c
}

// List is a read-only view of one neighbour list, stored as int32 or int64
// ids (exactly one of the two is non-nil unless the list is empty).
type List struct {
	I32 []int32
	I64 []int64
}

// FromNodeList converts a storage view without copying.
func FromNodeList(l storage.NodeList) List { return List{I32: l.Int32(), I64: l.Int64()} }

// Len is the number of ids.
func (l List) Len() int {
	if l.I64 != nil {
		return len(l.I64)
	}
	return len(l.I32)
}

// At returns the i-th id.
func (l List) At(i int) int64 {
	if l.I64 != nil {
		return l.I64[i]
	}
	return int64(l.I32[i])
}

// Bytes is the storage size of the list.
func (l List) Bytes() int64 {
	if l.I64 != nil {
		return int64(len(l.I64)) * 8
	}
	return int64(len(l.I32)) * 4
}

// AppendTo appends all ids to dst.
func (l List) AppendTo(dst []int64) []int64 {
	if l.I64 != nil {
		return append(dst, l.I64...)
	}
	for _, v := range l.I32 {
		dst = append(dst, int64(v))
	}
	return dst
}

// Stats describes a built cache.
type Stats struct {
	Policy     Policy `json:"policy"`
	Budget     int64  `json:"budget_bytes"`
	Nodes      int64  `json:"nodes_cached"`
	Edges      int64  `json:"edges_cached"`
	TableBytes int64  `json:"table_bytes"`
	DataBytes  int64  `json:"data_bytes"`
}

// Bytes is TableBytes + DataBytes.
func (s Stats) Bytes() int64 { return s.TableBytes + s.DataBytes }

// Cache is a static neighbour-list cache. The zero value and nil are empty
// caches.
type Cache struct {
	n       int64
	bitmap  []uint64
	rank    []uint32
	offsets []int64
	ids32   []int32
	ids64   []int64
	stats   Stats
	counted int64 // bytes added to memacct.NeighborCache (released by Close)
}

// FixedTableBytes is the memory a cache over n nodes takes whatever it
// holds: the membership bitmap, its rank directory, and the final offsets
// entry is counted with ListBytes' per-list offset. The planner models the
// cache with it and ListBytes.
func FixedTableBytes(n int64) int64 { return fixedTableBytes(n) }

// ListBytes is what caching one list of deg neighbours of idBytes bytes
// each costs: its ids and its 8-byte offset.
func ListBytes(deg, idBytes int64) int64 { return 8 + deg*idBytes }

// fixedTableBytes is the size of the bitmap and the rank directory for n
// nodes.
func fixedTableBytes(n int64) int64 {
	words := (n + 63) / 64
	blocks := (n+511)/512 + 1
	return words*8 + blocks*4
}

// Build selects and loads the cached lists of d under opts.
func Build(d *storage.Dataset, opts *Options) (*Cache, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	n := d.NumNodes()
	if o.Policy == PolicyCross && int64(len(o.Cross)) != n {
		return nil, fmt.Errorf("%w: Cross has %d entries, dataset has %d nodes", ErrInvalidOptions, len(o.Cross), n)
	}
	c := &Cache{n: n, stats: Stats{Policy: o.Policy, Budget: o.Budget}}
	fixed := fixedTableBytes(n)
	// One offset (8 bytes) per slot plus the final offset.
	if o.Budget < fixed+8 || n == 0 {
		return c, nil
	}
	indptr := d.Indptr()
	elem := int64(4)
	if d.Indices32() == nil {
		elem = 8
	}
	score := func(v int64) int64 {
		if o.Policy == PolicyCross {
			return int64(o.Cross[v])
		}
		return indptr[v+1] - indptr[v]
	}
	cost := func(v int64) int64 { return ListBytes(indptr[v+1]-indptr[v], elem) }

	// Histogram of cost by score; walk scores downwards to find the
	// threshold score whose nodes are taken only partially.
	hist := map[int64]int64{}
	for v := int64(0); v < n; v++ {
		if s := score(v); s > 0 {
			hist[s] += cost(v)
		}
	}
	scores := make([]int64, 0, len(hist))
	for s := range hist {
		scores = append(scores, s)
	}
	slices.Sort(scores)
	slices.Reverse(scores)
	left := o.Budget - fixed - 8
	threshold := int64(math.MaxInt64) // scores above it are taken whole
	for _, s := range scores {
		if hist[s] > left {
			threshold = s
			break
		}
		left -= hist[s]
		threshold = s - 1 // everything with score s fits
	}
	if len(scores) > 0 && threshold < scores[len(scores)-1] {
		threshold = 0
	}
	// Exactly-threshold nodes (and, via the skip rule, nothing below) are
	// taken in id order while they fit; left is what remains for them.
	take := func(v int64) bool {
		s := score(v)
		if s <= 0 {
			return false
		}
		if s > threshold {
			return true
		}
		if s == threshold {
			if k := cost(v); k <= left {
				left -= k
				return true
			}
		}
		return false
	}
	// Select first, then allocate every array at its exact size: growing
	// them by append would hold up to twice the budget while building.
	// The final offsets entry is already counted in the fixed part.
	c.bitmap = make([]uint64, (n+63)/64)
	task := o.Progress.Start("neighbour cache", 2*n, progress.Items)
	defer task.Done()
	var selNodes, selEdges int64
	for v := int64(0); v < n; v++ {
		if v&0xffff == 0xffff {
			task.Add(0x10000)
		}
		if !take(v) {
			continue
		}
		c.bitmap[v>>6] |= 1 << (v & 63)
		selNodes++
		selEdges += indptr[v+1] - indptr[v]
	}
	i32, i64 := d.Indices32(), d.Indices64()
	c.offsets = make([]int64, 1, selNodes+1)
	if i32 != nil {
		c.ids32 = make([]int32, 0, selEdges)
	} else {
		c.ids64 = make([]int64, 0, selEdges)
	}
	for v := int64(0); v < n; v++ {
		if v&0xffff == 0xffff {
			task.Add(0x10000)
		}
		if c.bitmap[v>>6]&(1<<(v&63)) == 0 {
			continue
		}
		lo, hi := indptr[v], indptr[v+1]
		if i32 != nil {
			c.ids32 = append(c.ids32, i32[lo:hi]...)
			c.offsets = append(c.offsets, int64(len(c.ids32)))
		} else {
			c.ids64 = append(c.ids64, i64[lo:hi]...)
			c.offsets = append(c.offsets, int64(len(c.ids64)))
		}
	}
	nblocks := (n+511)/512 + 1
	c.rank = make([]uint32, nblocks)
	var acc uint64
	for j := int64(0); j < nblocks; j++ {
		c.rank[j] = uint32(acc)
		for w := j * 8; w < min(j*8+8, int64(len(c.bitmap))); w++ {
			acc += uint64(bits.OnesCount64(c.bitmap[w]))
		}
	}
	if acc > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d cached nodes exceed the rank directory's 2^32 limit", ErrInvalidOptions, acc)
	}
	nodes := int64(len(c.offsets) - 1)
	c.stats.Nodes = nodes
	c.stats.Edges = c.offsets[nodes]
	c.stats.TableBytes = fixed + 8*(nodes+1)
	c.stats.DataBytes = c.stats.Edges * elem
	if c.stats.Bytes() > o.Budget {
		// Cannot happen by construction; guard the promise anyway.
		return nil, fmt.Errorf("neighborcache: internal error: %d bytes used, budget %d", c.stats.Bytes(), o.Budget)
	}
	if nodes == 0 {
		return &Cache{n: n, stats: Stats{Policy: o.Policy, Budget: o.Budget}}, nil
	}
	c.counted = 8*int64(cap(c.bitmap)) + 4*int64(cap(c.rank)) + 8*int64(cap(c.offsets)) + 4*int64(cap(c.ids32)) + 8*int64(cap(c.ids64))
	memacct.Add(memacct.NeighborCache, c.counted)
	return c, nil
}

// Close releases the cache's memory (its memacct count); the cache must
// not be used afterwards. A nil cache and a second Close are no-ops.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	memacct.Add(memacct.NeighborCache, -c.counted)
	c.counted = 0
	c.bitmap, c.rank, c.offsets, c.ids32, c.ids64 = nil, nil, nil, nil, nil
}

// Stats describes the cache.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	return c.stats
}

// Bytes is the memory the cache uses, table included.
func (c *Cache) Bytes() int64 { return c.Stats().Bytes() }

// Contains reports whether v's list is cached.
func (c *Cache) Contains(v int64) bool {
	if c == nil || c.bitmap == nil || v < 0 || v >= c.n {
		return false
	}
	return c.bitmap[v>>6]&(1<<(v&63)) != 0
}

// Lookup returns v's cached list, or false when v is not cached.
func (c *Cache) Lookup(v int64) (List, bool) {
	if !c.Contains(v) {
		return List{}, false
	}
	w := v >> 6
	slot := uint64(c.rank[v>>9])
	for i := (v >> 9) << 3; i < w; i++ {
		slot += uint64(bits.OnesCount64(c.bitmap[i]))
	}
	slot += uint64(bits.OnesCount64(c.bitmap[w] & (1<<(v&63) - 1)))
	lo, hi := c.offsets[slot], c.offsets[slot+1]
	if c.ids64 != nil {
		return List{I64: c.ids64[lo:hi:hi]}, true
	}
	return List{I32: c.ids32[lo:hi:hi]}, true
}
