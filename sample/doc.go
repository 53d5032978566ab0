// Package sample is ssdgnn's Sample stage: it constructs training batches
// (random or OUTRE's partition-based selection), samples their L-hop
// neighbourhoods into DGL-style message-flow blocks, looks neighbour lists
// up through a global cache, a per-macro-batch dynamic cache and storage,
// optionally spills sampled batches to disk (the decoupled Sample stage of
// OUTRE §4.1), and measures the redundancy ratio (OUTRE §3) for
// `ssdgnn rr`. Formats and measured figures: docs/sample.md.
//
// # Batches
//
// ModeRandom shuffles the training ids with a generator seeded from
// (Seed, epoch) and cuts batches of BatchSize. ModePartition permutes the
// K partitions (seeded from (Seed, epoch)), takes them PartsPerBatch at a
// time as macro batches (so every partition is used once per epoch),
// shuffles each macro batch's training nodes and cuts them into the
// fewest micro batches of at most MaxBatchTargets = BatchSize +
// BatchSize/4 targets, of near-equal size (sizes differ by at most one),
// whose targets are then ordered by partition (in the macro batch's
// order): a trainer that cuts a batch into consecutive runs of targets
// (train's micro-batches) gets runs that span few partitions and share
// their neighbourhoods. A macro batch of up to 1.25·BatchSize training
// nodes is one batch; a larger one gives batches of at least half that
// (0.625·BatchSize) each. No macro batch ends in a small remainder batch,
// which would read its inputs (most of them the previous batch's) again,
// cost an optimiser step on a handful of targets, and leave the gather
// idle while the next batch is sampled (docs/ooc.md, "Even partition
// batches"). A macro batch without training nodes yields no batch.
// Either way every training node is a target exactly once per epoch.
// Sampler.Plan exposes the construction without sampling.
//
// # Blocks
//
// A batch of L layers has L blocks, Blocks[0] the input layer and
// Blocks[L-1] the layer that outputs the targets. All blocks share one
// node array, Blocks[0].Src, which lists the collective sampled
// neighbourhood Ñ_b: the targets first, then nodes in the order they were
// first reached (hop 1, then hop 2, ...). For every l:
//
//   - Blocks[l].Src is a prefix of Blocks[0].Src, so a node's local id is
//     the same in every block;
//   - Blocks[l].Src[:NumDst] are the destinations, and for l < L-1,
//     Blocks[l].NumDst == len(Blocks[l+1].Src) (a layer's outputs are the
//     next layer's inputs); Blocks[L-1].Dst() are the targets;
//   - Indptr (NumDst+1 entries, int64) and Indices (int32 source-local
//     ids) hold the sampled edges in CSR by destination: destination i
//     aggregates Src[Indices[Indptr[i]:Indptr[i+1]]];
//   - each destination has exactly min(Fanouts[l], degree) sampled
//     edges (all of them for fanout -1), each a real edge, except reused
//     nodes (below), which have none. They are distinct positions of its
//     neighbour list, so distinct neighbours unless the list repeats one
//     (duplicate edges kept by an import's --keep-duplicates): then the
//     neighbour comes as often as its entries are drawn, as DGL samples
//     edges of a multigraph.
//
// Sampling is uniform without replacement (Floyd's algorithm) with a PCG
// generator seeded from (Seed, epoch, batch index), so batches do not
// depend on Workers or scheduling. As in DGL, each block samples its
// destinations afresh, so a target is sampled once per layer; its
// neighbour list is looked up only once per batch.
//
// Historical-embedding reuse (Options.Reuse, or per batch
// Options.ReuseFor): a reused node reached at hop 1 that is not itself a
// target is not expanded in blocks 0..L-2: its neighbour list is not looked
// up, it has no sampled edges there, and nodes reachable only through it are
// never reached. Its local id is listed in Batch.Reused and the training
// loop substitutes its cached layer-(L-1) input embedding. A target is
// always expanded, reused or not. ReuseFor is called once per batch, after
// hop 1 and before hop 2, with the batch's hop-1 non-target nodes; its
// answer may depend on the batch (the training loop decides batch i's set
// after computing batch i−D). Each batch has its own generator, seeded
// from (Seed, epoch, index), so a batch depends only on those and on the set
// ReuseFor returns for it, never on which worker samples it or when
// ReuseFor returns.
//
// # Neighbour lookups
//
// Each expanded node's list is looked up once per batch, in order: the
// macro batch's DynamicCache (partition mode: the adjacency of its
// partitions, loaded by Partitions.LoadAdjacency when its first batch is
// sampled and dropped after its last), the global neighborcache.Cache
// (Options.NeighborCache), then storage (Options.Source: the mapping, or
// pread through page cache or O_DIRECT, one list at a time; or
// SourceBatch). The dynamic cache is first because the planner sizes the
// global one by the lists the dynamic cache does not serve; with the
// global cache first, its hits on lists the dynamic cache held counted as
// savings the plan never predicted (and the history's "neighbour ids not
// drawn" went negative). LookupStats counts hits, misses and bytes at
// every level; Dynamic.Hits+Dynamic.Misses == Lookups, and each level's
// misses are the next level's lookups.
// Storage.BytesRead counts list bytes requested from storage; the exact
// device bytes of the pread sources are on the dataset's "sample"
// accounting stage.
//
// With SourceBatch the lookups of one hop's new destinations all happen
// before any of them is expanded: the cache hits in order, then the misses
// together, their offsets from indptr.npy and then their lists from
// indices.npy, each read as one merged, sorted plan (internal/readplan)
// through io_uring where allowed. The lists land in a per-worker arena of
// ListArenaBytes, allocated once; what does not fit in a batch's share is
// read through the mapping. Neither changes a batch: the lists are the same
// and the random draws happen in the same order.
//
// # Concurrency
//
// Sampler.Epoch starts a dispatcher and Options.Workers sampling
// goroutines; at most Prefetch sampled batches wait for the consumer. The
// Iterator owns them: they stop at the end of the epoch, on Close and
// on context cancellation, and Close waits for them. SpillEpoch adds one
// writer goroutine owned by the SpillIterator. Batches returned are owned
// by the caller and share nothing with the sampler.
//
// Batches are handed to workers in index order, so batch i's ReuseFor runs
// only after every batch < i has been handed out. A ReuseFor that waits
// until the consumer has processed batch i−D (D ≥ 1) therefore cannot
// deadlock provided Prefetch ≥ D−1 (the default 1 is enough for D ≤ 2),
// and sampling then runs at most D batches ahead of the consumer's
// processing; Workers and Prefetch only bound how many of those wait. A
// blocked ReuseFor must return once its ctx is cancelled; Close and
// cancellation then stop the workers as usual.
//
// # Spill files
//
// SpillEpoch writes batches to DIR/spill/spill-<pid>-<epoch>-<seq>.bin
// (a checksummed record per batch, specified in docs/sample.md) and reads
// them back in order. The file is removed on Close, including after
// cancellation; files of dead processes are removed when the next spill
// starts (CleanStaleSpills). A damaged record is a *CorruptError naming
// the file and the record's byte offset.
//
// # Caveats
//
// Per worker, the global→local id map is dense (8 bytes per graph node)
// for graphs up to 2^23 nodes and a Go map beyond. A batch's
// neighbourhood must stay below 2^31 nodes. The RR report keeps one bit
// per node to count unique nodes.
package sample
