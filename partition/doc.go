// Package partition splits a dataset's graph into k parts with few edges
// between parts, for OUTRE's partition-based batch construction (OUTRE,
// VLDB 2024, §4.2 and §5.2): a training batch drawn from a few parts has
// heavily overlapping neighbourhoods, so sampling reads less.
//
// # Algorithm
//
// Run streams the nodes (breadth-first by default, or in id order, or a
// seeded random order) and puts each node v into the part P maximising
// FENNEL's score (Tsourakakis et al., WSDM'14) extended with OUTRE's
// training-load term:
//
//	score(P) = |N(v) ∩ P| − α·γ·|P|^(γ−1) − λ·T(P)/(t/k),  α = s·k^(γ−1)·m/n^γ
//
// where m is the number of undirected edges in the stream's scope (half
// the directed CSR entries), n its nodes, s = AlphaScale (default 1), T(P)
// is P's training nodes and t/k the average. Hard caps: a part never
// exceeds ceil((1+ε)·n/k) nodes nor ceil((1+ε)·t/k) training nodes, and a
// non-training node never takes the last slot a training node still needs,
// so both caps always hold together. Every part holding a neighbour is
// scored, plus the least-penalised non-full part, found in O(1) from a
// tournament tree, so a node costs O(deg + candidates·log k), not O(k).
//
// Partitioning is two-level as in OUTRE: k1 parts over the whole graph,
// then k2 = k/k1 parts inside each first-level part (k1 divides k), ignoring
// neighbours outside it and counting training load locally. The final id
// of second-level part q of first-level part P is P·k2+q, so K = k1·k2 = k
// (by default k is DefaultPartsFor the dataset: one part per
// TrainNodesPerPart training nodes, at most DefaultParts = 10,000 =
// 100×100, OUTRE's count for ogbn-papers100M). Second-level parts run on a pool of
// Workers goroutines; each is a pure function of its inputs and of the
// seed, so part.npy is identical for any worker count. α for a
// second-level part uses that part's own n and its own m (the undirected
// edges with both ends in it, counted exactly from the level-1 assignment
// before its stream starts). Passes > 1 restream (default 3): each node is
// taken out of its part and re-placed, with not-yet-restreamed neighbours
// counted at their previous pass's part. The caps keep the promise of
// Options.Epsilon for the final parts, ceil((1+ε)·n/k) nodes and
// ceil((1+ε)·t/k) training nodes: level 1 has the slack sqrt(1+ε)−1 and
// level 2 caps every part at the final cap (balance.go; before 2026-11-27
// each level had the whole ε and parts reached (1+ε)² × the average).
//
// # Refinement
//
// After the streaming passes (and after level 2), Refine rounds (default
// 3; Fennel and FennelExact) of greedy boundary moves polish the final
// assignment with exact counts read from the global assignment array:
// each node in id order counts its neighbours per final part and moves to
// the part holding most of them if that part holds strictly more than its
// own (so every move strictly lowers the edge cut) and the target stays
// within the final-part caps, ceil((1+ε)·n/k) nodes and ceil((1+ε)·t/k)
// training nodes, whatever the levels. Ties go to the smaller part, then the lower id; sizes
// and loads are updated in place, so the result is sequential and
// deterministic, independent of Workers. A round without a move ends it
// early. A node may move across first-level parts, so after refinement
// part P·k2+q is no longer a subset of first-level part P (nothing reads
// that structure). Each round reads every neighbour list once; the extra
// memory is two int64 counters per part plus a k-entry int32 count array,
// nothing per node beyond the assignment array. For Fennel this is the one
// step that reads neighbours' assignments; the array exists anyway, since
// part.npy is written from it. Measured in docs/benchmarks.md: on the
// 2M-node benchmark 3 rounds take about 2 s in all and lower the cut from
// 0.319 to 0.291. Stats.RefineMoves counts the moves.
//
// # Stream order
//
// OrderAuto (the default) is OrderBFS when the CSR fits in memory (the
// smaller of the memory cgroup's limit and MemAvailable) beside the
// partitioner's state, else OrderID (AutoOrder). BFS visits neighbour
// lists all over the CSR, so when the CSR does not stay in the page cache
// every pass re-reads it from the disk (at 20 M nodes under 2 GiB, before
// indptr was advised random: 178 GiB read and 2.3× the linear time; the
// random-advice run was not repeated; docs/benchmarks.md).
// The pick depends on the machine, so one seed can give two partitions
// (1M nodes, k 1,000: bfs without a limit, id in a 96 MiB cgroup);
// Stats.OrderWhy records why and the CLI prints it with the order that
// reproduces the partition anywhere.
// With OrderID every pass is one sweep in storage order, level 2 included:
// the k1 second-level streams run at once, node v going to its part's
// streamer as one ascending sweep reaches it (level2Sweep), which assigns
// exactly what streaming the parts one by one would. The price is the
// cut: on graphs whose communities are scattered over the id space, id
// order cuts more edges than BFS (the table in docs/benchmarks.md).
//
// OrderBFS streams breadth-first over the CSR from a seeded
// start node, restarting at the next unvisited id when a component is
// exhausted; the order array doubles as the queue, so it costs 8 bytes
// per node plus an N-bit visited set (level 1). At level 2 each
// first-level part is streamed breadth-first over its own induced
// subgraph (a seeded start among its members; |P| ids plus a worker-owned
// N-bit visited set, cleared after each part; the scope test reads the
// level-1 assignment array). On a whole graph with random cross edges a
// BFS frontier soon covers everything, so BFS helps level 1 little; inside
// a first-level part, where few cross edges survive, it streams
// communities nearly one at a time, which is where it pays off (measured
// in docs/benchmarks.md). OrderRandom costs 8 bytes per node;
// OrderID nothing.
//
// A node whose in-scope degree reaches ParallelDegree has its neighbour
// list counted by Workers goroutines (first level only; second-level
// streams already occupy the pool). Counts are sums, so the result does
// not depend on the split.
//
// # Read-ahead
//
// With Workers > 1, level 1 reads ahead (runAhead): a second goroutine
// gathers the stream's next nodes (their neighbour lists and, for Fennel,
// every neighbour's hash locations) into chunks, at most four chunks
// ahead, while the stream's goroutine counts, chooses and inserts. The
// gathering reads nothing the stream writes, so each node is placed from
// exactly what it would gather itself and the assignment is identical
// (TestReadAheadSame). Before, level 1 ran on one core while the other
// idled; gathering was about half its CPU time. A node with a list too
// large for a chunk is gathered by the stream itself, so the chunks'
// memory is fixed (readAheadBytes: 12.5 MiB for Fennel at the default
// h = 7, 12.2 MiB for FennelExact), and AutoOrder counts it.
// Measured in docs/benchmarks.md ("Partition: phase times"): level 1
// 2.3–2.5× faster from 2.7 M to 10.7 M nodes.
//
// # Membership: Bloom (Fennel) versus exact (FennelExact)
//
// FennelExact answers "which part holds neighbour u" with the int32
// assignment array: one random 4-byte read per edge, 4 bytes per node.
//
// At level 1, Fennel never reads the assignment of a neighbour while
// streaming. Membership goes through one Bloom filter per part, each sized for the
// part's cap (1+ε)·n/k members at FalsePositive, stored bit-sliced: all k
// filters of a level share (m, h) = bloom.EstimateParameters(cap, fp)
// (github.com/bits-and-blooms/bloom/v3) and row r < m holds a k-bit
// vector whose bit j is bit r of part j's filter; bit positions are
// exactly the library's (bloom.Locations(id, h)[i] mod m, with id as 8
// little-endian bytes). Looking up neighbour u ANDs its h rows into a
// bitmask of the parts that (probably) hold u; the set bits are counted,
// over the full neighbour list (no sampling). Inserting v into part j
// sets bit j in its h rows. Memory per level is m·k bits, exactly that of
// k separate filters, plus the padding of every row to whole 64-bit words
// (m·64·ceil(k/64) bits): at the default fp = 1 % m ≈ 9.59·cap bits, so
// for the 2M-node benchmark's level 1 (k1 = 100, cap = 22,000) m =
// 210,872 rows × 128 bits = 3.2 MiB, about 13 bits per node including
// the 28 % padding of 100 to 128 bits (10.5 without), against 32 bits per
// node for the int32 array; a level-2 matrix (cap 220) is 33 KiB and
// stays in cache. Restreaming keeps the previous pass's matrix too (2×)
// plus an N-bit "already re-placed this pass" set per stream, which
// decides which matrix a neighbour is looked up in. Stats.FilterBytes
// reports the matrices allocated, level 1's plus level 2's (all k1 of
// them in the id-order sweep, one set per worker otherwise): level 1's are
// garbage once level 2 starts, so the sum bounds those alive at once.
//
// False positives: a lookup of a node in no filter returns about fp·k
// spurious parts (1 at fp = 1 %, k = 100), each adding 1 to that part's
// count; a true part collects one count per neighbour it holds, so the
// noise rarely changes the winner. Measured on the benchmark graph, the
// cut at fp = 1 % is within 1 % of FennelExact's and fp = 0.1 % did not
// improve it while costing 2× the time.
//
// At level 2 both methods test whether a neighbour is in scope (in the
// stream's first-level part) with the level-1 assignment array, which
// level 2 keeps resident anyway: one 4-byte load per neighbour, exact,
// and done before the neighbour is hashed, so out-of-scope neighbours
// cost no hashing. The level-1 filters are garbage once level 1 ends.
// The scope test once read the level-1 filters instead: a hash and h
// random row loads per neighbour, and false positives that admitted a
// few outside neighbours (docs/benchmarks.md, "Partition: phase times").
//
// The trade-off was meant to be memory for speed: each lookup hashes the
// id (murmur3, ~20 ns) and reads h random rows (7 at 1 %), against one
// random 4-byte read for the exact array. But this package allocates the
// int32 level-1 assignment as its output whichever the method, and
// restreaming keeps two sets of filters (about 3.4 bytes a node at
// k1 = 100), so the filters save no memory here. Measured from 2.7 M to
// 20 M nodes, FennelExact is 2.4–2.7× faster at the same peak RSS and an
// edge cut within 0.8 % (docs/benchmarks.md, "Partition: phase times").
// Fennel stays the default, as the design names it.
//
// # Memory
//
// Peak memory is O(N + filters): while streaming, the output assignment
// (4 bytes per node; the first-level array stays alive during level 2),
// the level-1 stream order (8 bytes per node for OrderBFS and
// OrderRandom, freed before level 2) and BFS visited set (N bits), the
// first-level grouping (8 bytes per node plus 8 per first-level part),
// per worker an N-bit BFS visited set and, for Fennel restreaming, an
// N-bit re-placed set, the bit-sliced filters (see above), and O(k) per
// level for sizes, loads and the tournament trees. With OrderID the
// second level's k1 streamers are all alive at once (level2Sweep), so
// their filters are summed rather than one per worker: at 20 M nodes
// Stats.FilterBytes was 129 MiB against 66 MiB with OrderBFS.
// Refinement adds only O(k) (see above); level 1's read-ahead a fixed
// 12.2–12.5 MiB (see Read-ahead). Writing the outputs
// then needs the assignment, the cross counts (4 bytes per node) and the
// membership lists (8 bytes per node); the adjacency is streamed from the
// mapped CSR, whose resident pages also count in the process RSS that
// Stats reports. Nothing is O(E) in memory.
//
// Run has no budget of its own: under a memory cgroup whose limit is below
// MinMemory (stateBytesPerNode a node, the read-ahead and runtimeBytes for
// the FENNEL methods) it refuses before any work with ErrMemory, naming
// the least limit, where the kernel would kill it later (a 1M-node graph
// was OOM-killed in 64 MiB; it needs 94 MiB and runs in that).
//
// # Outputs
//
// DIR/partitions/<name>/ holds part.npy, cross.npy, members_offsets.npy,
// members.npy, train_offsets.npy, train_members.npy, adj_indptr.npy,
// adj_indices.npy, stats.json and manifest.json (docs/format.md). Every
// file is written atomically and the manifest, with sizes and xxhash64
// checksums, last: an interrupted Run leaves no partitioning Open accepts.
// Views returned by a Partitioning alias read-only mappings and are valid
// only until Close.
//
// # Checked at open
//
// Open reads every file once and fails with a *CorruptError (file,
// element, value) at the first violation: part ids in [0, K); cross counts
// non-negative; members_offsets, train_offsets and adj_indptr start at 0,
// never decrease and end at N, T and E; members and train_members are in
// range, in the part part.npy gives them and ascending within it;
// adj_indices are in range; every checksum matches. After a successful
// Open, Members, TrainMembers and AdjacencyOf of any q in [0, K) are in
// bounds and hold valid node ids. Verify returns that verdict without
// reading again. The checks against the dataset (degrees, cross counts at
// most the degree, train_members exactly the dataset's training nodes) are
// in sample.NewPartitionFiles, which has both.
//
// # Partition-major layout
//
// Relabel writes a copy of a dataset whose node ids run part by part, so
// every part of a partitioning is a contiguous id range (within a part by
// descending in-degree by default, see RelabelOrder), with
// orig_ids.npy / new_ids.npy mapping between the two numberings and the
// partitioning carried over (Contiguous checks it). It never writes in
// place, keeps memory within RelabelOptions.MemBytes (the old→new map,
// the sort keys and the largest part are all that grow with the graph) and
// writes dataset.json last.
// docs/format.md specifies the result.
//
// # Caveats
//
//   - One FENNEL pass on a small dense graph scatters the first nodes of
//     the stream (α·γ exceeds one shared neighbour); Passes ≥ 2 repairs it.
//   - Determinism holds for a fixed seed, options and dataset, across
//     worker counts; it is not promised across versions of this package.
//   - Refinement is greedy label propagation under the caps: it stops at
//     a local optimum, cannot swap nodes between full parts, and may in
//     principle empty a part (Stats.EmptyParts).
//   - The metis method needs gpmetis on PATH and loads the whole graph in
//     the child process: it is for quality comparison only.
package partition
