// Package storage owns ssdgnn's on-disk dataset: it writes datasets
// atomically, opens them by memory-mapping their arrays, reads rows with
// pread (buffered or O_DIRECT), counts every byte requested and read, and
// validates a dataset end to end. The format is specified in
// docs/format.md.
//
// # Writing
//
// Create prepares a directory; each array is streamed through an
// ArrayWriter (or a CSRWriter for the graph) to a temporary name, fsynced
// and renamed on Commit; Finish writes dataset.json last. A directory
// without dataset.json is not a dataset, so a crash at any point leaves
// nothing that Open accepts (ErrNotDataset; when the directory holds
// another tool's layout, an export or an OGB or IGB download, the error
// says which and how to import it). Overwriting needs CreateOptions.Force,
// which writes the new dataset in a staging directory beside the old one
// and swaps it in, journaled, at Finish: an interrupted or failed run
// leaves the old dataset whole (replace.go; docs/format.md, "Dataset
// directory").
//
// # Reading
//
// Open checks every file listed in the manifest (existence, byte size,
// .npy dtype, shape and data offset) and maps it read-only. Views it
// returns (Indptr, Neighbors, FeatureBytes, Labels, the splits) alias the
// mapping: they are read-only, writing to them faults, and they are valid
// only until Close. Open applies AdviceRandom to indices and features by
// default, so kernel readahead does not inflate the bytes read by random
// access; Advise changes it.
//
// A mapped file that another program truncates under a running reader
// faults on the next read past its new end (SIGBUS). Every mapping is
// registered (TrackMapping); a goroutine that reads mappings calls
// runtime/debug.SetPanicOnFault(true) and defers CatchFault (an error to
// return), FailFault (a pipeline stage's fail function) or HandleFault
// (no error path: the OnFault function, the command line's exit), which
// turn a fault inside a registered mapping into a *ChangedError naming
// the file. A goroutine that reads a mapping without them still dies of
// SIGBUS with the process. Files read with pread report such a
// truncation as io.ErrUnexpectedEOF (ShortRead), never a bare io.EOF.
//
// # Checked at open
//
// Open reads every array a reader indexes with once, before returning,
// and fails with a *CorruptError (file, element, value) at the first
// violation: indptr starts at 0, never decreases and ends at num_edges;
// indices are in [0, N); labels are -1 or in [0, num_classes); splits are
// in range and strictly ascending; a relabelled copy's orig_ids.npy and
// new_ids.npy are in [0, N); and the checksums of all these arrays match
// the manifest. A manifest with classes and no labels.npy is
// refused. After a successful Open, Neighbors, Degree and FeatureBytes of
// any node in [0, N), and any id read from the views, are in bounds; no
// reader needs to check again. features.npy is neither read nor
// checksummed (Validate scans it). The scan costs one sequential read of
// the graph structure, tens of milliseconds per 20M edges in the page
// cache (docs/format.md); OpenOptions.SkipChecks omits it for callers that
// index nothing.
//
// # I/O accounting
//
// Accounting keeps per-stage counters of rows and bytes requested and of
// bytes read from storage. RowReader's pread paths count their own reads
// exactly (aligned blocks for O_DIRECT: the file system's direct-I/O
// offset alignment from statx STATX_DIOALIGN, 4 KiB where it reports
// none). ReadScattered plans a batch of row reads (internal/readplan):
// rows with small gaps between them become one read, counted as one read
// call of its full length, so bytes read over bytes requested shows the
// amplification the merge costs. It submits the reads with pread from a
// few goroutines or, with IOUring, in batches on one io_uring; its
// scratch slots are counted in memacct.BatchBuffers until Close.
// ReadRanges does the same for variable-length ranges of rows (a
// node's two offsets in indptr.npy, its list in indices.npy), splitting a
// range longer than one read into pieces. The
// device costs that choose the gap are measured by ProbeDevice and kept
// in device.json (docs/format.md). Reads through the mapping are
// invisible to the process, so Accounting.Measure attributes the
// /proc/self/io read_bytes delta around a piece of work to a stage; that is
// exact only when stages do not overlap in time.
//
// # Relabelled datasets
//
// A dataset whose manifest has RelabelledFrom is a partition-major copy
// of another (partition.Relabel). Dataset.IDMap translates between its ids
// and the source's; each lookup checks the entries it uses, so a damaged
// map is a CorruptError, and Validate checks that the maps are inverse
// permutations.
//
// # Caveats
//
// Host byte order must be little-endian (amd64, arm64), as the arrays are
// little-endian and viewed in place. Validate's disjointness check keeps
// one bit per node in memory.
package storage
