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
	c := o.withDefaults()
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
