// Package train is ssdgnn's trainer: GraphSAGE, GCN and GAT models on a
// kernels.Backend, trained with Adam over mini-batches that flow through
// OUTRE's four stages (§2.2) with historical second-layer embeddings (§4.3).
// The user guide, measured accuracies and the checkpoint format are in
// docs/train.md.
//
// # Models
//
// SAGE: h' = W_self·h_dst + W_neigh·mean(h_src) + b. GCN: h' = Â·h·W + b with
// the symmetric GCN normalisation and an implicit self loop, by the whole
// graph's degrees in every block (graphDegrees, kernels.Block.DstDegrees
// and SrcDegrees): a sampled destination's neighbour sum is scaled by
// D/k (k of its D in-edges sampled), an unbiased estimate of Â's row, so
// that training, sampled evaluation and exact layer-wise evaluation apply
// one operator (with every in-edge sampled, exactly). GAT: multi-head
// attention (LeakyReLU 0.2 scores, edge softmax), heads concatenated on hidden
// layers and averaged on the output layer; every destination gets a self loop.
// ReLU between layers, dropout on every layer's input while training,
// log-softmax cross-entropy on the targets. Weights are Glorot-uniform from
// (Seed), dropout masks from (Seed, epoch, batch, layer).
//
// # Pipeline
//
// An epoch runs Sample (the sampler's workers, which apply the reuse
// decision while sampling), Gather (feature rows through the feature cache),
// Transfer (upload to the backend) and Compute (forward, backward, Adam,
// history push) as goroutines joined by channels of capacity 1, so gather of
// batch i+1 overlaps compute of batch i. Each stage's busy time is measured
// (Sa is the sampling workers' own time building the epoch's batches,
// sample.Batch.SampleSeconds, without their waits for the reuse decision,
// plus the conversion of each batch; before commit 88457e5 it was the
// consumer's wait in the sampler iterator, which docs/train.md's older
// tables still show).
//
// Memory per batch is bounded explicitly: Gather takes one of
// Options.InFlight (default 2) recycled host buffers per batch and waits
// while all are out, so at most InFlight batches' input features are alive
// at once; the CPU backend adopts the buffer as the input tensor (no second
// copy) and it returns to the ring when compute frees the tensor. The input
// layer's dropout is applied to the buffer on the host with the mask every
// backend draws (kernels.DropoutUniform), so no mask or dropped copy of the
// largest tensor exists. Evaluation reuses one buffer. Backend calls are
// serialised by a mutex (backends are single-threaded objects), so on the
// CPU backend transfer and compute do not overlap each other. Every
// goroutine is owned by the epoch and joined before Run returns, also on
// cancellation.
//
// # Zero-copy input path
//
// With Options.ZeroCopy (auto on a backend that implements
// kernels.HostGatherer other than the CPU backend; on: whenever it
// qualifies) the static feature cache's float32 array is registered with the
// backend once in New and unregistered in Close. Gather then splits each
// batch's input rows by featurecache.Cache.Slots: misses are read on the
// host into a ring buffer of their size only; hits are counted (the gather
// stage's accounting and the feature hit rate see them as before) but never
// copied on the host. Upload assembles the input tensor on the backend:
// GatherHostRows of the hits from the registered array, Upload of the
// misses, both scattered with ScatterAddRows into a tensor filled with −0
// (−0 + x == x for every float32, signed zeros included), then the input
// layer's dropout on the backend with the seed and mask hostDropout would
// use (kernels.DropoutUniform, x·mask). The result is bit for bit the host
// path's. It falls back to the host path, and says why in
// Report.ZeroCopy and one log line, for the dynamic cache, float16
// features, NormalizeFeatures, no static cache, or a backend without
// HostGatherer. History embeddings still travel as pulled host copies: the
// history cache exposes no backing array, and its rows may be overwritten by
// pushes between the reuse decision and compute.
//
// # Streamed input layer
//
// With Options.StreamInput (auto: under a memory plan, where scans can read
// two batches in flight together or whole batches would not fit
// unstreamed; SAGE and GCN on the host input path) gather
// does not build a batch's input matrix. It reads the input rows in chunks
// sorted by id (two chunk slots: one read while the other is folded in),
// applies normalisation and the input dropout with hostDropout's mask,
// and folds each chunk into the input layer's aggregate and its
// destinations' own rows (stream.go). The input layer's forward starts
// from those (preAggregated); its backward needs nothing else. A batch's
// working set is then its destinations', so the budget cuts fewer
// micro-batches, whose rows are read with fewer, larger reads. Sums run in
// ascending id order, so results equal the unstreamed ones up to float
// summation order and are deterministic.
//
// One scan reads the input rows of up to Options.ScanBatches jobs in
// flight (default min(InFlight, ReuseDepth)): the ascending union of their
// ids, each row once, folded into every job that needs it. The union is
// denser than any one batch's ids, so the read planner merges far more of
// it into long reads. Each job's sums keep their order, so a scan of
// several is bit-identical to scanning each alone. The gather stage waits
// for a scan's jobs before reading; a scan of at most D jobs cannot wait
// on its own reuse decisions. With the feature block a scan keeps to one
// macro batch.
//
// # Historical embeddings and determinism
//
// The layer-(L−1) output (the last layer's input, after ReLU) of hop-1
// nodes is cached in a histcache.Cache whose candidates are the nodes of
// largest score that fit the budget (with a Profile, the score the plan
// ranked by, planner.Profile.HistScore; else the degree; the cache is
// built by planner.BuildCaches). For batch i the
// reuse set is decided through the sampler's per-batch ReuseFor hook: the
// sampler hands batch i's hop-1 candidates over after sampling hop 1, and
// the compute goroutine answers right after compute of batch i−D (D =
// ReuseDepth: PipelineDepth = 2, or larger with Options.Spill; at the
// start of an epoch, against the cache as the previous epoch left it),
// looking the candidates up and pulling the embeddings at once. The decision depends only on the seed, never on
// timing, and the sampler then does not expand reused nodes: their
// neighbour lists are not read, and nodes reachable only through them are
// neither sampled, gathered, transferred nor computed. Consequently sampling
// of batch i cannot run more than D batches ahead of compute.
// An entry pushed at iteration t is usable at iteration i only while
// i−t < Staleness, and the decision for batch i sees only pushes of
// batches ≤ i−D, so reuse needs Staleness > D; New logs a warning when
// Staleness ≤ D. The exception is an epoch's first D batches, decided
// against the cache the previous epoch left, whose newest pushes are one
// batch old: with Staleness ≤ D its batches k < Staleness−1 still reuse
// (TestStalenessAtDepth), so reused ages run from 1 there, from D
// elsewhere.
// Rows computed in a batch are pushed with the batch's iteration number and,
// under histcache.PolicyGrad, the L2 norms of their gradients; pulled rows
// whose gradient norm exceeds the admission threshold are evicted. With
// Staleness 1 nothing is ever reused and training is bit-identical to NoHist.
//
// # Decoupled sample stage
//
// With Options.Spill (OUTRE §4.1, as in Ginex) the sample stage is
// sample.Sampler.SpillEpoch: a writer goroutine samples the epoch in batch
// order into a spill file under SpillDir (default DATASET/spill) in chunks
// of c = SpillChunk batches, announcing each chunk once it is flushed, and
// pauses while A = SpillAhead announced chunks wait unread (with history,
// while the chunks of D+P batches wait: below); the pipeline's
// sample goroutine reads the batches back in order. The file is deleted
// when the epoch ends or is cancelled. Batches are bit-identical to those
// of the in-memory path (each is a function of seed, epoch, index and its
// reuse set), so without history a spilled run equals an unspilled one.
//
// With history, D must be at least a chunk, because the reuse protocol ties
// the sampler to compute in both directions. Write P for the sampler's
// Prefetch (= InFlight) and m = min(InFlight, 3).
//
//   - Lower bound, D ≥ c. A batch reaches the reader only when its whole
//     chunk is written, and every batch of the chunk needs its reuse
//     decision first. When compute waits for batch k it has decided every
//     batch < k+D, and k's chunk ends at most at k+c−1.
//   - No upper bound: the reuse protocol itself keeps the writer within
//     D + P batches of compute (the sampler waits at batch i for compute
//     of batch i−D; its dispatcher hands out P batches beyond), and with
//     history the writer may have that many batches announced and unread
//     (Trainer.spillAhead: max(A, ⌈(D+P)/c⌉+1) chunks), so it never pauses
//     short of the batch whose request compute waits for. Before
//     2026-11-27 it paused at A chunks, which put an upper bound
//     D ≤ (A+1)·c + P + m + 4 on the reuse depth, derived by counting the
//     pipeline between the reader and compute in batches (the reader's,
//     toGather's, gather's and m past gather). With micro-batches those
//     stages hold parts of one or two batches, the reader can stand one
//     batch past compute, and the default D deadlocked: a 1M-node graph
//     under --mem 200MiB --spill stopped after 14 of 100 batches
//     (TestSpillMicroBatches).
//
// ReuseDepth takes D = (A+1)·c + 4 + m, the old upper bound less P, so the
// sampler runs about as far ahead as the spill buffering allowed and
// results equal those of before the change. Both ends of the old range
// finish (TestSpillDepthRange). The defaults (c 16, A 1, InFlight 2) give
// D = 38, which the default Staleness (one epoch of batches past D,
// histcache.EpochStaleness) always exceeds; a decision after compute of
// batch i−38 is staler than one after i−2, and the first D batches of an
// epoch are decided against the cache the previous epoch left, so fewer
// embeddings are reused than without spill.
//
// # Checkpoints
//
// A checkpoint holds the options, model parameters, Adam moments and step,
// the epoch and batch position and the history cache; all randomness is a
// pure function of (Seed, epoch, batch), so there is no generator state to
// save. Resuming from an epoch boundary reproduces an uninterrupted run
// exactly; resuming from a mid-epoch (interrupted) checkpoint skips the
// batches already trained and is exact too (the epoch's loss and
// train-accuracy sums so far travel in the checkpoint, so its row is the
// whole epoch's) except that, with history on, the reuse sets of the
// first D batches are decided against the checkpointed cache.
//
// # Memory plan
//
// PlanMemory runs the profiling epoch and planner.Plan (or reads a
// plan.json). New does not size or build the caches itself: it hands
// Options.Plan, Options.Profile, the byte options and each cache's options
// to planner.BuildCaches, the one owner of budget → caches, which ranks
// them by the rule the plan predicted with. With Options.Plan every cache
// whose byte option is 0 takes the plan's size, an explicit positive size
// overrides it and a negative one turns that cache off. The package keeps
// the process-wide arithmetic: the reserve, the working set and the fixed
// state (memplan.go). The training working set (WorkingSet:
// InFlight × the estimated peak bytes of one batch, from the profile's
// largest batch or the fanouts, plus the gather stage's scratch for its
// largest call, featurecache.GatherCallBytes) and the fixed state
// (FixedState: the sampling workers' per-node id maps, the profile arrays
// kept, sample.IDMapBytes(N) per worker + 8·N, the model, and the feature
// cache's read slots, featurecache.GatherSlotBytes) are reserved before
// the plan gives the rest to the caches. With Options.MemBytes, New checks the caches' memory (tables
// included) plus the working set and the fixed state against the budget
// from the sizes before building anything (planner.BuildOptions.Estimate)
// and again from the built caches (planner.Caches.Counted, their memacct
// counts), failing with ErrBudget. Each epoch's Measured savings are compared with the plan's
// prediction in Report.PlanComparison. Measured.HistGatherRows is no
// count of rows (the pruned subtrees are never sampled): it is the hop-2
// neighbours not drawn below reused nodes, Σ min(fanout, degree), draws
// of nodes the batch may hold anyway, so no bound on the rows not
// gathered either way; Measured.FeatureBytesSaved is the feature cache's
// hit bytes alone.
// Measured.GatherRows, the rows asked of the feature cache, is exact; the
// comparison measures the history's rows not gathered as the plan's
// rows an epoch without history less it.
// Measured.GatherReads and GatherBytesRead are the gather stage's read
// calls and bytes, against the plan's read model (planner package doc,
// "Read costs"); the profile is given the trainer's read options
// (ProfileOptions.Gather) and whether the feature block is on, so it
// models the reads this trainer issues.
//
// # Exact layer-wise inference
//
// With Options.EvalMode EvalLayerwise (the default) evaluation and Infer
// compute layer l for the nodes whose layer-l output is needed (the
// targets' (L−1−l)-hop in-neighbourhood, or every node). They transform
// before they aggregate (layer.transform, layer.aggregate): aggregation is
// linear, so mean(x)·W = mean(x·W), Â·(x·W) = (Â·x)·W, and GAT's scores
// need only Wh = x·W. One id-order pass reads the feature rows of every
// node whose input is needed, once each, and applies layer 0's weights;
// each layer then aggregates those output-width rows for its
// destinations in id-order chunks whose estimated working memory stays
// under Options.EvalMemBytes, and applies the next layer's weights to what
// it computed. A layer's transformed input is held in one of four ways
// (newLWStage, the first that fits half the bound left):
//
//   - memory: every source's row (memacct.Inference); a chunk gathers its
//     sources' rows over full in-neighbourhoods.
//   - push (SAGE, GCN): one accumulator row per destination, filled as the
//     layer below writes each source's row to the destinations it feeds
//     (lwAcc); the source rows are never kept. Aggregation is then a
//     scaled sum, which mean and GCN's normalised sum are; a chunk reads
//     one summed row per destination through an identity block, on which
//     AggMean and AggGCN return their input.
//   - files (SAGE, GCN, GAT): every source's row in a temporary .npy array;
//     the destinations are cut into blocks whose accumulators fit, and
//     each block is filled by one sequential pass over the array
//     (lwChunker.runPasses): passes × the array, in large reads. A
//     reader goroutine reads a bucket ahead of the pushing, and a
//     bucket's edges are pushed by one goroutine per processor, cut at
//     destination boundaries (the serial sums, bit for bit), each range
//     in one f32.AddRows call. A block's edges are sorted into buckets
//     by a counting sort that one goroutine per processor shares, each
//     over a range of destinations (the serial order). The input
//     pass likewise reads the next batch of feature rows while the
//     backend transforms the last. GAT's passes push with an online
//     softmax (lwAccGAT: per destination and head a running maximum, sum
//     and weighted sum, rescaled when the maximum rises), from its
//     destinations' scores recorded as the layer below wrote their rows
//     (lwGAT); a chunk reads acc/s through an identity block, on which
//     the softmax over one edge is exactly 1.
//   - gather (GAT when its destinations' scores do not fit): the same
//     array, from which every chunk gathers its sources' rows; ids carry
//     no locality, so this reads about chunks × the array, row by row.
//
// For push and files, a SAGE or GCN layer whose input is no wider than its
// transformed rows aggregates first (aggregateFirst, lwStage.raw): it
// pushes its input rows and transforms only the destinations' sums. On
// layer 0 with files, the passes read the feature rows themselves
// (lwFeatures), once per pass, instead of a temporary copy.
//
// The arrays hold the needed rows in id order, are written back and
// dropped from the page cache every 16 MiB (lwArray), and are removed when
// the pass returns, cancelled or not.
// The results equal a full-graph forward pass up to float summation
// order: GCN normalises by full-graph degrees (a chunk's block carries
// its sources' through kernels.Block.SrcDegrees), GAT adds the self loop
// training adds.
package train
