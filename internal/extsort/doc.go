// Package extsort sorts a stream of directed edges that may be larger than
// memory: it buffers edges up to a byte budget, sorts and spills each full
// buffer to a temporary run file, then k-way merges the runs.
//
// The dataset importers use it to turn an unsorted edge list into CSR order
// (ascending Src, then ascending Dst) with bounded memory. With
// Options.ByRow it is a stable sort by Src only: the edges of one Src keep
// the order they were added in (a GraphBolt edge array's neighbour order).
//
// # Usage
//
//	s, err := extsort.New(&extsort.Options{TempDir: dir, Dedup: true})
//	if err != nil { ... }
//	defer s.Close()
//	for ... { if err := s.Add(e); err != nil { ... } }
//	it, err := s.Sort()
//	if err != nil { ... }
//	for e, ok := it.Next(); ok; e, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... } // always check: a short stream is not an error by itself
//
// # Invariants
//
//   - Output is ascending by (Src, Dst), or with Options.ByRow ascending
//     by Src with equal Src in input order. With Options.Dedup every distinct
//     pair appears exactly once and Stats.Duplicates counts the dropped
//     copies, so Stats.Edges == emitted + Stats.Duplicates once iteration
//     has completed.
//   - Ids must be non-negative; every non-negative int64 is supported.
//   - If all edges fit in the buffer the disk is never touched: no run file
//     is created.
//   - Every run file carries a per-block xxhash64 and an end marker with the
//     record count. A corrupt or truncated run is reported as a
//     *CorruptError (matching ErrCorrupt) naming the file and offset; a block
//     is verified before any of its edges is returned.
//   - Temporary files are removed by Iterator.Close, by Sorter.Close, when
//     the iterator is exhausted, and on every error path. Close is
//     idempotent. Files left behind by a crashed process are removed by
//     CleanStale.
//   - A Sorter and its Iterator are not safe for concurrent use; the package
//     starts no goroutines.
//
// # Memory bound
//
// The edge buffer never holds more than Options.MemBytes, a growth step
// included (with ByRow a packed record costs 12 bytes: the key holds
// Src<<32 | its position in the buffer, which makes the radix sort
// stable, and its Dst is kept beside it): a Sorter starts small (so that tiny inputs stay small) and
// doubles its buffer only while the old and the new buffer together fit
// in MemBytes; the last step takes what the old one leaves, so the final
// buffer holds 1/2 to 2/3 of MemBytes (growCap; TestGrowCapLadder). The switch to 16-byte
// records converts in memory only when both encodings fit together, and
// spills first otherwise. The buffer is counted, where it is allocated,
// in memacct.EdgeSort (TestBufferWithinBudget checks the count's peak).
// Each open run costs one BlockSize (64 KiB) buffer. Merging holds at most
// MaxFanIn readers plus one writer, and the sorted in-memory buffer is
// kept as one input of the final merge, so the total bound is about
//
//	MemBytes + (MaxFanIn + 1) × 64 KiB
//
// plus O(MaxFanIn) bookkeeping. Garbage of the growth steps is the
// caller's to bound (the importers set the Go memory limit).
//
// # Encoding
//
// While every id seen so far fits in 32 bits an edge is packed into one
// uint64 (Src<<32 | Dst): it costs 8 bytes in memory and on disk and is
// sorted with an in-place MSD radix sort (internal/radix). The first id
// of 2^32 or more switches the Sorter to 16-byte records for the rest of the input (the
// packed buffer is converted in memory if that fits in the budget, otherwise
// it is spilled first). With ByRow, 16-byte records are sorted by a
// stable comparison sort (slower than the radix sort; only graphs with ids
// of 2^32 or more get there). With ByRow, runs are consecutive pieces of the
// input and stay in input order: an intermediate merge takes adjacent
// runs and its output takes their place, and every merge breaks ties of
// Src by input position. Runs of both encodings merge together. The run file
// format is specified in docs/format.md, "External-sort run files".
package extsort
