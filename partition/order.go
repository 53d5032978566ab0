package partition

import (
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/storage"
)

// stateBytesPerNode is the two-level FENNEL's resident anonymous memory
// per node with OrderBFS: the peak RssAnon of the 20 M-node rung of
// docs/benchmarks.md ("How cost grows with work"), run without a memory
// limit, was 1,076,404 KiB, 55.1 bytes a node: the level-1 and final
// assignments, the BFS order and its visited set, the grouping by
// first-level part, the filters, and the Go heap's slack. The training
// set's bitset (trainTest), added since, is 0.125 bytes a node; level 1's
// read-ahead (readAheadBytes) is fixed, not per node.
const stateBytesPerNode = 56

// runtimeBytes is what a run holds beside its per-node state and
// read-ahead: the program, the Go runtime and its collector's headroom,
// and the writers' buffers. Measured: a 50,000-node graph (50 parts)
// peaks at 34 MiB RssAnon, its per-node state 2.7 MB and its read-ahead
// about 5 MiB of it.
const runtimeBytes = 28 << 20

// MinMemory is the least memory (a memory cgroup's limit) in which Run
// partitions d under o (nil: the defaults): for the FENNEL methods
// stateBytesPerNode a node, the level-1 read-ahead and runtimeBytes; for
// random, an 8-byte order and a 4-byte assignment a node beside
// runtimeBytes. Metis runs gpmetis, whose memory is its own: 0. Measured
// against it: 1,000,000 nodes, 100 parts, fennel, peak RssAnon 85 MiB
// against a MinMemory of 94 MiB (the read-ahead is 12.5 MiB there; it
// ran in a cgroup of 94 MiB).
func MinMemory(d *storage.Dataset, o *Options) int64 {
	c := o.withDataset(d)
	n := d.NumNodes()
	switch c.Method {
	case Fennel, FennelExact:
		return stateBytesPerNode*n + c.readAheadBytes(n) + runtimeBytes + extraWorkersBytes(n, &c)
	case Random:
		return 12*n + runtimeBytes
	}
	return 0
}

// measuredWorkers is how many second-level workers ran in the run that
// stateBytesPerNode was measured from (GOMAXPROCS 2, the default).
const measuredWorkers = 2

// workerBytes is one second-level worker's scratch beside the shared
// state, for n nodes in k1 first-level parts: two N-bit sets (BFS visited,
// restream done), the part's stream order and streamer (8 and about 16
// bytes a member), buffers, and the Go heap's slack over them. Measured
// on 1M nodes, k 10,000 (k1 100), fennel, bfs: peak RSS 160 MiB with 2
// workers, 182 MiB with 32, 0.73 MiB a worker; this gives 0.77 MiB.
func workerBytes(n int64, k1 int) int64 {
	return n/2 + 24*((n+int64(k1)-1)/int64(k1)) + 64<<10
}

// extraWorkersBytes is the scratch of the second-level workers beyond
// measuredWorkers: min(Workers, k1) of them run at once.
func extraWorkersBytes(n int64, c *Options) int64 {
	k1 := c.Parts
	if c.FirstLevel > 0 {
		k1 = c.FirstLevel
	}
	w := min(c.Workers, k1)
	if w <= measuredWorkers {
		return 0
	}
	return int64(w-measuredWorkers) * workerBytes(n, k1)
}

// AutoOrder picks OrderAuto's stream order for d: OrderBFS, which reads
// neighbour lists in breadth-first order, when the CSR (indptr and
// indices) fits in the memory this process may use beside the
// partitioner's own state; else OrderID, whose every pass is one sweep of
// the CSR in storage order (level 2 included, see level2Sweep), so a graph
// larger than memory is read sequentially rather than re-read page by
// page. The memory is the smaller of the memory cgroup's limit and
// MemAvailable (cgroup.SelfMemoryRoom); the state is what a run under o (nil: the defaults)
// holds: stateBytesPerNode a node and its level-1 read-ahead. why says
// which and with what numbers.
func AutoOrder(d *storage.Dataset, o *Options) (order, why string) {
	c := o.withDataset(d)
	room, _ := cgroup.SelfMemoryRoom()
	return autoOrder(d.CSRBytes(), d.NumNodes(), c.readAheadBytes(d.NumNodes()), room)
}

// autoOrder decides for a CSR of csr bytes, n nodes, fixed bytes of state
// that do not grow with n, and avail bytes of memory.
func autoOrder(csr, n, fixed, avail int64) (order, why string) {
	state := stateBytesPerNode*n + fixed
	need := csr + state
	ib := func(b int64) string { return humanize.IBytes(uint64(max(b, 0))) }
	if avail <= 0 || need <= avail {
		return OrderBFS, fmt.Sprintf("the CSR (%s) and the partitioner's state (%s) fit in %s", ib(csr), ib(state), ib(avail))
	}
	return OrderID, fmt.Sprintf("the CSR (%s) and the partitioner's state (%s) exceed %s: streaming in storage order", ib(csr), ib(state), ib(avail))
}
