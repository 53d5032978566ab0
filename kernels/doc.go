// Package kernels defines the compute-backend interface that ssdgnn's
// trainer runs GraphSAGE, GCN and GAT through, plus the host-side types every
// backend shares (the CSR message-flow Block, the dropout RNG, the GCN
// normalisation, sentinel errors).
//
// Implementations: package kernels/cpu (pure Go, always built) and a CUDA
// backend behind the `cuda` build tag. Both must pass the conformance suite in
// package kernels/kerneltest.
//
// # Memory model and ownership
//
// A Tensor is an opaque handle to float32 memory that the backend allocated;
// an IntTensor is the same for int32 buffers; a DeviceBlock is an uploaded
// Block. Callers never touch tensor memory directly: they move data with
// Upload/Download (and UploadInts/DownloadInts). Handles belong to the backend
// that made them; passing one to another backend is an error
// (ErrForeignTensor). The caller owns the lifetime: every Alloc/AllocInts/
// UploadBlock is matched by Free/FreeInts/FreeBlock, and a freed handle must
// not be used again (backends report ErrFreed where they can detect it).
// MemStats reports the bytes currently held by live handles and the peak.
//
// A backend may also implement the optional HostGatherer: the caller
// registers a host float32 array once (RegisterHostRows; the array stays the
// caller's, is not copied and is not counted in MemStats) and gathers rows
// of it into tensors by host index (GatherHostRows, bit for bit
// Upload+GatherRows). The CUDA backend reads the rows zero-copy over the
// bus; the CPU backend copies them. The caller keeps the array alive,
// unmoved and its queued rows unmodified until UnregisterHostRows; the
// handle follows the Handle rules (ErrForeignTensor, ErrFreed).
//
// # Layout
//
// Tensors are float32, row-major, rows×cols, densely packed (no padding is
// visible through the interface). A bias is a 1×C tensor. Multi-head
// attention features use the H·F layout: for H heads of F features each, row
// r holds head h's features at columns [h·F, (h+1)·F). Per-edge tensors (GAT
// scores and attention weights) are E×H with edges in the Block's CSR order
// (edge k is the k-th entry of Indices). Zero-sized tensors (rows or cols 0)
// are allowed, and every op accepts them.
//
// # Blocks
//
// A Block is CSR over destinations: destination i's sources are
// Indices[Indptr[i]:Indptr[i+1]], given as source-local ids. Destinations come
// first in the source list (DGL convention): destination i is also source i,
// so NumSrc >= NumDst. Duplicate edges are allowed and counted with their
// multiplicity; explicit self edges are allowed and are ordinary edges.
//
// Aggregation operators (dst is NumDst×F, src is NumSrc×F):
//
//	AggSum:  dst_i = Σ_{k∈N(i)} src_{j_k}
//	AggMean: dst_i = (1/deg_i) Σ_{k∈N(i)} src_{j_k}     (0 if deg_i = 0)
//	AggGCN:  dst_i = 1/sqrt(D_i+1) · ( src_i/sqrt(out_i+1)
//	                 + (D_i/deg_i) Σ_{k∈N(i)} src_{j_k}/sqrt(out_{j_k}+1) )
//
// where deg_i = Indptr[i+1]-Indptr[i] is the in-degree of destination i in
// the block and out_j is the number of entries of Indices equal to j (the
// out-degree of source j in the block), or Block.SrcDegrees[j] when set.
// D_i is Block.DstDegrees[i] when set, else deg_i (the factor D_i/deg_i is
// then 1, and a destination without in-edges gets src_i/(sqrt(deg_i+1)·
// sqrt(out_i+1)) alone). GCN adds one implicit self loop per destination
// (the src_i term); the "+1" of every source's normaliser is that self
// loop for j < NumDst and is kept for j >= NumDst too, so that the
// normaliser is simply 1/sqrt(out_j+1) for all sources (see GCNNorms).
//
// A sampler that sets both degrees from the whole graph makes AggGCN the
// estimate of full-graph GCN (Â = D̃^-1/2 (A+I) D̃^-1/2) that sampled
// training needs: each sampled term carries Â's weight, and the sum of deg_i
// sampled in-edges is scaled by D_i/deg_i, so its expectation over a
// uniform sample is the full neighbourhood's; with every in-edge sampled it
// is Â exactly. Block-local degrees (both nil) are DGL's sampled
// GraphConv: each block is normalised as a graph of its own, which is not
// the full graph's operator.
//
// The GAT ops use the block's edges only: a destination with no in-edges gets
// a zero output. Samplers that want a node to attend to itself add the
// explicit edge i→i.
//
// # Semantics shared by all ops
//
// Every op fully overwrites its output unless its doc says it accumulates
// (ScatterAddRows, AddBias, AXPY, the beta term of GEMM, Adam's in-place
// updates). Outputs must not alias inputs unless the op's doc allows it.
// Backward ops take the upstream gradient and write the gradient w.r.t. the
// op's inputs; where an input feeds several paths (GraphSAGE's self path,
// GAT's Wh used in both the scores and the weighted sum) the caller adds the
// contributions with Add or AXPY.
//
// # Errors
//
// Ops do not return errors. A backend records the first error (shape
// mismatch ErrShape, foreign or freed handle, closed backend, device
// failure) and turns every later op into a no-op; Err reports it. Sync points
// (Download, DownloadInts, CrossEntropy, Accuracy) also return it. This
// mirrors an asynchronous device stream: check Err once per step. Out of
// memory is returned directly by the allocating methods.
//
// The shape and argument rules of every op are written once, as the CheckX
// functions of this package (CheckGEMM, CheckAggregate, CheckGATScores, ...).
// A backend resolves its own handles (ownership, ErrFreed), calls the
// matching CheckX and records a non-nil result, prefixed with its name and
// the op's, as its sticky error; so every backend reports the same ErrShape
// or ErrInvalidArg for the same bad call.
//
// # Determinism and concurrency
//
// For a fixed backend configuration every op is deterministic: the same
// inputs give bit-identical outputs regardless of goroutine scheduling.
// Backends use no floating-point atomics; reductions happen in a fixed order.
// Results may differ in the last bits between backends and between CPU
// backends with different worker counts (GEMM blocking), which the
// conformance suite's tolerances allow for. Dropout masks are a pure
// function of (seed, element index) through DropoutUniform and are
// bit-identical on every backend.
//
// A Backend is not safe for concurrent use: like a device stream, one
// goroutine issues ops at a time. MemStats may be called concurrently.
package kernels
