package featurecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/topk"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Errors returned by the package. Every error wraps one of them.
var (
	// ErrInvalidOptions is wrapped by Options.Validate's errors.
	ErrInvalidOptions = errors.New("featurecache: invalid options")
	// ErrBudget reports a non-zero budget too small for the address table.
	ErrBudget = errors.New("featurecache: budget too small")
	// ErrNodeRange reports a node id outside [0, NumNodes).
	ErrNodeRange = errors.New("featurecache: node id out of range")
	// ErrShortBuffer reports a destination too small for the rows asked.
	ErrShortBuffer = errors.New("featurecache: destination buffer too small")
	// ErrClosed reports use after Close.
	ErrClosed = errors.New("featurecache: cache closed")
)

// Policy selects which rows the cache holds.
type Policy int

// Policies. The zero value, PolicyAuto, is PolicyProfiled when
// Options.Counts is set and PolicyDegree otherwise.
const (
	PolicyAuto Policy = iota
	PolicyProfiled
	PolicyDegree
	PolicyDynamic
)

// String names the policy as ParsePolicy spells it.
func (p Policy) String() string {
	switch p {
	case PolicyAuto:
		return "auto"
	case PolicyProfiled:
		return "profiled"
	case PolicyDegree:
		return "degree"
	case PolicyDynamic:
		return "dynamic"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses "auto", "profiled", "degree" or "dynamic".
func ParsePolicy(s string) (Policy, error) {
	for p := PolicyAuto; p <= PolicyDynamic; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: policy %q: want auto, profiled, degree or dynamic", ErrInvalidOptions, s)
}

// Memory constants of the dynamic policy (see the package doc).
const (
	// DynamicItemOverhead is charged per resident row on top of its bytes:
	// the []byte header (24) plus ristretto's internal per-item charge.
	DynamicItemOverhead = 24 + 48
	// DynamicCounterBytes is charged per TinyLFU counter.
	DynamicCounterBytes = 3
	// dynamicCountersPerRow is the number of counters per row that fits,
	// as ristretto recommends.
	dynamicCountersPerRow = 10
)

// Options tunes New. A nil *Options means the defaults.
type Options struct {
	// Policy selects the cached rows. Default PolicyAuto.
	Policy Policy
	// Counts holds one access count per node for PolicyProfiled (from a
	// profiling or pre-sampling epoch). It is read only during New.
	Counts []uint32
	// Mode is how misses (and the fill) are read. Default
	// storage.ReadBuffered; storage.ReadAuto takes O_DIRECT where the
	// file system supports it.
	Mode storage.ReadMode
	// IODepth bounds the goroutines that read the misses of one Gather,
	// i.e. the reads in flight per Gather. They block in pread, not on a
	// CPU, so it may exceed the core count: an SSD (and the virtio disk of
	// docs/ooc.md, 10k IOPS at depth 1, 85k at 16, 128k at 64 through
	// io_uring) serves random reads only as fast as it is kept busy.
	// Default DefaultIODepth.
	IODepth int
	// CoalesceGap is how misses are merged into large reads (see
	// storage.RowReader.ReadScattered): two missed rows are read with one
	// call when fewer than CoalesceGap unneeded rows lie between them.
	// 0, the default, takes the break-even gap of the dataset's device
	// profile (storage.ReadDeviceProfile, written by ssdgnn probe), or of
	// storage.DefaultDeviceProfile where it has none. PerRowReads reads
	// every row on its own, as before read plans.
	CoalesceGap int64
	// MaxReadAmplification caps a merged plan's bytes read ÷ the bytes
	// its rows occupy: gaps are merged smallest first while they fit
	// (readplan.Options.MaxAmplification). 0, the default, is
	// DefaultMaxReadAmplification; UncappedReads merges every gap
	// below CoalesceGap; otherwise >= 1 (1: only rows that share or touch
	// a block).
	MaxReadAmplification float64
	// MaxReadBytes caps one merged read. Default
	// storage.DefaultMaxReadBytes. Each Gather holds IODepth slots of this
	// size (storage.RowReader.ScratchBytesFor).
	MaxReadBytes int64
	// IO is how the reads of a Gather are submitted. Default
	// storage.IOAuto: io_uring where the kernel allows it, else pread.
	IO storage.IOEngine
	// Stage receives Gather's counts. Default: the dataset's "gather"
	// stage.
	Stage *storage.StageCounters
	// LoadStage receives the fill's counts. Default: the dataset's "load"
	// stage.
	LoadStage *storage.StageCounters
	// Logger receives one Info line when the cache is filled. Default: no
	// logging.
	Logger *slog.Logger
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.Policy < PolicyAuto || o.Policy > PolicyDynamic {
		return fmt.Errorf("%w: Policy %d", ErrInvalidOptions, int(o.Policy))
	}
	if o.Policy == PolicyProfiled && o.Counts == nil {
		return fmt.Errorf("%w: PolicyProfiled needs Counts", ErrInvalidOptions)
	}
	if o.IODepth < 0 {
		return fmt.Errorf("%w: IODepth %d, want >= 0", ErrInvalidOptions, o.IODepth)
	}
	if o.CoalesceGap < PerRowReads {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want >= %d", opterr.Field("CoalesceGap"), o.CoalesceGap, PerRowReads)
	}
	if o.MaxReadBytes < 0 {
		return fmt.Errorf("%w: MaxReadBytes %d, want >= 0", ErrInvalidOptions, o.MaxReadBytes)
	}
	if a := o.MaxReadAmplification; a != 0 && a != UncappedReads && !(a >= 1 && !math.IsInf(a, 0)) {
		return fmt.Errorf("%w: MaxReadAmplification %v, want 0 (default), UncappedReads or a finite value >= 1", ErrInvalidOptions, a)
	}
	if o.IO < storage.IOAuto || o.IO > storage.IOUring {
		return fmt.Errorf("%w: IO %d", ErrInvalidOptions, int(o.IO))
	}
	if o.Mode != storage.ReadBuffered && o.Mode != storage.ReadDirect && o.Mode != storage.ReadAuto {
		return opterr.Errorf(ErrInvalidOptions, "%s %d", opterr.Field("Mode"), int(o.Mode))
	}
	return nil
}

func (o *Options) withDefaults(d *storage.Dataset) Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Policy == PolicyAuto {
		r.Policy = PolicyDegree
		if r.Counts != nil {
			r.Policy = PolicyProfiled
		}
	}
	if r.IODepth == 0 {
		r.IODepth = DefaultIODepth
	}
	if r.Stage == nil {
		r.Stage = d.Accounting().Stage(storage.StageGather)
	}
	if r.LoadStage == nil {
		r.LoadStage = d.Accounting().Stage(storage.StageLoad)
	}
	return r
}

// PerRowReads is the Options.CoalesceGap that reads every missed row on
// its own.
const PerRowReads = -1

// UncappedReads is the Options.MaxReadAmplification that merges every gap
// below the merge gap, whatever the bytes.
const UncappedReads = -1

// DefaultMaxReadAmplification is Options.MaxReadAmplification's default:
// a merged plan reads at most 6× the bytes of the missed rows.
//
// Measured 2026-11-25 (docs/ooc.md, "Read amplification"): the 3 GiB
// benchmark's training child under 1 GiB, streamed whole batches, same
// plan and caches, one epoch per cap. Epoch seconds and bytes read:
//
//	cap        2       4       6       8       12      none
//	epoch s    60.7    45.5    36.6    32.9    29.6    31.8
//	GB read    7.5     13.5    19.7    26.0    33.4    33.5
//	reads      3.60 M  2.22 M  1.40 M  0.82 M  0.37 M  0.37 M
//
// mmap-baseline read 77 GB in the same setting. 6 keeps the bytes 3.9×
// below it (the floor is 3×; 8 was 2.98×) and saves 24.1 s of the
// 28.9–31.1 s that no cap (or 12) saves over cap 2. The cap used to be
// storage.DefaultMaxReadAmplification (2), set on the 1.5 GiB run's
// micro-batches, where merging by the gap alone gained nothing.
const DefaultMaxReadAmplification = 6

// ReadCap is the cap on bytes read ÷ the missed rows' bytes that a cache
// whose reads merge applies for Options.MaxReadAmplification opt: the
// default for 0, none (0) for UncappedReads, else opt.
func ReadCap(opt float64) float64 {
	if opt == 0 {
		opt = DefaultMaxReadAmplification
	}
	return storage.ReadAmplification(true, opt)
}

// ReadPlan says how a cache reads its misses.
type ReadPlan struct {
	// GapRows is the merge gap in rows (0: one read per row).
	GapRows int64 `json:"gap_rows"`
	// MaxAmplification caps bytes read ÷ bytes the missed rows occupy
	// (0: no cap).
	MaxAmplification float64 `json:"max_amplification"`
	// Source is where GapRows came from: "option", "device.json" or
	// "default" (storage.DefaultDeviceProfile).
	Source string `json:"source"`
	// Engine is "pread" or "uring"; Mode "direct" or "buffered".
	Engine string `json:"engine"`
	Mode   string `json:"mode"`
	// ScratchBytes is the read slots one Gather holds.
	ScratchBytes int64 `json:"scratch_bytes"`
	// Profile is the device's costs, from CostSource ("device.json", or
	// "default": storage.DefaultDeviceProfile); GapRows came from it
	// unless Source is "option".
	Profile    *storage.DeviceProfile `json:"profile,omitempty"`
	CostSource string                 `json:"cost_source"`
}

// PlanReads is the read plan a cache with options o (nil: the defaults)
// over rows of rowBytes reads its misses by, given the device's costs
// prof from costSource ("device.json" or "default"): the merge gap (the
// option, or prof's break-even gap; 0: one read per row), the
// amplification cap (0 when there is no gap) and where each came from.
// Engine, Mode and ScratchBytes belong to a cache's reader and are left
// empty. A cache's ReadPlan is this plus them; planner.ReadModel compares
// a profile's pricing against it.
func PlanReads(prof *storage.DeviceProfile, costSource string, rowBytes int64, o *Options) ReadPlan {
	var opt Options
	if o != nil {
		opt = *o
	}
	p := ReadPlan{Source: costSource, CostSource: costSource, Profile: prof}
	switch {
	case opt.CoalesceGap == PerRowReads:
		p.Source = "option"
	case opt.CoalesceGap > 0:
		p.GapRows, p.Source = opt.CoalesceGap, "option"
	default:
		p.GapRows = prof.GapRows(rowBytes)
	}
	if p.GapRows > 0 {
		p.MaxAmplification = ReadCap(opt.MaxReadAmplification)
	}
	return p
}

// PlanReadsFor is PlanReads with d's rows and device profile
// (storage.DeviceProfileOrDefault).
func PlanReadsFor(d *storage.Dataset, o *Options) (ReadPlan, error) {
	prof, src, err := storage.DeviceProfileOrDefault(d.Dir(), d.FeatRowBytes())
	if err != nil {
		return ReadPlan{}, err
	}
	return PlanReads(prof, src, d.FeatRowBytes(), o), nil
}

// resolveReadPlan fills c.plan from the options and the dataset's device
// profile.
func (c *Cache) resolveReadPlan() error {
	prof, src, err := storage.DeviceProfileOrDefault(c.d.Dir(), c.rowBytes)
	if err != nil {
		return err
	}
	c.plan = PlanReads(prof, src, c.rowBytes, &c.opts)
	c.plan.Engine, c.plan.Mode = c.reader.Engine().String(), c.reader.Mode().String()
	c.plan.ScratchBytes = c.reader.ScratchBytesFor(c.scatterOptions())
	return nil
}

// scatterOptions is how ReadScattered reads the misses under c.plan.
func (c *Cache) scatterOptions() storage.ScatterOptions {
	so := c.opts.scatterOptions()
	so.GapRows, so.MaxAmplification = c.plan.GapRows, c.plan.MaxAmplification
	return so
}

// ReadPlan says how misses are read.
func (c *Cache) ReadPlan() ReadPlan { return c.plan }

// ReadModel plans reads as Gather reads its misses (the same gap, cap,
// read size and alignment), without reading.
func (c *Cache) ReadModel() (*storage.ReadModel, error) {
	return c.reader.ReadModel(c.scatterOptions())
}

// BytesFor is the memory a static cache of n rows of rowBytes bytes over a
// graph of numNodes nodes needs: the int32 address table plus the rows.
func BytesFor(n, rowBytes, numNodes int64) int64 {
	return 4*numNodes + n*rowBytes
}

// CapacityFor is the number of rows a static cache fits in budget bytes
// (see BytesFor); 0 when the budget cannot hold the table, and never more
// than numNodes.
func CapacityFor(budget, rowBytes, numNodes int64) int64 {
	if rowBytes <= 0 || budget < 4*numNodes {
		return 0
	}
	return min((budget-4*numNodes)/rowBytes, numNodes)
}

// DynamicCapacityFor is the number of rows the dynamic policy is sized
// for in budget bytes (its TinyLFU counters are sized from it), charging
// each row its overhead and its counters. The rows resident at once are
// bounded by ristretto's MaxCost, which is the budget less the counters'
// bytes, so a few more rows than this may be resident.
func DynamicCapacityFor(budget, rowBytes int64) int64 {
	per := rowBytes + DynamicItemOverhead + dynamicCountersPerRow*DynamicCounterBytes
	if per <= 0 || budget <= 0 {
		return 0
	}
	return budget / per
}

// Stats are Gather's counts since New. Requests = Hits + Misses always.
type Stats struct {
	Policy         string `json:"policy"`
	CachedRows     int64  `json:"cached_rows"` // static: rows held; dynamic: resident after the last processed Set
	CapacityRows   int64  `json:"capacity_rows"`
	MemoryBytes    int64  `json:"memory_bytes"` // static: BytesFor; dynamic: the budget
	Requests       int64  `json:"requests"`
	Hits           int64  `json:"hits"`
	Misses         int64  `json:"misses"`
	BytesRequested int64  `json:"bytes_requested"`
	BytesMissed    int64  `json:"bytes_missed"` // payload bytes fetched from storage
	// Dynamic policy only; exact after Wait.
	Offered  int64 `json:"offered,omitempty"`  // misses offered to ristretto
	Admitted int64 `json:"admitted,omitempty"` // keys added
	Rejected int64 `json:"rejected,omitempty"` // rejected by TinyLFU admission or dropped from the set buffer
	Evicted  int64 `json:"evicted,omitempty"`
}

// HitRate is Hits/Requests, 0 without requests.
func (s Stats) HitRate() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Requests)
}

// Cache is a feature cache over one dataset. See the package doc.
type Cache struct {
	d        *storage.Dataset
	opts     Options
	numNodes int64
	rowBytes int64
	capacity int64
	budget   int64

	slots  []int32 // node → slot, -1 absent; nil when disabled or dynamic
	rows   []byte  // capacity·rowBytes
	cached int64

	reader *storage.RowReader
	plan   ReadPlan
	dyn    *ristretto.Cache[int64, []byte]
	// counted is what the cache added to memacct.FeatureCache (released
	// by Close).
	counted int64

	closed   atomic.Bool
	requests atomic.Int64
	hits     atomic.Int64
	bytesReq atomic.Int64
	bytesMis atomic.Int64
	offered  atomic.Int64

	// scratches is the idle Gather scratches (scratch.go), counted in
	// memacct.BatchBuffers until Close.
	scratchMu sync.Mutex
	scratches []*scratch
}

// New builds a cache of at most budget bytes over d's features and, for
// the static policies, fills it. ctx cancels the fill.
func New(ctx context.Context, d *storage.Dataset, budget int64, opts *Options) (*Cache, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults(d)
	n := d.NumNodes()
	if o.Counts != nil && int64(len(o.Counts)) != n {
		return nil, fmt.Errorf("%w: Counts has %d entries for %d nodes", ErrInvalidOptions, len(o.Counts), n)
	}
	if budget < 0 {
		return nil, fmt.Errorf("%w: budget %d < 0", ErrBudget, budget)
	}
	c := &Cache{d: d, opts: o, numNodes: n, rowBytes: d.FeatRowBytes(), budget: budget}
	r, err := d.OpenRowReader(storage.FileFeatures, o.Mode, o.Stage)
	if err != nil {
		return nil, err
	}
	c.reader = r
	if err := r.SetEngine(o.IO); err != nil {
		r.Close()
		return nil, err
	}
	if err := c.resolveReadPlan(); err != nil {
		r.Close()
		return nil, err
	}
	switch {
	case budget == 0:
	case o.Policy == PolicyDynamic:
		err = c.initDynamic()
	default:
		err = c.initStatic(ctx)
	}
	if err != nil {
		c.reader.Close()
		return nil, err
	}
	if o.Logger != nil {
		o.Logger.Info("feature cache ready", "policy", o.Policy.String(), "rows", c.cached,
			"capacity", c.capacity, "budget_bytes", budget, "read_gap_rows", c.plan.GapRows, "read_max_amplification", c.plan.MaxAmplification,
			"gap_from", c.plan.Source, "io", c.plan.Engine, "read_mode", c.plan.Mode)
	}
	return c, nil
}

func (c *Cache) initDynamic() error {
	c.capacity = DynamicCapacityFor(c.budget, c.rowBytes)
	if c.capacity == 0 {
		return fmt.Errorf("%w: %d bytes hold no %d-byte row with its overhead", ErrBudget, c.budget, c.rowBytes)
	}
	counters := c.capacity * dynamicCountersPerRow
	maxCost := c.budget - counters*DynamicCounterBytes
	dyn, err := ristretto.NewCache(&ristretto.Config[int64, []byte]{
		NumCounters: counters,
		MaxCost:     maxCost,
		BufferItems: 64,
		Metrics:     true,
		// Charge our own per-item overhead; ristretto's internal charge
		// is part of DynamicItemOverhead.
		IgnoreInternalCost: true,
	})
	if err != nil {
		return fmt.Errorf("featurecache: ristretto: %w", err)
	}
	c.dyn = dyn
	c.counted = c.budget
	memacct.Add(memacct.FeatureCache, c.counted)
	return nil
}

func (c *Cache) initStatic(ctx context.Context) error {
	if c.budget < 4*c.numNodes {
		return fmt.Errorf("%w: %d bytes cannot hold the %d-byte address table of %d nodes", ErrBudget, c.budget, 4*c.numNodes, c.numNodes)
	}
	c.capacity = CapacityFor(c.budget, c.rowBytes, c.numNodes)
	var sel []int64
	if c.opts.Policy == PolicyProfiled {
		counts := c.opts.Counts
		sel = topk.Select(c.numNodes, c.capacity, func(v int64) uint32 { return counts[v] })
	} else {
		d := c.d
		sel = topk.Select(c.numNodes, c.capacity, func(v int64) int64 { return d.Degree(v) + 1 })
	}
	c.slots = make([]int32, c.numNodes)
	for i := range c.slots {
		c.slots[i] = -1
	}
	for s, v := range sel {
		c.slots[v] = int32(s)
	}
	c.rows = make([]byte, int64(len(sel))*c.rowBytes)
	c.cached = int64(len(sel))
	c.counted = 4*int64(len(c.slots)) + int64(len(c.rows))
	memacct.Add(memacct.FeatureCache, c.counted)
	return c.fill(ctx, sel)
}

// fillChunk is the most rows of one fill read plan: enough for the plan
// to merge neighbouring rows, small enough to keep ctx checks frequent.
// A variable so that tests can cut small caches into several chunks.
var fillChunk = 1 << 16

// fill reads the rows of sel (ascending ids, slot i = sel[i]) as the
// gather reads misses: each chunk of fillChunk rows planned with the
// cache's merge gap and amplification cap (c.scatterOptions) and read
// through the cache's I/O engine, a chunk at a time. Reading each row (or
// run of consecutive ids) on its own, as it did before, made about one
// random read per cached row: 3.5 s of a 10 s start for 173 k rows on the
// 3 GiB bench dataset. The reader is the fill's own, accounted in the
// load stage; its read slots are the gather's, which it uses before the
// gather does.
func (c *Cache) fill(ctx context.Context, sel []int64) error {
	if len(sel) == 0 {
		return nil
	}
	r, err := c.d.OpenRowReader(storage.FileFeatures, c.opts.Mode, c.opts.LoadStage)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.SetEngine(c.opts.IO); err != nil {
		return err
	}
	so := c.scatterOptions()
	reqs := make([]storage.RowReq, 0, min(len(sel), fillChunk))
	for lo := 0; lo < len(sel); lo += fillChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+fillChunk, len(sel))
		reqs = reqs[:0]
		for i := lo; i < hi; i++ {
			reqs = append(reqs, storage.RowReq{ID: sel[i], Pos: int64(i - lo)})
		}
		if err := r.ReadScattered(reqs, c.rows[int64(lo)*c.rowBytes:int64(hi)*c.rowBytes], so); err != nil {
			return err
		}
	}
	return nil
}

// RowBytes is the size of one feature row in the dataset's dtype.
func (c *Cache) RowBytes() int64 { return c.rowBytes }

// Policy is the effective policy.
func (c *Cache) Policy() Policy { return c.opts.Policy }

// Rows is the static cache's backing buffer (see the package doc).
// Read-only; valid until Close.
func (c *Cache) Rows() []byte { return c.rows }

// Slots is the static cache's address table, node → slot or -1 (see the
// package doc). Read-only; valid until Close.
func (c *Cache) Slots() []int32 { return c.slots }

// Contains reports whether v's row is served from memory (for the dynamic
// policy: resident right now).
func (c *Cache) Contains(v int64) bool {
	if v < 0 || v >= c.numNodes {
		return false
	}
	if c.dyn != nil {
		_, ok := c.dyn.Get(v)
		return ok
	}
	return c.slots != nil && c.slots[v] >= 0
}

// Gather copies the rows of ids, in ids order, into dst, which must hold
// len(ids)·RowBytes() bytes: hits from memory, misses from storage read in
// parallel by at most IODepth goroutines. Rows are in the dataset's
// feature dtype. Duplicate ids are served (and counted) once per
// occurrence.
func (c *Cache) Gather(ids []int64, dst []byte) error {
	if c.closed.Load() {
		return ErrClosed
	}
	s := c.getScratch()
	defer c.putScratch(s)
	return c.gather(ids, dst, s, 0)
}

// gather is Gather with the scratch s; served more of the batch's rows
// are hits the caller took itself (GatherF32Served).
func (c *Cache) gather(ids []int64, dst []byte, s *scratch, served int64) error {
	need := int64(len(ids)) * c.rowBytes
	if int64(len(dst)) < need {
		return fmt.Errorf("%w: %d bytes for %d rows of %d", ErrShortBuffer, len(dst), len(ids), c.rowBytes)
	}
	for i, v := range ids {
		if v < 0 || v >= c.numNodes {
			return fmt.Errorf("%w: ids[%d] = %d, have %d nodes", ErrNodeRange, i, v, c.numNodes)
		}
	}
	s.reserve(len(ids))
	miss := s.miss[:0]
	rb := c.rowBytes
	switch {
	case c.dyn != nil:
		for i, v := range ids {
			if row, ok := c.dyn.Get(v); ok && int64(len(row)) == rb {
				copy(dst[int64(i)*rb:], row)
			} else {
				miss = append(miss, i)
			}
		}
	case c.slots != nil:
		for i, v := range ids {
			if s := c.slots[v]; s >= 0 {
				copy(dst[int64(i)*rb:int64(i+1)*rb], c.rows[int64(s)*rb:int64(s+1)*rb])
			} else {
				miss = append(miss, i)
			}
		}
	default:
		for i := range ids {
			miss = append(miss, i)
		}
	}
	s.miss = miss
	hits := int64(len(ids) - len(miss))
	c.opts.Stage.Request(hits, hits*rb)
	c.requests.Add(int64(len(ids)))
	c.hits.Add(hits)
	c.bytesReq.Add(need)
	c.bytesMis.Add(int64(len(miss)) * rb)
	if err := c.readMisses(ids, miss, dst, s, hits+served); err != nil {
		return err
	}
	if c.dyn != nil {
		for _, i := range miss {
			row := make([]byte, rb)
			copy(row, dst[int64(i)*rb:int64(i+1)*rb])
			c.dyn.Set(ids[i], row, rb+DynamicItemOverhead)
		}
		c.offered.Add(int64(len(miss)))
	}
	return nil
}

// DefaultIODepth is Options.IODepth's default: storage.DefaultGatherDepth
// (64 reads in flight; 16 before 2026-11-26).
const DefaultIODepth = storage.DefaultGatherDepth

// readMisses reads the rows ids[i], i in miss, into dst as one planned
// batch (storage.RowReader.ReadScattered), with s's requests; hits rows
// of the same batch came from the cache.
func (c *Cache) readMisses(ids []int64, miss []int, dst []byte, s *scratch, hits int64) error {
	if len(miss) == 0 {
		return nil
	}
	reqs := s.reqs[:0]
	for _, i := range miss {
		reqs = append(reqs, storage.RowReq{ID: ids[i], Pos: int64(i)})
	}
	s.reqs = reqs
	// The hits are rows the batch needs too: the cap counts them, so
	// that what the cache serves does not shrink the merge budget
	// around the misses (storage.ScatterOptions.CreditRows).
	so := c.scatterOptions()
	so.CreditRows = hits
	return c.reader.ReadScattered(reqs, dst, so)
}

// GatherF32 is Gather decoding the rows to float32 (float16 features are
// widened) into dst, which must hold len(ids)·FeatDim floats. float32 rows
// are gathered straight into dst; float16 rows go through a pooled scratch
// buffer.
func (c *Cache) GatherF32(ids []int64, dst []float32) error {
	return c.GatherF32Served(ids, dst, 0)
}

// GatherF32Served is GatherF32 for a caller that took served of the
// batch's cache hits itself and asks only for the rest (the zero-copy
// input path reads the cache's rows in place and gathers the misses).
// Those hits count under the read cap as Gather's own hits do (see the
// package doc, "Reading misses"); they are not counted in Stats.
func (c *Cache) GatherF32Served(ids []int64, dst []float32, served int64) error {
	if c.closed.Load() {
		return ErrClosed
	}
	dim := int64(c.d.FeatDim())
	n := int64(len(ids)) * dim
	if int64(len(dst)) < n {
		return fmt.Errorf("%w: %d floats for %d rows of %d", ErrShortBuffer, len(dst), len(ids), dim)
	}
	s := c.getScratch()
	defer c.putScratch(s)
	if n == 0 {
		return c.gather(ids, nil, s, served)
	}
	if c.rowBytes == 4*dim { // float32: the rows' bytes are dst's bytes
		return c.gather(ids, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*n), s, served)
	}
	buf := s.rowBuf(int64(len(ids)) * c.rowBytes)
	if err := c.gather(ids, buf, s, served); err != nil {
		return err
	}
	dtype := c.d.Manifest().FeatDType
	for i := range ids {
		storage.DecodeFeatureRow(dtype, buf[int64(i)*c.rowBytes:int64(i+1)*c.rowBytes], dst[int64(i)*dim:int64(i+1)*dim])
	}
	return nil
}

// Wait blocks until the dynamic policy has applied every offered row, so
// that Stats' admission figures and CachedRows are exact. A no-op for the
// static policies.
func (c *Cache) Wait() {
	if c.dyn != nil && !c.closed.Load() {
		c.dyn.Wait()
	}
}

// Stats returns the counts since New.
func (c *Cache) Stats() Stats {
	s := Stats{
		Policy:         c.opts.Policy.String(),
		CachedRows:     c.cached,
		CapacityRows:   c.capacity,
		Requests:       c.requests.Load(),
		Hits:           c.hits.Load(),
		BytesRequested: c.bytesReq.Load(),
		BytesMissed:    c.bytesMis.Load(),
	}
	s.Misses = s.Requests - s.Hits
	switch {
	case c.dyn != nil:
		s.MemoryBytes = c.budget
		s.Offered = c.offered.Load()
		if m := c.dyn.Metrics; m != nil && !c.closed.Load() {
			s.Admitted = int64(m.KeysAdded())
			s.Rejected = int64(m.SetsRejected() + m.SetsDropped())
			s.Evicted = int64(m.KeysEvicted())
			s.CachedRows = s.Admitted - s.Evicted
		}
	case c.slots != nil:
		s.MemoryBytes = BytesFor(c.cached, c.rowBytes, c.numNodes)
	}
	return s
}

// ResidentCostBytes is the dynamic policy's charged bytes right now
// (ristretto's cost added minus evicted; exact after Wait), never more than
// its MaxCost. 0 for the static policies.
func (c *Cache) ResidentCostBytes() int64 {
	if c.dyn == nil || c.closed.Load() || c.dyn.Metrics == nil {
		return 0
	}
	return int64(c.dyn.Metrics.CostAdded() - c.dyn.Metrics.CostEvicted())
}

// Close stops the dynamic policy's goroutines, releases the buffers and
// closes the storage reader. Rows and Slots must not be used afterwards.
func (c *Cache) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.dyn != nil {
		c.dyn.Close()
	}
	c.rows, c.slots = nil, nil
	c.releaseScratches()
	memacct.Add(memacct.FeatureCache, -c.counted)
	c.counted = 0
	return c.reader.Close()
}
