// Package featurecache keeps a host-memory cache of node feature rows in
// front of the dataset's features.npy and gathers the rows of a mini-batch
// from it, reading misses from storage.
//
// # Policies
//
// The static policies pick the cached nodes once, at New, and fill the cache
// through the gather's read plans (merged reads, its I/O engine); the
// contents never change afterwards:
//
//   - PolicyProfiled caches the nodes with the largest caller-supplied access
//     counts (Options.Counts, one uint32 per node). With counts from one
//     profiling epoch of Sample+Gather this is OUTRE's saved_I/O_feat metric
//     (§4.4); with counts summed over K pre-sampling epochs it is GNNLab's
//     PreSC#K. Nodes with a zero count are never cached.
//   - PolicyDegree caches the nodes of largest degree (PaGraph's policy, the
//     baseline GNNLab compares against). Isolated nodes rank last but are
//     still cached when capacity remains: a training node without edges
//     still has its feature row gathered.
//
// Ties are broken towards the smaller node id, so selection is
// deterministic. Slots are assigned in ascending node id order.
//
// PolicyDynamic is an admission-controlled cache built on ristretto
// (TinyLFU admission, SampledLFU eviction). It starts empty, and every miss
// read by Gather is offered to it. It exists to compare with the static
// policies. Ristretto applies Sets asynchronously: a row offered by one
// Gather may not be visible to the next, and its admission/eviction metrics
// lag until Wait is called. Hits and misses in Stats are always exact (they
// count what Gather actually served); the admission figures are exact only
// after Wait.
//
// # Memory
//
// A static cache of n rows over a graph of N nodes holds an address table of
// N int32 slots (node → slot, or -1) and n·rowBytes bytes of rows, so it
// needs exactly
//
//	BytesFor(n, rowBytes, N) = 4·N + n·rowBytes
//
// bytes, and a budget B holds CapacityFor(B, rowBytes, N) =
// ⌊(B − 4·N) / rowBytes⌋ rows. A non-zero budget smaller than the table is
// an error (ErrBudget); a zero budget disables caching (no table at all,
// every row is read from storage).
//
// The dynamic policy has no address table. Its budget is ristretto's
// MaxCost, charged per row as rowBytes + DynamicItemOverhead (the slice
// header plus ristretto's own per-item charge), after subtracting the
// TinyLFU counters (DynamicCounterBytes per counter, 10 counters per row
// that fits). Go map overhead inside ristretto is not charged, so the
// dynamic cache's real footprint exceeds its budget by a few tens of bytes
// per resident row.
//
// # Zero-copy access
//
// Rows and Slots expose the static cache's backing buffer and address
// table so that a GPU backend can register the buffer and read hits
// zero-copy (OUTRE's UVA path): node v's row, when Slots()[v] = s ≥ 0, is
// Rows()[s·RowBytes() : (s+1)·RowBytes()], in the dataset's feature dtype.
// Both slices are read-only and valid until Close; the cache never writes
// them after New returns. They are nil for PolicyDynamic and for a zero
// budget.
//
// # Concurrency
//
// After New returns, Gather, GatherF32, Stats, Wait, Rows and Slots are safe
// for concurrent use. Close must not run concurrently with anything else.
// Gather keeps at most Options.IODepth reads in flight (pread goroutines
// that wait on the disk, not on a core, or one io_uring) and joins them
// before returning; the dynamic policy owns ristretto's goroutines until
// Close.
//
// # Reading misses
//
// The misses of one Gather are read as a plan (storage.ReadScattered):
// sorted by id, rows closer than Options.CoalesceGap rows are read with
// one call, and the rows are copied out of the read. The gap is the
// break-even of the dataset's measured device profile (device.json,
// ssdgnn probe) unless the option sets it; ReadPlan says which. Merged
// reads read rows nobody asked for, so bytes read exceed bytes missed;
// a duplicate id within a Gather is read once. The amplification cap
// (Options.MaxReadAmplification) bounds bytes read ÷ bytes the Gather
// needs, and the Gather needs its hits too: they are passed as credit
// (storage.ScatterOptions.CreditRows), so the rows the cache serves do
// not shrink the merge budget around the misses. Without it a larger
// cache made more read calls than no cache at all (docs/ooc.md, "Cache
// hits count under the cap").
//
// # Accounting
//
// Every row asked of Gather is recorded on the gather StageCounters
// (Options.Stage): hits with Request, misses by the storage RowReader,
// which records both the request and the bytes it read (for O_DIRECT, the
// aligned blocks), one read call per planned read. The fill at New is recorded on Options.LoadStage.
package featurecache
