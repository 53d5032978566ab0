// Package ooc is the out-of-core benchmark harness behind `ssdgnn bench
// ooc` and `make bench-ooc`: it trains on a dataset several times larger
// than a memory limit, once per configuration (the PyG+mmap baseline, a
// Ginex-style dual cache, ssdgnn and two ablations), each as a child
// `ssdgnn train` process inside its own memory cgroup, and reports time per
// epoch by stage, storage bytes read, hit rates, peak memory and OOM kills
// in report.md, report.json and PNG charts. docs/ooc.md describes a run.
//
// # Invariants
//
//   - Every child cgroup the harness makes is removed before Run returns
//     (and its page cache freed first on v1, with memory.force_empty).
//     Cgroups named ssdgnn-ooc-<pid>-* whose pid no longer runs are stale
//     leftovers of a crashed run and are removed when a run starts.
//   - A child joins its cgroup before the measured program runs: it is
//     started as `/bin/sh -c 'echo $$ > cgroup.procs && exec "$@"'`, so the
//     program's first page (and all page cache its reads create) is
//     charged to the limit.
//   - Without a usable cgroup (not root, no memory controller, a v2 parent
//     that cannot delegate) the runs are uncapped and the report says so in
//     every row; never silently.
//   - Nothing is asserted about performance: targets are reported.
//
// # Caveats
//
//   - Dropping the page cache needs root and a writable
//     /proc/sys/vm/drop_caches; when it fails the report says the cache was
//     not dropped, and later configurations may start warm.
//   - Storage bytes per epoch come from the child's own /proc/self/io
//     read_bytes; on filesystems that bypass the block layer (tmpfs,
//     some network filesystems) they are zero.
//   - Setup children (gen, info, partition, profile, plan) run uncapped.
//   - The first epoch is not a steady-state epoch: the history cache starts
//     empty, so it reuses no embedding and reads more than the epochs after
//     it. The report's means cover every epoch; its "First epoch and later
//     epochs" table and the 4x targets also give the first epoch and the
//     mean of the others apart. With --epochs 1 there are no later epochs.
package ooc
