package sample

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/invariants"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/splitmix"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Block is one message-flow layer of a batch (see the package doc).
type Block struct {
	// Src are the global ids of the block's source nodes. Src[:NumDst] are
	// the destination nodes, in the same order; the rest are nodes first
	// reached in this block. Src aliases the batch's node array.
	Src []int64
	// NumDst is the number of destination nodes.
	NumDst int
	// Indptr (length NumDst+1) and Indices are the sampled edges in CSR
	// over destination-local ids: destination i's sampled neighbours are
	// Src[Indices[Indptr[i]:Indptr[i+1]]].
	Indptr  []int64
	Indices []int32
}

// Dst returns the destination nodes, Src[:NumDst].
func (b *Block) Dst() []int64 { return b.Src[:b.NumDst] }

// NumEdges is the number of sampled edges.
func (b *Block) NumEdges() int { return len(b.Indices) }

// Batch is one sampled (micro) batch.
type Batch struct {
	// Epoch and Index locate the batch: Index counts batches within the
	// epoch from 0, in delivery order.
	Epoch, Index int
	// Macro is the macro batch's index in partition mode, -1 otherwise.
	Macro int
	// Blocks are the layers, input layer first: Blocks[0].Src are the
	// nodes whose features are needed, Blocks[L-1].Dst() the targets.
	Blocks []Block
	// Reused are local ids (positions in Blocks[0].Src, valid in every
	// block whose Src contains them) of hop-1 nodes that were not expanded
	// because their historical embedding is reused. Sorted ascending.
	Reused []int32
	// Stats counts this batch's neighbour lookups.
	Stats LookupStats
	// SampleSeconds is the worker's time building this batch: its lookups
	// and draws, and loading its macro batch's dynamic cache when it is
	// the first to need it, but not the time spent waiting in
	// Options.ReuseFor (a wait on the consumer, not sampling work). The
	// only field that differs between runs with the same seed.
	SampleSeconds float64
	// DynamicBytes is the memory the macro batch's dynamic cache needs
	// (DynamicCache.NeedBytes: a fresh cache's, whichever cache the
	// iterator reused), set on the first batch of each macro batch in
	// partition mode and 0 otherwise.
	DynamicBytes int64
	// counted is the batch's bytes in memacct.SampledBatches until
	// Release.
	counted int64
}

// BatchBytesBound bounds the memory (Batch.MemBytes) of a batch of targets
// sampled with fanouts on a graph of numNodes nodes and numEdges edges,
// layer by layer from the top: a block's destinations draw at most their
// fanout each (with -1, at most numEdges in all), its sources are at most
// its destinations plus its edges and at most numNodes, and the batch
// holds 8 bytes per input node plus each block's 8-byte offsets and 4-byte
// indices. Memory is reserved from it before any batch is sampled.
// TestBatchBytesBound checks it on sampled batches.
func BatchBytesBound(targets int64, fanouts []int, numNodes, numEdges int64) int64 {
	dst := min(targets, numNodes)
	var n int64
	for l := len(fanouts) - 1; l >= 0; l-- {
		edges := numEdges
		if f := fanouts[l]; f >= 0 {
			edges = capProduct(dst, int64(f), numEdges)
		}
		n += 8*(dst+1) + 4*edges
		dst = min(dst+edges, numNodes)
	}
	return n + 8*dst
}

// WorkerBytesBound bounds one sampling worker's memory while it builds a
// batch of targets: the batch itself (BatchBytesBound) and the worker's
// per-batch scratch (counted under memacct.SampledBatches as it grows): a
// list header for every node whose neighbours it fetches (the input
// layer's destinations) and a key per batch node in the id map, each with
// push's growth slack (a quarter), the positions drawn for one node, and
// with a pread or direct Source the read arena (1 MiB; a node whose list
// is longer gets an arena of its own size, beyond this bound), and with
// SourceBatch a hop's read requests, the list arena (ListArenaBytes) and
// the readers' slots. The id map's dense table (IDMapBytes) is fixed
// state, not part of it. TestBatchBytesBound checks it on sampled batches.
func WorkerBytesBound(targets int64, fanouts []int, numNodes, numEdges int64, src Source) int64 {
	return BatchBytesBound(targets, fanouts, numNodes, numEdges) + scratchBound(targets, fanouts, numNodes, numEdges, src)
}

// scratchBound is WorkerBytesBound's scratch term.
func scratchBound(targets int64, fanouts []int, numNodes, numEdges int64, src Source) int64 {
	fetched, dst := hopBounds(targets, fanouts, numNodes, numEdges)
	// The positions drawn for one node: at most its fanout, and at most
	// its list, which no fanout of a huge value makes longer than the
	// graph's edges.
	draw := min(int64(max(slices.Max(append([]int{0}, fanouts...)), 0)), numEdges)
	n := grown(fetched)*listBytes + 4*grown(dst) + 16*draw
	switch src {
	case SourcePread, SourceDirect:
		n += arenaBytes
	case SourceBatch:
		// A hop's misses, their offsets and requests, the list arena,
		// and the two readers' slots and per-item state
		// (memacct.BatchBuffers).
		n += batchHopBytes(fetched) + ListArenaBytes + listScratchBytes + listSessionBytes
	}
	return n
}

// hopBounds bounds a batch of targets: fetched, the destinations of its
// input layer, whose lists are fetched (the most of any hop), and dst,
// its input nodes.
func hopBounds(targets int64, fanouts []int, numNodes, numEdges int64) (fetched, dst int64) {
	dst = min(targets, numNodes)
	fetched = dst
	for l := len(fanouts) - 1; l >= 0; l-- {
		fetched = dst // block l's destinations: their lists are fetched
		edges := numEdges
		if f := fanouts[l]; f >= 0 {
			edges = capProduct(dst, int64(f), numEdges)
		}
		dst = min(dst+edges, numNodes)
	}
	return fetched, dst
}

// capProduct is min(a·b, limit) for non-negative a, b and limit, without
// overflowing.
func capProduct(a, b, limit int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > limit/b {
		return limit
	}
	return min(a*b, limit)
}

// batchHopBytes bounds SourceBatch's per-hop scratch in the worker when
// a hop misses at most fetched lists: the misses and their slots, their
// requests, and two offsets each.
func batchHopBytes(fetched int64) int64 {
	return (8+4+rangeReqBytes)*grown(fetched) + 8*grown(2*fetched)
}

// push appends x to s, growing a full backing array by a quarter (to at
// least 256 elements) instead of append's doubling of small slices, so
// that a scratch slice's capacity stays within grown of its length.
func push[T any](s []T, x T) []T {
	if len(s) == cap(s) {
		g := make([]T, len(s), max(256, len(s)+len(s)/4))
		copy(g, s)
		s = g
	}
	return append(s, x)
}

// grown bounds the capacity of a slice that push grew to n elements.
func grown(n int64) int64 { return max(256, n+n/4) }

// listBytes is a neighbour list header in the worker's scratch.
const listBytes = int64(unsafe.Sizeof(neighborcache.List{}))

// arenaBytes is the read arena of a worker that preads lists (its
// least size; a list longer than that gets an arena of its own size).
const arenaBytes = 1 << 20

// rangeReqBytes is one SourceBatch read request in the worker's scratch.
const rangeReqBytes = int64(unsafe.Sizeof(storage.RangeReq{}))

// MemBytes is the memory of the batch's arrays: its node ids and its
// blocks' offsets and indices.
func (b *Batch) MemBytes() int64 {
	var n int64
	if len(b.Blocks) > 0 {
		n += 8 * int64(cap(b.Blocks[0].Src))
	}
	for _, bl := range b.Blocks {
		n += 8*int64(cap(bl.Indptr)) + 4*int64(cap(bl.Indices))
	}
	return n
}

// count adds the batch to memacct.SampledBatches.
func (b *Batch) count() {
	b.counted = b.MemBytes()
	memacct.Add(memacct.SampledBatches, b.counted)
}

// Release tells the process's memory counters that the consumer is done
// with the batch (its arrays become garbage once unreferenced). Every
// consumer of Iterator.Next and SpillIterator.Next calls it once; a second
// call is a no-op. It does not touch the arrays.
func (b *Batch) Release() {
	memacct.Add(memacct.SampledBatches, -b.counted)
	b.counted = 0
}

// Targets returns the training nodes of the batch.
func (b *Batch) Targets() []int64 { return b.Blocks[len(b.Blocks)-1].Dst() }

// Nodes returns the batch's collective sampled neighbourhood Ñ_b (targets
// first), Blocks[0].Src.
func (b *Batch) Nodes() []int64 { return b.Blocks[0].Src }

// LevelStats counts one lookup level.
type LevelStats struct {
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// BytesSaved is the list bytes served by this level (cache levels).
	BytesSaved int64 `json:"bytes_saved"`
	// BytesRead is the list bytes requested from storage (storage level).
	BytesRead int64 `json:"bytes_read"`
	// Sampled is the neighbours drawn from the lists this level served:
	// min(fanout, degree) a list, the whole list where the fanout takes
	// all, at every hop the list's node is a destination. Over the three
	// levels it sums to the batch's edges (Σ Blocks[l].NumEdges()).
	// Absent (0) in profiles written before it existed.
	Sampled int64 `json:"sampled,omitempty"`
}

// Share is the share of all lookups that level l served (its hits per
// lookup): how rr and train report each cache's hit rate. The levels are
// asked in turn, so the shares add up to at most 1.
func (s LookupStats) Share(l LevelStats) float64 {
	if s.Lookups == 0 {
		return 0
	}
	return float64(l.Hits) / float64(s.Lookups)
}

// SampledTotal is the neighbours drawn from lists at every level.
func (s LookupStats) SampledTotal() int64 {
	return s.Global.Sampled + s.Dynamic.Sampled + s.Storage.Sampled
}

// The level that served a list, for LevelStats.Sampled.
const (
	levelGlobal uint8 = iota
	levelDynamic
	levelStorage
)

// drew counts n neighbours drawn from a list that level served.
func (s *LookupStats) drew(level uint8, n int64) {
	switch level {
	case levelGlobal:
		s.Global.Sampled += n
	case levelDynamic:
		s.Dynamic.Sampled += n
	default:
		s.Storage.Sampled += n
	}
}

// LookupStats counts neighbour-list lookups at each level, in the order
// they are made (dynamic, global, storage). Invariants:
// Dynamic.Hits+Dynamic.Misses == Lookups; Global.Hits+Global.Misses ==
// Dynamic.Misses; Storage.Hits == Global.Misses; Storage.Misses == 0;
// SampledTotal() == the batch's edges.
type LookupStats struct {
	Lookups int64      `json:"lookups"`
	Global  LevelStats `json:"global"`
	Dynamic LevelStats `json:"dynamic"`
	Storage LevelStats `json:"storage"`
	// LoadBytes is the list bytes loaded into dynamic caches (counted on
	// the first batch of each macro batch).
	LoadBytes int64 `json:"load_bytes"`
}

// BytesRequested is the list bytes requested at all levels.
func (s LookupStats) BytesRequested() int64 {
	return s.Global.BytesSaved + s.Dynamic.BytesSaved + s.Storage.BytesRead
}

// Add accumulates o into s.
func (s *LookupStats) Add(o LookupStats) {
	s.Lookups += o.Lookups
	for _, p := range [][2]*LevelStats{{&s.Global, &o.Global}, {&s.Dynamic, &o.Dynamic}, {&s.Storage, &o.Storage}} {
		p[0].Hits += p[1].Hits
		p[0].Misses += p[1].Misses
		p[0].BytesSaved += p[1].BytesSaved
		p[0].BytesRead += p[1].BytesRead
		p[0].Sampled += p[1].Sampled
	}
	s.LoadBytes += o.LoadBytes
}

// Plan is an epoch's batch construction: the targets of every batch, in
// delivery order.
type Plan struct {
	Epoch int
	// Batches[i] are batch i's targets.
	Batches [][]int64
	// Macro[i] is batch i's macro batch (-1 in random mode).
	Macro []int
	// MacroParts[m] are macro batch m's partitions (nil in random mode).
	MacroParts [][]int
}

// Sampler samples batches from one dataset. It is safe for concurrent use
// by several iterators; each iterator owns its goroutines.
type Sampler struct {
	d     *storage.Dataset
	parts Partitions
	o     Options
	rr    *storage.RowReader
	stage *storage.StageCounters
	wide  bool
	// SourceBatch: readers of indptr.npy (ip) and indices.npy (ix) and
	// how each reads.
	ip, ix       *storage.RowReader
	ipOpt, ixOpt storage.ScatterOptions
}

// New returns a sampler over d. parts may be nil unless opts.Mode is
// ModePartition.
func New(d *storage.Dataset, parts Partitions, opts *Options) (*Sampler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if o.Mode == ModePartition && parts == nil {
		return nil, ErrNoPartitions
	}
	if o.Train == nil {
		o.Train = d.TrainIdx()
	}
	if o.Mode == ModePartition {
		if err := checkPartsPerBatch(o.PartsPerBatch, parts); err != nil {
			return nil, err
		}
		if o.PartsPerBatch == 0 {
			o.PartsPerBatch = PartsPerBatchFor(parts, o.BatchSize)
		}
	}
	s := &Sampler{d: d, parts: parts, o: o, stage: d.Accounting().Stage(storage.StageSample), wide: d.Indices32() == nil}
	if o.Source == SourceBatch {
		if err := s.openBatch(); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	if o.Source != SourceMmap {
		mode := storage.ReadBuffered
		if o.Source == SourceDirect {
			mode = storage.ReadDirect
		}
		rr, err := d.OpenRowReader(storage.FileIndices, mode, s.stage)
		if err != nil {
			return nil, fmt.Errorf("sample: %w", err)
		}
		s.rr = rr
	}
	return s, nil
}

// Close releases the pread descriptors, if any. Iterators must be closed
// first.
func (s *Sampler) Close() error {
	var errs []error
	for _, r := range []*storage.RowReader{s.rr, s.ip, s.ix} {
		if r != nil {
			errs = append(errs, r.Close())
		}
	}
	return errors.Join(errs...)
}

// Options returns the sampler's options with defaults filled in.
func (s *Sampler) Options() Options { return s.o }

// mix is one SplitMix64 step (splitmix.Mix).
func mix(z uint64) uint64 { return splitmix.Mix(z) }

// rng returns the generator of stream (epoch, kind, i).
func (s *Sampler) rng(epoch int, kind uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(s.o.Seed, mix(mix(uint64(epoch))^kind<<56^uint64(i))))
}

const (
	streamShuffle = 1
	streamMacro   = 2
	streamSample  = 3
)

// Plan constructs epoch's batches without sampling them.
func (s *Sampler) Plan(epoch int) (*Plan, error) {
	bs := s.o.BatchSize
	pl := &Plan{Epoch: epoch}
	if s.o.Mode == ModeRandom {
		ids := slices.Clone(s.o.Train)
		r := s.rng(epoch, streamShuffle, 0)
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for lo := 0; lo < len(ids); lo += bs {
			pl.Batches = append(pl.Batches, ids[lo:min(lo+bs, len(ids)):min(lo+bs, len(ids))])
			pl.Macro = append(pl.Macro, -1)
		}
		return pl, nil
	}
	k := s.parts.K()
	perm := s.rng(epoch, streamShuffle, 0).Perm(k)
	for lo := 0; lo < k; lo += s.o.PartsPerBatch {
		ps := perm[lo:min(lo+s.o.PartsPerBatch, k):min(lo+s.o.PartsPerBatch, k)]
		var ids []int64
		for _, p := range ps {
			ids = append(ids, s.parts.TrainMembers(p)...)
		}
		if len(ids) == 0 {
			continue
		}
		m := len(pl.MacroParts)
		pl.MacroParts = append(pl.MacroParts, ps)
		// The batches are a shuffle of the macro batch's training nodes,
		// cut; within a batch the targets stay grouped by partition (in
		// ps order), so that a cut of consecutive targets (the trainer's
		// micro-batches) spans few partitions and shares their
		// neighbourhoods. pos is shuffled as ids would be: the batches'
		// members are those of a shuffle of ids.
		r := s.rng(epoch, streamMacro, m)
		pos := make([]int32, len(ids))
		for i := range pos {
			pos[i] = int32(i)
		}
		r.Shuffle(len(pos), func(i, j int) { pos[i], pos[j] = pos[j], pos[i] })
		out := make([]int64, len(ids))
		cuts := evenCuts(len(ids), bs)
		for c := range len(cuts) - 1 {
			b, e := cuts[c], cuts[c+1]
			slices.Sort(pos[b:e])
			for i, q := range pos[b:e] {
				out[b+i] = ids[q]
			}
			pl.Batches = append(pl.Batches, out[b:e:e])
			pl.Macro = append(pl.Macro, m)
		}
	}
	return pl, nil
}

// PlanVersion identifies how Plan constructs batches; profiles record it,
// so one made under another construction is not taken for this one's.
// 2: partition batches are cut evenly, at most BatchSize + BatchSize/4
// targets (evenCuts).
const PlanVersion = 2

// MaxBatchTargets is the most targets a batch of mode holds at BatchSize
// bs: bs in random mode; bs + bs/4 in partition mode, whose macro batches
// are cut evenly (evenCuts), and for ModeAuto, which may resolve to it.
// Memory bounds on a whole batch take it.
func MaxBatchTargets(bs int, mode Mode) int {
	if mode == ModePartition || mode == ModeAuto {
		return bs + bs/4
	}
	return bs
}

// evenCuts cuts n targets into the fewest batches of at most
// MaxBatchTargets(bs, ModePartition) = bs + bs/4 targets, max(1,
// ⌈n/(bs+bs/4)⌉), whose sizes differ by at most one (larger first), and
// returns the len+1 boundaries. A macro batch of n training nodes then
// gives batches of about bs and no small remainder: with two or more,
// each holds at least ⌊cap/2⌋ targets (about 0.625·bs); one holds n.
func evenCuts(n, bs int) []int {
	maxT := MaxBatchTargets(bs, ModePartition)
	c := max(1, (n+maxT-1)/maxT)
	cuts := make([]int, c+1)
	for i := range c {
		size := n / c
		if i < n%c {
			size++
		}
		cuts[i+1] = cuts[i] + size
	}
	return cuts
}

// denseLimit is the largest node count for which a worker keeps a dense
// global→local map (4 bytes per node); larger graphs use a Go map.
const denseLimit = 1 << 23

// idMap maps global ids to batch-local ids. The dense form stores id+1
// per node (0: absent) and remembers the nodes it set, so reset clears
// only those: O(batch) time and 4 bytes per node of memory (a generation
// stamp per node would double that).
type idMap struct {
	local []int32
	keys  []int32
	m     map[int64]int32
}

// IDMapBytes is one sampling worker's node → local-id map over n nodes: a
// dense int32 per node up to 2^23 nodes, else a Go map sized by the batch
// (counted as 0 here: it is part of the batch's working set).
func IDMapBytes(n int64) int64 {
	if n <= denseLimit {
		return 4 * n
	}
	return 0
}

func newIDMap(n int64) *idMap {
	if n <= denseLimit {
		return &idMap{local: make([]int32, n)}
	}
	return &idMap{m: map[int64]int32{}}
}

func (m *idMap) reset() {
	if m.m != nil {
		clear(m.m)
		return
	}
	for _, k := range m.keys {
		m.local[k] = 0
	}
	m.keys = m.keys[:0]
}

func (m *idMap) get(v int64) (int32, bool) {
	if m.m != nil {
		id, ok := m.m[v]
		return id, ok
	}
	id := m.local[v]
	return id - 1, id != 0
}

func (m *idMap) put(v int64, id int32) {
	if m.m != nil {
		m.m[v] = id
		return
	}
	if m.local[v] == 0 {
		m.keys = push(m.keys, int32(v))
	}
	m.local[v] = id + 1
}

// worker holds one sampling goroutine's scratch state.
type worker struct {
	s     *Sampler
	ids   *idMap
	lists []neighborcache.List
	// from is the level that served each of lists (levelGlobal…).
	from  []uint8
	arena []byte
	pos   []int
	// SourceBatch: a hop's misses (nodes and their slots in lists), the
	// offsets and requests read for them, and the batch's list arena.
	missV   []int64
	missAt  []int32
	offs    []int64
	reqs    []storage.RangeReq
	arena32 []int32
	arena64 []int64
	// arenaUsed is the arena's ids holding the current batch's lists.
	arenaUsed int64
	set       map[int]struct{}
	// reuseWait is the time the current batch spent in ReuseFor.
	reuseWait time.Duration
	// counted is scratchBytes as last added to memacct.SampledBatches.
	counted int64
}

func (s *Sampler) newWorker() *worker {
	memacct.Add(memacct.SamplerScratch, IDMapBytes(s.d.NumNodes()))
	return &worker{s: s, ids: newIDMap(s.d.NumNodes()), set: map[int]struct{}{}}
}

// release drops the worker's id map and scratch from the memacct counts.
func (w *worker) release() {
	memacct.Add(memacct.SamplerScratch, -IDMapBytes(w.s.d.NumNodes()))
	memacct.Add(memacct.SampledBatches, -w.counted)
	w.ids, w.counted = nil, 0
}

// scratchBytes is the worker's reusable arrays beyond the id map's dense
// table: the list headers, the id map's keys, the position scratch and
// the current read arena. They grow to the largest batch the worker has
// sampled (an older arena that lists still point into is garbage once the
// batch is built).
func (w *worker) scratchBytes() int64 {
	n := int64(cap(w.lists))*listBytes + int64(cap(w.from)) + int64(cap(w.arena)) + 8*int64(cap(w.pos)) +
		8*int64(cap(w.missV)) + 4*int64(cap(w.missAt)) + 8*int64(cap(w.offs)) + rangeReqBytes*int64(cap(w.reqs)) +
		4*int64(cap(w.arena32)) + 8*int64(cap(w.arena64))
	if w.ids != nil {
		n += 4 * int64(cap(w.ids.keys))
	}
	return n
}

// recount brings the worker's share of memacct.SampledBatches up to date
// with scratchBytes: per-batch memory, budgeted with the batch it builds
// (WorkerBytesBound), not with the fixed id map.
func (w *worker) recount() {
	n := w.scratchBytes()
	memacct.Add(memacct.SampledBatches, n-w.counted)
	w.counted = n
}

// cached looks v's list up in the macro batch's dynamic cache, then the
// global cache, and returns it with the level that served it; a miss at
// both is counted as a storage lookup, which the caller makes
// (levelStorage, no list). The dynamic cache comes first because the
// planner sizes the global cache by the lists the dynamic cache does not
// serve (planner.Profile.Nbr): a list both hold is the dynamic cache's,
// so the global cache's hits are what it saves.
func (w *worker) cached(v int64, dyn *DynamicCache, st *LookupStats) (neighborcache.List, uint8) {
	s := w.s
	st.Lookups++
	if l, ok := dyn.Lookup(v); ok {
		st.Dynamic.Hits++
		st.Dynamic.BytesSaved += l.Bytes()
		s.stage.Request(1, l.Bytes())
		return l, levelDynamic
	}
	st.Dynamic.Misses++
	if l, ok := s.o.NeighborCache.Lookup(v); ok {
		st.Global.Hits++
		st.Global.BytesSaved += l.Bytes()
		s.stage.Request(1, l.Bytes())
		return l, levelGlobal
	}
	st.Global.Misses++
	st.Storage.Hits++
	return neighborcache.List{}, levelStorage
}

// fetch looks v's list up in the dynamic cache, the global cache, then
// storage (every source but SourceBatch, which reads a hop's misses
// together: readMisses).
func (w *worker) fetch(v int64, dyn *DynamicCache, st *LookupStats) (neighborcache.List, uint8, error) {
	s := w.s
	if l, level := w.cached(v, dyn, st); level != levelStorage {
		return l, level, nil
	}
	if s.rr == nil {
		l := s.d.Neighbors(v)
		st.Storage.BytesRead += l.Bytes()
		s.stage.Request(1, l.Bytes())
		return neighborcache.FromNodeList(l), levelStorage, nil
	}
	need := int(s.d.Degree(v)) * int(s.rr.RowBytes())
	if cap(w.arena)-len(w.arena) < need {
		w.arena = make([]byte, 0, max(need, 1<<20))
	}
	l, buf, err := s.d.ReadNeighbors(s.rr, v, w.arena[len(w.arena):])
	if err != nil {
		return neighborcache.List{}, levelStorage, fmt.Errorf("sample: node %d: %w", v, err)
	}
	w.arena = w.arena[:len(w.arena)+len(buf)]
	st.Storage.BytesRead += l.Bytes()
	return neighborcache.FromNodeList(l), levelStorage, nil
}

// choose fills w.pos with k distinct positions drawn uniformly from
// [0, deg) (Floyd's algorithm); 0 <= k < deg (the caller takes the whole
// list otherwise, drawing nothing).
func (w *worker) choose(r *rand.Rand, deg, k int) []int {
	w.pos = w.pos[:0]
	if k <= 64 {
		for j := deg - k; j < deg; j++ {
			t := r.IntN(j + 1)
			if slices.Contains(w.pos, t) {
				t = j
			}
			w.pos = append(w.pos, t)
		}
		return w.pos
	}
	clear(w.set)
	for j := deg - k; j < deg; j++ {
		t := r.IntN(j + 1)
		if _, ok := w.set[t]; ok {
			t = j
		}
		w.set[t] = struct{}{}
		w.pos = append(w.pos, t)
	}
	return w.pos
}

// local returns u's batch-local id, appending u to nodes when it is new.
func (w *worker) local(u int64, nodes []int64) (int32, []int64) {
	if invariants.Enabled && uint64(u) >= uint64(w.s.d.NumNodes()) {
		panic(fmt.Sprintf("sample: node id %d out of range [0,%d) passed the open-time checks", u, w.s.d.NumNodes()))
	}
	if id, ok := w.ids.get(u); ok {
		return id, nodes
	}
	id := int32(len(nodes))
	w.ids.put(u, id)
	return id, append(nodes, u)
}

// sample builds the blocks of one batch.
func (w *worker) sample(ctx context.Context, epoch, index, macro int, targets []int64, dyn *DynamicCache) (*Batch, error) {
	s := w.s
	L := len(s.o.Fanouts)
	reuse := s.o.Reuse
	if s.o.ReuseFor != nil {
		reuse = nil
	}
	r := s.rng(epoch, streamSample, index)
	b := &Batch{Epoch: epoch, Index: index, Macro: macro, Blocks: make([]Block, L)}
	w.ids.reset()
	w.lists, w.from = w.lists[:0], w.from[:0]
	// The lists alias the caches' arrays (a macro batch's DynamicCache,
	// the global neighbour cache): zero them when done, or the scratch
	// keeps every macro batch this worker sampled alive until it reuses
	// the slots.
	defer func() { clear(w.lists); w.lists = w.lists[:0]; w.recount() }()
	w.arena = w.arena[:0]
	w.arenaUsed = 0
	nodes := make([]int64, 0, len(targets)*4)
	for _, v := range targets {
		if _, dup := w.ids.get(v); dup {
			return nil, fmt.Errorf("%w: batch %d: target %d appears twice", ErrInvalidOptions, index, v)
		}
		w.ids.put(v, int32(len(nodes)))
		nodes = append(nodes, v)
	}
	srcLen := make([]int, L)
	numDst := len(nodes)
	hop1End := numDst
	for l := L - 1; l >= 0; l-- {
		hop := L - l
		k := s.o.Fanouts[l]
		blk := &b.Blocks[l]
		blk.NumDst = numDst
		blk.Indptr = make([]int64, numDst+1)
		blk.Indices = make([]int32, 0, numDst*max(min(k, 16), 1))
		reused := func(i int) bool {
			return hop >= 2 && i >= len(targets) && i < hop1End && reuse != nil && reuse.Contains(nodes[i])
		}
		// The lists of this hop's new destinations, in order: every
		// destination's list is looked up once per batch, when it first
		// is one.
		w.missV, w.missAt = w.missV[:0], w.missAt[:0]
		for i := len(w.lists); i < numDst; i++ {
			if reused(i) {
				w.lists, w.from = push(w.lists, neighborcache.List{}), push(w.from, levelStorage)
				continue
			}
			if s.ix != nil {
				l, level := w.cached(nodes[i], dyn, &b.Stats)
				if level == levelStorage {
					w.missV, w.missAt = push(w.missV, nodes[i]), push(w.missAt, int32(i))
				}
				w.lists, w.from = push(w.lists, l), push(w.from, level)
				continue
			}
			l, level, err := w.fetch(nodes[i], dyn, &b.Stats)
			if err != nil {
				return nil, err
			}
			w.lists, w.from = push(w.lists, l), push(w.from, level)
		}
		if err := w.readMisses(&b.Stats); err != nil {
			return nil, err
		}
		for i := 0; i < numDst; i++ {
			if reused(i) {
				if hop == 2 {
					b.Reused = append(b.Reused, int32(i))
				}
				blk.Indptr[i+1] = int64(len(blk.Indices))
				continue
			}
			list := w.lists[i]
			var id int32
			if deg := list.Len(); k < 0 || k >= deg {
				for p := range deg {
					id, nodes = w.local(list.At(p), nodes)
					blk.Indices = append(blk.Indices, id)
				}
			} else {
				for _, p := range w.choose(r, deg, k) {
					id, nodes = w.local(list.At(p), nodes)
					blk.Indices = append(blk.Indices, id)
				}
			}
			b.Stats.drew(w.from[i], int64(len(blk.Indices))-blk.Indptr[i])
			blk.Indptr[i+1] = int64(len(blk.Indices))
		}
		srcLen[l] = len(nodes)
		if l == L-1 {
			hop1End = len(nodes)
			if s.o.ReuseFor != nil && L >= 2 {
				t0 := time.Now()
				set, err := s.o.ReuseFor(ctx, epoch, index, nodes[len(targets):hop1End:hop1End])
				w.reuseWait += time.Since(t0)
				if err != nil {
					return nil, fmt.Errorf("sample: batch %d: reuse decision: %w", index, err)
				}
				reuse = set
			}
		}
		numDst = len(nodes)
	}
	for l := range b.Blocks {
		b.Blocks[l].Src = nodes[:srcLen[l]:srcLen[l]]
	}
	if len(nodes) > 1<<31-1 {
		return nil, errors.New("sample: batch neighbourhood exceeds 2^31 nodes")
	}
	b.count()
	return b, nil
}
