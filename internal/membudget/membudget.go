// Package membudget splits the memory budget of a whole process, the
// --mem of a command that writes a dataset (gen, import, relabel, export
// graphbolt and distdgl), between what the command allocates and what it
// leaves to the Go runtime and the page cache. It owns one promise: a
// process run with budget B inside a memory cgroup of B is not OOM-killed
// and its memory stays within B, provided the command allocates no more
// than Fit.Alloc.
//
// The split, for a budget B:
//
//	B = Alloc + ReserveBytes        what the command may allocate: B − R
//	R = RuntimeBytes + PageCacheBytes
//	Go soft memory limit = B − S    S = PageCacheBytes
//
// Each command states only what it allocates (its buffers, chunks and
// tables), sizes them from Alloc, and refuses a budget below
// Least(its smallest allocation) (or a larger least it measured); it
// holds the Go soft limit at GoLimit while it runs (Hold), so that the
// garbage between its phases does not take the heap past the budget (at
// the default collector target the heap reaches twice the live data).
//
// Where the numbers come from (2026-11-27, 2 shared vCPUs; cgroup-v1
// memory cgroups, which charge the page cache, of the size of --mem,
// page cache dropped before each run, the command's RssAnon and the
// cgroup's dirty+writeback pages sampled every 50 ms; the runs are in
// the commit that made this package):
//
//   - RuntimeBytes (8 MiB) stands for the memory the runtime holds beside
//     the heap objects a command sizes: runtime/metrics' off-heap classes
//     (stacks, span and GC metadata, other) peaked at 4.9 MiB during a
//     gen of 1M nodes at 64 MiB, and the commands' small bookkeeping is
//     not sized.
//   - PageCacheBytes (16 MiB) is the room the Go soft limit leaves below
//     B for what the cgroup charges beside the runtime's memory: the
//     program's mapped text (max RSS less RssAnon: 6-10 MiB for the
//     commands that read with pread) and the dirty and writeback pages
//     of the files written, which the cgroup cannot reclaim before they
//     are written back. Those take the room there is (4-27 MiB at the
//     peak at 64 MiB, 41-45 MiB at 256 MiB) and reclaim waits on their
//     writeback, so what must hold is that the anonymous memory leaves
//     room: at 64 MiB it peaked at 26-43 MiB across gen (1M nodes),
//     import (6M edges), relabel and both exports (1M nodes, 670 MiB),
//     three runs each, none OOM-killed. Clean page cache (the files
//     read, mapped or not) is reclaimed as the cgroup needs it.
//
// The commands carried their own values before (import's soft limit was
// B − 24 MiB, gen's B − 12 MiB, the exports' B − 8 MiB, relabel's
// B − 16 MiB), and the CLI's auto-sized --mem was a cgroup's limit less
// another 16 MiB for the page cache, which B already leaves: the
// auto-sized budget is now the limit itself (CgroupBudget).
package membudget

import "runtime/debug"

const (
	// RuntimeBytes is what the Go runtime holds beside the heap objects
	// a command allocates and counts.
	RuntimeBytes = 8 << 20
	// PageCacheBytes is the room between the Go soft memory limit and
	// the budget: the program's mapped text and the page cache of the
	// files written, which the memory cgroup charges.
	PageCacheBytes = 16 << 20
	// ReserveBytes is the part of every budget that no command
	// allocates.
	ReserveBytes = RuntimeBytes + PageCacheBytes
)

// Fit is the split of one process's memory budget.
type Fit struct {
	// Budget is the whole process's budget, in bytes (--mem).
	Budget int64
}

// Of returns the fit of budget bytes.
func Of(budget int64) Fit { return Fit{Budget: budget} }

// Alloc is what the command may allocate: the budget less ReserveBytes,
// or 0 when the budget is below it.
func (f Fit) Alloc() int64 { return max(f.Budget-ReserveBytes, 0) }

// GoLimit is the Go soft memory limit while the command runs: the budget
// less PageCacheBytes, at least RuntimeBytes.
func (f Fit) GoLimit() int64 { return max(f.Budget-PageCacheBytes, RuntimeBytes) }

// Hold sets the Go soft memory limit to GoLimit and returns the function
// that restores the previous limit (defer f.Hold()()).
func (f Fit) Hold() (restore func()) {
	old := debug.SetMemoryLimit(f.GoLimit())
	return func() { debug.SetMemoryLimit(old) }
}

// Least is the least budget of a command whose smallest allocation is
// alloc bytes: alloc beside ReserveBytes.
func Least(alloc int64) int64 { return alloc + ReserveBytes }

// CgroupBudget is the budget a command gets when --mem is not given
// inside a memory cgroup of limit bytes: the limit itself, since the fit
// already leaves the page cache its room inside the budget.
func CgroupBudget(limit int64) int64 { return limit }
