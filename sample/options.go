package sample

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Mode is a batch-construction method.
type Mode string

// Batch-construction modes.
const (
	// ModeRandom shuffles the training nodes each epoch and cuts batches.
	ModeRandom Mode = "random"
	// ModePartition is OUTRE's partition-based selection: macro batches of
	// PartsPerBatch random partitions, micro batches cut from their
	// shuffled training nodes.
	ModePartition Mode = "partition"
	// ModeAuto is for callers that choose between the two (train's
	// AutoSelection: partition where the dataset has a partitioning); the
	// sampler itself does not accept it.
	ModeAuto Mode = "auto"
)

// ParseMode parses "random", "partition" or "auto".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeRandom, ModePartition, ModeAuto:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%w: mode %q: want auto, random or partition", ErrInvalidOptions, s)
}

// Source selects how neighbour lists that miss every cache are read.
type Source int

// Sources.
const (
	// SourceMmap reads indices through the dataset's mapping (default).
	SourceMmap Source = iota
	// SourcePread reads each list with pread through the page cache.
	SourcePread
	// SourceDirect reads each list with pread on an O_DIRECT descriptor.
	SourceDirect
	// SourceBatch reads the lists of all of a hop's destinations that
	// miss the caches together, in two rounds of storage.ReadRanges: the
	// nodes' offsets from indptr.npy, then their lists from indices.npy,
	// each sorted, merged into large reads by the device's break-even gap
	// under an amplification cap, and submitted through io_uring where
	// the kernel allows it, on O_DIRECT descriptors where the file system
	// supports them. One worker holds at most ListArenaBytes of lists a
	// batch; lists beyond that are read through the mapping. Batches are
	// those of every other source.
	SourceBatch
)

// Read tuning of SourceBatch.
const (
	// ListArenaBytes is the most list bytes one worker reads into
	// memory for one batch with SourceBatch.
	ListArenaBytes = 16 << 20
	// listReadBytes and listReadDepth are SourceBatch's largest read
	// and reads in flight (storage.ScatterOptions).
	listReadBytes = 128 << 10
	listReadDepth = 16
	// PerListReads is the Options.ReadGapBytes that reads every list
	// (and every node's offsets) on its own.
	PerListReads = -1
	// UncappedReads is the Options.MaxReadAmp that merges every gap
	// below the merge gap, whatever the bytes.
	UncappedReads = -1
)

// String names the source as the CLI spells it.
func (s Source) String() string {
	switch s {
	case SourcePread:
		return "pread"
	case SourceDirect:
		return "direct"
	case SourceBatch:
		return "batch"
	}
	return "mmap"
}

// ParseSource parses "mmap", "pread", "direct" or "batch".
func ParseSource(s string) (Source, error) {
	switch s {
	case "mmap", "":
		return SourceMmap, nil
	case "pread":
		return SourcePread, nil
	case "direct":
		return SourceDirect, nil
	case "batch":
		return SourceBatch, nil
	}
	return 0, fmt.Errorf("%w: source %q: want mmap, pread, direct or batch", ErrInvalidOptions, s)
}

// Defaults.
const (
	DefaultBatchSize = 1000
	// DefaultPartsPerBatch is the parts per macro batch where the
	// partitioning has no training nodes to derive it from
	// (PartsPerBatchFor).
	DefaultPartsPerBatch = 20
)

// MaxFanout is the largest finite fanout: a block's offsets are int32,
// and a fanout at least a node's degree takes its whole list, as -1 does.
const MaxFanout = math.MaxInt32

// FanoutsFor is fanouts with every entry at least d's longest neighbour
// list (storage.Dataset.MaxDegree) read as -1. The sampler draws the same
// either way (a list no longer than the fanout is taken whole), and memory
// estimates bound -1 by the graph, where a huge finite fanout misleads
// them. fanouts itself is returned when nothing changes.
func FanoutsFor(d *storage.Dataset, fanouts []int) []int {
	var out []int
	for i, f := range fanouts {
		// The longest list is at least the mean one: a fanout below the
		// mean degree needs no pass over indptr to keep.
		if f <= 0 || f > MaxFanout || float64(f) < float64(d.NumEdges())/float64(max(d.NumNodes(), 1)) { // beyond MaxFanout: Validate's to refuse
			continue
		}
		if int64(f) >= d.MaxDegree() {
			if out == nil {
				out = append([]int(nil), fanouts...)
			}
			out[i] = -1
		}
	}
	if out == nil {
		return fanouts
	}
	return out
}

// DefaultFanouts is the default per-layer fanout (3-layer GraphSAGE).
var DefaultFanouts = []int{10, 10, 10}

// NodeSet is a set of node ids (historical-embedding reuse candidates).
type NodeSet interface {
	Contains(v int64) bool
}

// ReuseFunc decides a batch's historical-embedding reuse while the batch is
// being sampled (see Options.ReuseFor and the package doc). hop1 lists, in
// local-id order, the batch's hop-1 nodes that are not targets (local ids
// len(targets), len(targets)+1, ...); it is only valid during the call and
// must not be modified. The returned set is consulted for those nodes only;
// nil means no reuse. The function may block (for instance until the
// training loop has decided the batch) but must return promptly once ctx is
// cancelled; a non-nil error fails the batch (and the epoch).
type ReuseFunc func(ctx context.Context, epoch, index int, hop1 []int64) (NodeSet, error)

// Options configures a Sampler. A nil *Options means the defaults; zero
// fields take their defaults.
type Options struct {
	// Fanouts is the number of neighbours sampled per destination node,
	// one entry per layer in block order: Fanouts[0] belongs to Blocks[0],
	// the input layer, and Fanouts[L-1] to the block that outputs the
	// training nodes (DGL's convention). -1 takes all neighbours. Default
	// {10, 10, 10}.
	Fanouts []int
	// BatchSize is the number of training nodes per (micro) batch
	// (default 1000). In random mode the last batch of an epoch may be
	// smaller. In partition mode each macro batch is cut into the fewest
	// batches of near-equal size of at most BatchSize + BatchSize/4
	// targets (MaxBatchTargets; see the package doc).
	BatchSize int
	// Mode is the batch-construction method (default ModeRandom).
	Mode Mode
	// PartsPerBatch is the number of partitions per macro batch in
	// ModePartition. 0 derives it from BatchSize and the partitioning
	// (PartsPerBatchFor), so that a macro batch holds about one batch of
	// training nodes.
	PartsPerBatch int
	// Seed seeds batch construction and sampling. Results depend only on
	// (Seed, epoch, batch index), never on worker scheduling.
	Seed uint64
	// Workers is the number of sampling goroutines (default GOMAXPROCS,
	// at most MaxWorkers).
	Workers int
	// Prefetch bounds the number of sampled batches waiting to be consumed
	// (default 1). Each is a whole sampled batch in memory beside the one
	// each worker is building, which is what memory budgets reserve
	// (train's working set); raise it only where memory is not budgeted.
	Prefetch int
	// Source selects how lists that miss both caches are read (default
	// SourceMmap).
	Source Source
	// ReadGapBytes merges, with SourceBatch, two lists (or two nodes'
	// offsets) into one read when fewer than this many bytes lie between
	// them. 0 takes the break-even gap of the dataset's device profile
	// (device.json from ssdgnn probe, else storage.DefaultDeviceProfile):
	// random-read seconds × sequential bytes/s. PerListReads reads every
	// item on its own.
	ReadGapBytes int64
	// MaxReadAmp caps, with SourceBatch, the bytes a hop's read plan
	// reads at this multiple of the bytes its items occupy (readplan's
	// MaxAmplification). 0 takes storage.DefaultMaxReadAmplification;
	// UncappedReads merges whatever the gap allows.
	MaxReadAmp float64
	// IO is how SourceBatch submits its reads (default storage.IOAuto).
	IO storage.IOEngine
	// NeighborCache is the global neighbour cache, consulted first; nil
	// means none.
	NeighborCache *neighborcache.Cache
	// Reuse marks nodes whose historical (second-layer) embeddings are
	// reused: such a node reached at hop 1 that is not a target is not
	// expanded further. nil disables reuse. Ignored when ReuseFor is set.
	Reuse NodeSet
	// ReuseFor, when set, is called once per batch of a model with at
	// least two layers, after hop 1 is sampled and before any node is
	// expanded at hop 2, and returns that batch's reuse set (replacing
	// Reuse). It runs on the sampling worker, so a blocking ReuseFor holds
	// that worker; the RNG stream of a batch does not depend on when it
	// returns. See the package doc (# Concurrency) for how far sampling
	// then runs ahead of the consumer.
	ReuseFor ReuseFunc
	// Train is the pool of target nodes in ModeRandom (default the
	// dataset's training split). ModePartition takes targets from
	// Partitions.TrainMembers.
	Train []int64
}

// Validate reports whether o is usable. A nil receiver is valid. Errors
// wrap ErrInvalidOptions.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return opterr.Errorf(ErrInvalidOptions, format, args...)
	}
	for i, f := range o.Fanouts {
		if f == 0 || f < -1 || f > MaxFanout {
			return bad("%s[%d] = %d, want 1 to %d, or -1 for every neighbour", opterr.Field("Fanouts"), i, f, MaxFanout)
		}
	}
	switch {
	case o.BatchSize < 0:
		return bad("%s %d, want > 0", opterr.Field("BatchSize"), o.BatchSize)
	case o.PartsPerBatch < 0:
		return bad("%s %d, want > 0", opterr.Field("PartsPerBatch"), o.PartsPerBatch)
	case o.Workers < 0 || o.Workers > MaxWorkers():
		return bad("%s %d, want 0 (one per core) to %d (four per core)", opterr.Field("Workers"), o.Workers, MaxWorkers())
	case o.Prefetch < 0:
		return bad("Prefetch %d, want >= 0", o.Prefetch)
	case o.Source < SourceMmap || o.Source > SourceBatch:
		return bad("%s %d unknown", opterr.Field("Source"), o.Source)
	case o.ReadGapBytes < PerListReads:
		return bad("ReadGapBytes %d, want >= %d", o.ReadGapBytes, PerListReads)
	case o.MaxReadAmp != UncappedReads && o.MaxReadAmp != 0 && !(o.MaxReadAmp >= 1) || math.IsInf(o.MaxReadAmp, 0):
		return bad("%s %v, want %d (no cap), 0 (the default) or a finite ratio >= 1", opterr.Field("MaxReadAmp"), o.MaxReadAmp, UncappedReads)
	case o.IO < storage.IOAuto || o.IO > storage.IOUring:
		return bad("IO %d unknown", o.IO)
	}
	switch o.Mode {
	case "", ModeRandom, ModePartition:
	default:
		return bad("%s %q, want random or partition", opterr.Field("Mode"), o.Mode)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if len(c.Fanouts) == 0 {
		c.Fanouts = DefaultFanouts
	}
	c.Fanouts = append([]int(nil), c.Fanouts...)
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Mode == "" {
		c.Mode = ModeRandom
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Prefetch == 0 {
		c.Prefetch = 1
	}
	return c
}

// MaxWorkers is the most sampling goroutines Options accepts: four per
// core. Each holds a dense id map of 4 bytes a node and a batch, so more
// only cost memory (--workers 100000 asked for tens of GiB).
func MaxWorkers() int { return 4 * runtime.GOMAXPROCS(0) }
