// Package train is ssdgnn's trainer: GraphSAGE, GCN and GAT models on a
// kernels.Backend, trained with Adam over mini-batches that flow through
// OUTRE's four stages (§2.2) with historical second-layer embeddings (§4.3).
// The user guide, measured accuracies and the checkpoint format are in
// docs/train.md.
//
// # Models
//
// SAGE: h' = W_self·h_dst + W_neigh·mean(h_src) + b. GCN: h' = Â·h·W + b with
// the symmetric GCN normalisation and an implicit self loop. GAT: multi-head
// attention (LeakyReLU 0.2 scores, edge softmax), heads concatenated on hidden
// layers and averaged on the output layer; every destination gets a self loop.
// ReLU between layers, dropout on every layer's input while training,
// log-softmax cross-entropy on the targets. Weights are Glorot-uniform from
// (Seed), dropout masks from (Seed, epoch, batch, layer).
//
// # Pipeline
//
// An epoch runs Sample (the sampler's workers, then the reuse decision and
// block pruning), Gather (feature rows through the feature cache), Transfer
// (upload to the backend) and Compute (forward, backward, Adam, history push)
// as goroutines joined by channels of capacity 1, so gather of batch i+1
// overlaps compute of batch i. Each stage's busy time is measured. Backend
// calls are serialised by a mutex (backends are single-threaded objects), so
// on the CPU backend transfer and compute do not overlap each other. Every
// goroutine is owned by the epoch and joined before Run returns, also on
// cancellation.
//
// # Historical embeddings and determinism
//
// The layer-(L−1) output (the last layer's input, after ReLU) of hop-1
// nodes is cached in a histcache.Cache whose candidates are the nodes of
// largest degree that fit the budget. For batch i the reuse set is decided
// and the embeddings pulled by the compute goroutine right after compute of
// batch i−D (D = PipelineDepth = 2; at the start of an epoch, against the
// cache as the previous epoch left it), so it depends only on the seed, never
// on timing. Reused nodes lose their in-edges in blocks 0..L−2 and nodes
// reachable only through them are dropped before Gather, so their subtrees
// are neither gathered, transferred nor computed. Caveat: the sampler has
// already expanded them (sample.Options.Reuse is consulted by concurrent
// workers without batch identity, so it cannot implement a deterministic
// per-batch decision); neighbour-list reads for those subtrees are still paid.
// Rows computed in a batch are pushed with the batch's iteration number and,
// under histcache.PolicyGrad, the L2 norms of their gradients; pulled rows
// whose gradient norm exceeds the admission threshold are evicted. With
// Staleness 1 nothing is ever reused and training is bit-identical to NoHist.
//
// # Checkpoints
//
// A checkpoint holds the options, model parameters, Adam moments and step,
// the epoch and batch position and the history cache; all randomness is a
// pure function of (Seed, epoch, batch), so there is no generator state to
// save. Resuming from an epoch boundary reproduces an uninterrupted run
// exactly; resuming from a mid-epoch (interrupted) checkpoint skips the
// batches already trained and is exact too except that, with history on,
// the reuse sets of the first D batches are decided against the
// checkpointed cache.
package train
