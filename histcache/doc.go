// Package histcache is OUTRE's historical embedding cache (§4.3): it keeps
// the layer-(L−1) embeddings (float32 rows of width Hidden) of a fixed set
// of "second-layer" candidate nodes, the source nodes of the model's last
// layer, one hop from the targets. A valid, fresh entry lets the sampler
// skip that node's (L−1)-hop subtree and lets compute pull the embedding
// instead of computing it.
//
// # Candidates and memory
//
// Candidates are fixed at New: the nodes with the largest positive
// Config.Scores (OUTRE's saved_I/O_hist, computed by the planner), as many
// as fit the budget, ties towards the smaller id. Each candidate owns one
// slot, assigned in ascending node id order. Memory is
//
//	BytesFor(N, C, H) = 4·N            slot table: node → slot (int32, -1 = not a candidate)
//	                  + C·4·H          embeddings, slot-major
//	                  + C·8            node table: slot → node (int64, per slot)
//	                  + C·1            state table (per slot)
//	                  + C·8            iteration table: iteration of the last push (per slot)
//
// for N nodes, C candidates and hidden width H. A budget that cannot hold
// the slot table is an error (ErrBudget). Every index into the embedding,
// state and iteration tables goes through the slot table (OUTRE's released
// code indexed the embedding buffer with the state value, a bug our tests
// would catch).
//
// # States
//
// A node is in one of these states (State):
//
//	NotCandidate    not in the candidate set; never cached
//	Empty           candidate without an embedding
//	Valid           holds an embedding pushed at iteration t
//	MustRefresh     held one that went stale or was evicted; must be recomputed and pushed
//	InBatchCompute  Valid, but the current batch also computes its exact embedding
//	                (it is a target or appears at hop ≥ 2), so it must not be pulled
//
// The events and the transition table (Transition; "—" = rejected, the
// operation fails with ErrTransition or, for bulk operations, skips the
// node as documented on the method):
//
//	state \ event   Push     Evict        Expire       MarkInBatch     EndBatch  Pull
//	NotCandidate    —        —            —            NotCandidate    NotCand.  —
//	Empty           Valid    Empty        —            Empty           Empty     —
//	Valid           Valid    MustRefresh  MustRefresh  InBatchCompute  Valid     Valid
//	MustRefresh     Valid    MustRefresh  —            MustRefresh     MustRef.  —
//	InBatchCompute  InBatch. MustRefresh  —            InBatchCompute  Valid     —
//
// Push is an admitted push (the iteration table is set to the push's
// iteration); Evict is a gradient eviction or a push the admission policy
// refused; Expire is a Valid entry found too old at an iteration: it is
// evaluated, not stored (StateAt reports it; Lookup and Pull refuse the
// entry for that iteration), so that a sampler running ahead at a later
// iteration never invalidates an entry the compute stage is about to pull
// for an earlier one; the next Push refreshes it. EndBatch returns
// InBatchCompute nodes to Valid (with the embedding pushed during the
// batch, if any, otherwise the old one, still subject to staleness).
//
// # Staleness
//
// An entry pushed at iteration t is usable at iteration i iff
// 0 ≤ i − t < Staleness (default 100; the profile and training default to
// EpochStaleness, one epoch of batches past the reuse depth). With
// Staleness = 1 an entry is never
// used in a later iteration, so training with the cache gives exactly the
// results of training without it. Iterations are caller-defined int64s,
// increasing by one per batch.
//
// # Admission policies
//
// PolicyStaleness admits every push. PolicyGrad is FreshGNN's gradient
// criterion (§4.1): among the candidates pushed in one Push, the fraction
// PGrad with the smallest gradient norms is admitted; the others are
// evicted (a Valid entry of theirs becomes MustRefresh). The largest
// admitted norm becomes the threshold, and EvictUnstable evicts pulled
// entries whose gradient norm exceeds it. A NaN norm counts as +Inf.
//
// # Snapshot format
//
// WriteTo writes, all integers little-endian:
//
//	magic     8 bytes  "SSDHIST\x00"
//	version   uint32   2 (1: no threshold trailer; read too)
//	hidden    uint32   H
//	numNodes  int64    N
//	slots     int64    C (number of candidates)
//	staleness int64
//	entries   int64    E, number of entry records
//	E records, ascending node id:
//	  node  int64
//	  state uint8      Valid or MustRefresh (InBatchCompute is written as Valid)
//	  iter  int64      iteration of the last push
//	  emb   H float32  the embedding (the last pushed one, also for MustRefresh)
//	thresholdSet uint8    version 2 only: 1 when a PolicyGrad Push set the threshold
//	threshold    float32  version 2 only: EvictUnstable's threshold (Threshold)
//	checksum  uint64   xxhash64 of every preceding byte, magic included
//
// Empty candidates are not written. The threshold is written so that a
// restored cache evicts as the running one would until the next Push
// with candidates sets it: version 1 dropped it, and a resumed
// --hist-policy grad run then skipped EvictUnstable after a push
// without candidates (TestSnapshotKeepsThreshold). A version-1
// snapshot restores without a threshold. ReadFrom restores into a cache built
// with the same N, H and candidate set (same Scores and budget); it reads
// and verifies the whole snapshot before changing anything, decoding it
// with internal/decbuf a bounded chunk at a time, and reports damage as a
// *CorruptError naming the field and its byte offset (and the file, when
// the reader is an *os.File).
//
// # Concurrency
//
// All methods are safe for concurrent use (one mutex): the sampler may
// call Lookup while the compute stage pushes and pulls. Which batch sees
// which entries is then up to the caller's ordering; a pipelined trainer
// must Lookup for iteration i only after Push for iteration i − 1 if it
// wants the entries of i − 1.
package histcache
