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
// nothing that Open accepts. Overwriting needs CreateOptions.Force, which
// removes the old manifest before anything else.
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
// # I/O accounting
//
// Accounting keeps per-stage counters of rows and bytes requested and of
// bytes read from storage. RowReader's pread paths count their own reads
// exactly (aligned blocks for O_DIRECT: the file system's direct-I/O
// offset alignment from statx STATX_DIOALIGN, 4 KiB where it reports
// none). Reads through the mapping are
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
