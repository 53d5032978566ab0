// Package importer converts graphs in OGB, IGB/NumPy and edge-list form
// into ssdgnn datasets (see package storage and docs/format.md) with
// bounded memory.
//
// # Entry points
//
//   - ImportOGB: OGB's raw node-property layout (gzip CSV), and the npz
//     form of ogbn-papers100M (raw/data.npz, raw/node-label.npz).
//   - ImportNPY: the IGB layout of .npy arrays, including the headerless
//     raw arrays of IGB large/full (Options.Raw).
//   - ImportEdgeList: a text edge list with optional feature and label
//     files.
//   - ImportGraphBolt: a DGL GraphBolt on-disk dataset (metadata.yaml).
//
// All of them share one pipeline: edges are streamed into an external
// sorter (package extsort) together with their reverses when symmetrising
// (the default; Options.Directed turns it off), self loops are dropped and
// counted before sorting, duplicates are dropped and counted by the sorter,
// and the sorted stream is written as CSR. Features and labels are then
// streamed in node order, splits are read and checked, or a seeded random
// split over labelled nodes is made.
//
// # Edge direction
//
// A source edge u→v (an edge-list line "u v", an edge_index column (u, v)
// as DGL, PyG and OGB mean it) is stored as u in v's neighbour list: CSR
// row v lists v's in-neighbours, the nodes it aggregates from, which is
// what the sampler and the GraphBolt export assume. Every importer
// follows this; symmetrising also stores v in u's list. The manifest is written last
// (storage.Builder.Finish), so a failed import leaves no dataset behind:
// storage.Open reports storage.ErrNotDataset.
//
// # Counting
//
//   - Report.EdgesRead counts edges as listed in the source;
//     Report.EdgesStored (the manifest's num_edges) counts directed edges in
//     the CSR.
//   - Self loops are counted once per source edge. Duplicates are counted
//     after symmetrising, as directed copies: an undirected edge listed as
//     both (u, v) and (v, u) yields two dropped copies.
//   - Features must be finite and round to a finite value of the stored
//     dtype (below float32's ±(2^128 − 2^103), which a float64 source may
//     reach; below float16's ±65520, so 65510 is stored as 65504): the
//     first other value is a FormatError naming the node, the
//     column and the value as the source has it, unless
//     Options.AllowNonFinite, which stores NaN/Inf as they are (counted in
//     Report.NonFiniteFeatures) and out-of-range values as the ±Inf they
//     overflow to (counted in Report.OverflowFeatures).
//   - Without Options.NumNodes (or a .npy feature file), N is the largest
//     id + 1, which must be at most max(InferNodesPerEdge × edges read,
//     InferNodesFloor); the output file system must have room for
//     indptr.npy before it is written. An edge list with no edges is an
//     error.
//   - Labels: NaN and -1 mean unlabelled (stored as -1). Other labels must
//     be integers (integral floats such as "3.0" are accepted). With
//     Options.NumClasses set every label must lie in [0, NumClasses);
//     otherwise num_classes is inferred as the largest label + 1 and
//     labels must lie in [0, 2^31-1).
//   - A source split is checked (ids in [0, N), no id twice, splits
//     disjoint), sorted and stored as int64. Split nodes without a label
//     are legal but logged as a warning and counted per split in
//     Report.SplitUnlabelled (training skips them; validate warns too). A random split has exact sizes
//     round(L × SplitFrac) over the L labelled nodes, taken in train,
//     valid, test order: when the rounded sizes exceed L the last ones
//     shrink (3 labelled nodes at 0.6,0.2,0.2 give 2, 1, 0). It depends
//     only on Options.Seed and the labelled set.
//
// # Memory
//
// Options.MemBytes bounds the whole import. The edge sorter's buffer gets
// MemBytes − ReserveBytes and never exceeds it, growth steps included
// (package extsort); the reserve is the whole process's
// (internal/membudget: the runtime and the page cache) beside the merge's
// run blocks, one text line (at most MaxTextLine) and the fixed read
// buffers. The Go runtime's soft memory limit is membudget's, MemBytes −
// membudget.PageCacheBytes, for the import, so that garbage does not take
// RSS past the budget (it did: 2× the sort budget, I8). Nothing
// proportional to the number of edges is held beyond the buffer. O(N)
// memory is used after the sort, in the buffer's place: one bit per node
// for the labelled set and two bits per node for split disjointness
// (refused when more than the sorter's share), and the ids of one source
// split while it is sorted (at most N int64s). Feature files are streamed
// row by row, never loaded whole; .npy members of a zip are streamed
// through the zip reader, and the [2, E] edge_index is read by two
// readers in step, the second one skipped E elements ahead (by seeking in
// a stored member, by inflating and discarding in a deflated one).
// Measured peak RSS is in README.md, "Import memory".
//
// # Errors
//
// Errors about a source file's content match ErrFormat and name the file
// and the 1-based line (text) or 0-based element index (.npy) with what
// was expected, in one line. Missing files match ErrLayout; bad options
// match ErrInvalidOptions. Nothing panics on bad input.
//
// # Caveats
//
//   - Text sources are plain or gzip (by the .gz suffix or the gzip
//     magic); a bzip2, xz or zstd file is refused by its magic, naming the
//     compressor.
//   - Sort runs are spilled to a fresh subdirectory of Options.TempDir
//     (default: the output directory), removed when the import ends. A
//     crashed import leaves a .import-tmp-* directory behind; later imports
//     into the same place remove those older than extsort.StaleAge.
//   - The CRC-32 of a deflated .npz member is verified (the stream is read
//     to its end); a stored member read by seeking is not.
//   - The package starts no goroutines; an import runs on the caller's
//     goroutine.
//   - When N is inferred from the largest edge id, a stray huge id makes a
//     huge (mostly empty) indptr; set Options.NumNodes to have ids checked.
package importer
