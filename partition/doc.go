// Package partition splits a dataset's graph into k parts with few edges
// between parts, for OUTRE's partition-based batch construction (OUTRE,
// VLDB 2024, §4.2 and §5.2): a training batch drawn from a few parts has
// heavily overlapping neighbourhoods, so sampling reads less.
//
// # Algorithm
//
// Run streams the nodes (in id order, or a seeded random order) and puts
// each node v into the part P maximising FENNEL's score (Tsourakakis et
// al., WSDM'14) extended with OUTRE's training-load term:
//
//	score(P) = |N(v) ∩ P| − α·γ·|P|^(γ−1) − λ·T(P)/(t/k),  α = k^(γ−1)·m/n^γ
//
// where T(P) is P's training nodes and t/k the average. Hard caps: a part
// never exceeds ceil((1+ε)·n/k) nodes nor ceil((1+ε)·t/k) training nodes,
// and a non-training node never takes the last slot a training node still
// needs, so both caps always hold together. Only parts that hold a
// neighbour are scored, plus the least-penalised non-full part, found in
// O(1) from a tournament tree, so a node costs O(deg + candidates·log k),
// not O(k).
//
// Partitioning is two-level as in OUTRE: k1 parts over the whole graph,
// then k2 = ceil(k/k1) parts inside each first-level part, ignoring
// neighbours outside it and counting training load locally. The final id
// of second-level part q of first-level part P is P·k2+q, so K = k1·k2
// (10,000 = 100×100 by default). Second-level parts run on a pool of
// Workers goroutines; each is a pure function of its inputs and of the
// seed, so part.npy is identical for any worker count. α for a
// second-level part uses the first-level stream's count of edges inside
// that part. Passes > 1 restream: each node is taken out of its part and
// re-placed, with not-yet-restreamed neighbours counted at their previous
// pass's part.
//
// A node whose in-scope degree reaches ParallelDegree has its neighbour
// list counted by Workers goroutines (first level only; second-level
// streams already occupy the pool). Counts are sums, so the result does
// not depend on the split.
//
// # Membership: Bloom (Fennel) versus exact (FennelExact)
//
// FennelExact answers "which part holds neighbour u" with an int32
// assignment array: one random 4-byte read per edge, 4 bytes per node.
//
// Fennel (the default) never reads the assignment during streaming; the
// array is only written, for part.npy. Membership goes through one
// github.com/bits-and-blooms/bloom/v3 filter per part, each sized for its
// cap (1+ε)·n/k members at FalsePositive (about 9.6 bits per member at 1 %,
// ~1.3 bytes per node for a whole level, instead of OUTRE's filters sized
// for all N nodes each). Testing every neighbour against every filter
// would cost deg·k probes, so candidates are discovered first: Candidates
// (default 4) evenly spaced neighbours are probed against every filter of
// the level; only the parts they hit are then counted over the whole
// neighbour list (hash locations are computed once per neighbour and
// reused for every filter). A part holding only neighbours outside the
// probed ones is missed; a false positive adds a spurious candidate or
// count. At the second level the first-level part's filter decides which
// neighbours are in scope (false positives admit a few outside
// neighbours).
//
// The trade-off, measured in docs/format.md ("Measured"): the filters' random-access
// working set is about 3× smaller than the int32 array (1.3 vs 4 bytes per
// node per level, and only (1+ε)·|P|·1.2 bytes, cache-resident, for a
// second-level part), but each membership test hashes and probes several
// bits, and discovery probes Candidates·k filters per node. On graphs
// whose assignment array fits in memory the exact variant is faster.
//
// # Memory
//
// Peak memory is O(N + k·bits per filter): while streaming, the output
// assignment (4 bytes per node; FennelExact a second 4-byte array for the
// second level), the stream order for OrderRandom (8 bytes per node), the
// first-level grouping (8 bytes per node), the level-1 filters plus one
// set of level-2 filters per worker (Fennel) and O(k) per level for sizes,
// loads and the tournament trees. Writing the outputs then needs the
// assignment, the cross counts (4 bytes per node) and the membership
// lists (8 bytes per node); the adjacency is streamed from the mapped CSR,
// whose resident pages also count in the process RSS that Stats reports.
// Nothing is O(E) in memory.
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
// # Caveats
//
//   - One FENNEL pass on a small dense graph scatters the first nodes of
//     the stream (α·γ exceeds one shared neighbour); Passes ≥ 2 repairs it.
//   - Determinism holds for a fixed seed, options and dataset, across
//     worker counts; it is not promised across versions of this package.
//   - The metis method needs gpmetis on PATH and loads the whole graph in
//     the child process: it is for quality comparison only.
package partition
