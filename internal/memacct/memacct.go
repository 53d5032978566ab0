// Package memacct counts the process's large allocations by purpose, where
// they are made: the package that allocates a cache, a buffer or a table
// calls Add with its size, and Add with the negative size when it lets it
// go. It is how --mem is checked against what was really allocated rather
// than against formulas re-typed in another package (in the manner of
// pebble's internal/manual).
//
// Invariants and caveats:
//   - Counters are process-wide and safe for concurrent use. A release is
//     counted when the owner drops the memory; the Go garbage collector
//     returns it to the OS later, so RSS lags the counters downwards.
//   - Only allocations that scale with the data are counted: per-node
//     tables, cached rows and lists, batch buffers and backend tensors.
//     Small bookkeeping and garbage awaiting collection are not: the
//     budget's runtime reserve stands for them.
//   - The Go runtime's own memory outside heap objects (stacks, span and
//     GC metadata) is not Added by anyone: Read takes it from the
//     runtime's counters (runtime/metrics) as Snapshot.Runtime, which is
//     outside Total and Peak, since the reserve stands for it too.
//   - Peak is the high-water mark of the sum over every purpose since the
//     last ResetPeak; Max is each purpose's own high-water mark since
//     then (reached at different moments, so the Max do not sum to Peak).
package memacct

import (
	"fmt"
	"io"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"text/tabwriter"
)

// Purpose is what a counted allocation is for.
type Purpose int

// Purposes.
const (
	// FeatureCache: the static feature cache's rows and address table, or
	// the dynamic policy's budget.
	FeatureCache Purpose = iota
	// HistoryCache: the history embeddings, their state and slot table.
	HistoryCache
	// NeighborCache: the global neighbour cache's lists, offsets and index.
	NeighborCache
	// DynamicCache: the macro batches' dynamic neighbour caches.
	DynamicCache
	// BatchBuffers: the gather stage's host feature buffers.
	BatchBuffers
	// Backend: tensors, int tensors and blocks held by a kernels backend
	// (the model, its optimiser state, batches on the device side).
	Backend
	// SamplerScratch: the sampling workers' node → local-id maps.
	SamplerScratch
	// Profile: the profiling epoch's per-node counters, and the profile
	// arrays training keeps.
	Profile
	// SampledBatches: sampled batches (ids and block CSRs) from the
	// sampler's workers until their consumer releases them, the trainer's
	// converted and micro-batch copies of them, and the workers' per-batch
	// scratch (list headers, id-map keys, read arenas).
	SampledBatches
	// Inference: exact layer-wise inference's per-node state (receptive
	// field bitsets, GCN degrees) and the transformed rows it keeps in
	// memory.
	Inference
	// Degrees: GCN's whole-graph degrees, held for the run (one int32
	// per node, two when the graph is not symmetrised).
	Degrees
	// EdgeSort: the external edge sorter's in-memory buffer (package
	// extsort; import, gen).
	EdgeSort
	// Checkpoint: the host copy of one parameter a checkpoint write
	// streams the model through (train's ModelConfig.CheckpointScratchBytes).
	Checkpoint
	numPurposes
)

var names = [numPurposes]string{"feature cache", "history cache", "neighbour cache", "dynamic caches",
	"batch buffers", "backend tensors", "sampler scratch", "profile", "sampled batches", "inference", "graph degrees", "edge sort",
	"checkpoint"}

// String names the purpose.
func (p Purpose) String() string {
	if p < 0 || p >= numPurposes {
		return fmt.Sprintf("purpose(%d)", int(p))
	}
	return names[p]
}

var (
	counts [numPurposes]atomic.Int64
	total  atomic.Int64
	peak   atomic.Int64
	// peaks[p] is counts[p] when total last reached peak.
	peaks [numPurposes]atomic.Int64
	// maxes[p] is the largest counts[p] since the last ResetPeak.
	maxes [numPurposes]atomic.Int64
)

// Add counts bytes (negative: released) for purpose p.
func Add(p Purpose, bytes int64) {
	if bytes == 0 {
		return
	}
	c := counts[p].Add(bytes)
	for m := maxes[p].Load(); c > m && !maxes[p].CompareAndSwap(m, c); m = maxes[p].Load() {
	}
	t := total.Add(bytes)
	for {
		old := peak.Load()
		if t <= old {
			return
		}
		if peak.CompareAndSwap(old, t) {
			for i := range peaks {
				peaks[i].Store(counts[i].Load())
			}
			return
		}
	}
}

// Snapshot is the counters at one moment.
type Snapshot struct {
	// Bytes is the current count of each purpose, Total their sum.
	Bytes [numPurposes]int64
	Total int64
	// Peak is the largest Total since the last ResetPeak, and PeakBytes
	// each purpose's count when it was reached (approximately: purposes
	// are read one by one).
	Peak      int64
	PeakBytes [numPurposes]int64
	// MaxBytes is each purpose's own largest count since the last
	// ResetPeak.
	MaxBytes [numPurposes]int64
	// Runtime is the Go runtime's memory outside heap objects when the
	// snapshot was read (RuntimeBytes); it is in neither Total nor Peak.
	Runtime int64
}

// runtimeClasses are the runtime/metrics memory classes that are neither
// heap objects nor free or released pages: what the runtime itself holds.
var runtimeClasses = []string{
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/profiling/buckets:bytes",
	"/memory/classes/other:bytes",
}

var runtimeSamples = struct {
	sync.Mutex
	s []metrics.Sample
}{}

// RuntimeBytes is the Go runtime's own memory outside heap objects, as the
// runtime counts it where it allocates it (runtime/metrics): goroutine
// stacks, span, cache and GC metadata, profiling buckets and the rest of
// its off-heap allocations. Reading it takes about a microsecond and does
// not stop the world.
func RuntimeBytes() int64 {
	runtimeSamples.Lock()
	defer runtimeSamples.Unlock()
	if runtimeSamples.s == nil {
		runtimeSamples.s = make([]metrics.Sample, len(runtimeClasses))
		for i, n := range runtimeClasses {
			runtimeSamples.s[i].Name = n
		}
	}
	metrics.Read(runtimeSamples.s)
	var n int64
	for _, s := range runtimeSamples.s {
		if s.Value.Kind() == metrics.KindUint64 {
			n += int64(s.Value.Uint64())
		}
	}
	return n
}

// Read returns the counters.
func Read() Snapshot {
	var s Snapshot
	for i := range counts {
		s.Bytes[i] = counts[i].Load()
		s.PeakBytes[i] = peaks[i].Load()
		s.MaxBytes[i] = maxes[i].Load()
	}
	s.Total, s.Peak = total.Load(), peak.Load()
	s.Runtime = RuntimeBytes()
	return s
}

// ResetPeak starts new high-water marks at the current counts.
func ResetPeak() {
	peak.Store(total.Load())
	for i := range peaks {
		peaks[i].Store(counts[i].Load())
		maxes[i].Store(counts[i].Load())
	}
}

// MaxMap returns each purpose's own high-water mark by name (for JSON
// reports).
func (s Snapshot) MaxMap() map[string]int64 { return byName(&s.MaxBytes) }

// Map returns the purposes' bytes by name (for JSON reports).
func (s Snapshot) Map(peak bool) map[string]int64 {
	if peak {
		return byName(&s.PeakBytes)
	}
	return byName(&s.Bytes)
}

// byName keys one count per purpose by the purpose's name.
func byName(v *[numPurposes]int64) map[string]int64 {
	m := make(map[string]int64, numPurposes)
	for i, x := range v {
		m[Purpose(i).String()] = x
	}
	return m
}

// WriteTable prints the counters at the peak, one purpose per line.
func (s Snapshot) WriteTable(w io.Writer, ibytes func(int64) string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i := range s.PeakBytes {
		fmt.Fprintf(tw, "  %s\t%s\t\n", Purpose(i), ibytes(s.PeakBytes[i]))
	}
	fmt.Fprintf(tw, "  counted at peak\t%s\t\n", ibytes(s.Peak))
	return tw.Flush()
}
