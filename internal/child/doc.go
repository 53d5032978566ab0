// Package child runs one program as a child process and measures it from
// outside: wall time, CPU time, peak RSS, the bytes it caused to be read
// from the block layer, and, when it runs in a memory cgroup made for it,
// that cgroup's peak usage, limit hits and OOM kills.
//
// Invariants:
//   - Run returns only after the child has been reaped; a child never
//     outlives its owner (Pdeathsig SIGKILL, and SIGKILL on the context's
//     end, a timeout or the watch function).
//   - The read counter comes from /proc/<pid>/io read after the child has
//     exited and before it is reaped (waitid WNOWAIT), so it covers the
//     whole thread group, mmap faults and read-ahead included.
//   - Capped puts the child into its cgroup before the program's first
//     instruction (a /bin/sh trampoline that execs in place), so every page
//     it touches, page cache included, is charged to the cgroup, and it
//     removes the cgroup afterwards.
//
// bench/ooc runs its configurations through it, and `ssdgnn bench capped`
// runs any command under a memory limit with it.
package child
