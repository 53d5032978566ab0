// Package synth generates synthetic ssdgnn datasets of any size whose
// accuracy means something, streaming with bounded memory.
//
// Generate writes an ordinary dataset directory (see package storage):
// a symmetric CSR without self loops or duplicate edges, features, labels
// and train/valid/test splits, and a manifest whose Source field records
// the model parameters.
//
// # Model
//
// The graph is a degree-corrected stochastic block model with C planted
// communities and power-law expected degrees.
//
//   - Communities are scattered over the id space: a seeded bijection π on
//     [0, N) (a 4-round Feistel network on the smallest even number of bits
//     covering N, restricted to [0, N) by cycle walking; O(1) memory) maps
//     node v to position π(v), and community(v) = π(v) mod C, rank(v) =
//     π(v) div C. The member of community c with rank k is π⁻¹(k·C + c).
//     Community sizes differ by at most one. Partitioning by node id
//     therefore finds nothing.
//   - Expected degrees follow the rank within the community: with
//     β = 1 − 1/(γ−1), the weight of rank k is θ_k = ((k+2)^β − (k+1)^β)/β,
//     the integral of (x+1)^(−1/(γ−1)) over [k, k+1). θ is power-law with
//     P(deg = d) ∝ d^−γ. A rank is drawn ∝ θ in closed form by inverting the
//     continuous CDF and taking the floor: no per-node tables.
//   - Node u draws s_u out-stubs, E[s_u] = (AvgDegree/2)·θ_u/θ̄, rounded up
//     or down at random. Each stub's endpoint is, with probability
//     Homophily, a member of u's community drawn ∝ θ, and otherwise a
//     member of another community drawn ∝ θ (by rejection). Both (u,v) and
//     (v,u) are emitted; self loops are dropped and counted; the external
//     sorter removes duplicates. Every node's expected degree is then
//     AvgDegree·θ_u/θ̄, and the fraction of edges inside a community is
//     Homophily in expectation.
//   - label(v) = community(v) mod Classes. The default number of
//     communities is a multiple of Classes, so classes are balanced.
//   - Features: class y has a centroid μ_y ∈ {±1}^D (bits of a seeded hash);
//     row v is (μ_label(v) + FeatNoise·ε_v)/sqrt(1+FeatNoise²), ε_v from the
//     row's own generator seeded by (Seed, v), so every dimension has unit
//     variance. ε is approximately standard normal (a 48-bit binomial
//     smoothed by a 16-bit uniform: mean 0, variance 1, tails cut at 6.9σ),
//     which is cheap and bit-reproducible. With the default FeatNoise a
//     nearest-class-mean classifier of the raw features is right about a
//     quarter to a third of the time with 16 classes, while the same
//     classifier on features averaged over each node's closed neighbourhood
//     is above 90 % (TestFeatureSignal): a GNN has something to learn that
//     an MLP cannot.
//   - Splits: node v goes to train, valid or test by one uniform draw seeded
//     by (Seed, v) against TrainFrac, TrainFrac+ValidFrac, and so on; the
//     index arrays come out sorted.
//
// # Guarantees and caveats
//
//   - Same Config and Seed give byte-identical files, whatever the Options
//     (Workers, MemBytes, TempDir): every random quantity is derived from
//     (Seed, stream, node), and the sorted, deduplicated edge set does not
//     depend on the order in which workers deliver edges. Feature values use
//     integer arithmetic and single IEEE operations only, so they should also
//     match across platforms, though only amd64 is tested.
//   - The realised average degree is a few percent below AvgDegree (about
//     4-8 % at the defaults, more with small communities or very heavy
//     tails) because duplicate pairs, mostly between hubs of one community,
//     are dropped, and self loops too; Report and the manifest count both.
//   - Homophily is the expected fraction of stubs kept inside the community;
//     the fraction of edges with equal labels is higher because several
//     communities share a label.
//   - The generated graph is undirected (Manifest.Symmetrized) and every
//     node is labelled; isolated nodes are possible for very small
//     AvgDegree.
//
// # Memory and speed
//
// Nothing of size O(N) or O(E) is held in memory: sampling is per node with
// closed-form formulas, edges go through the external sorter
// (internal/extsort), and features are produced in chunks of about 1 MiB
// by Workers goroutines through a bounded, ordered pipeline; the edge and
// the feature stages run concurrently. Options.MemBytes is the budget of
// the whole process, independent of N: ReserveBytes for the runtime and
// the writers, WorkerBytes for each worker's chunks in flight (fewer
// workers run when they would take more than half of what the reserve
// leaves), the rest for the sorter's buffer, whose peak (growth steps
// included) stays within it; the Go heap's soft limit is MemBytes less
// membudget.PageCacheBytes (internal/membudget). The sorter's run files go to Options.TempDir, by default
// the output directory.
//
// The sorter consumes edges on one goroutine (radix sort, merge, CSR
// write), which bounds the edge stage at a few million edges per second;
// sampling and feature generation scale with Workers.
package synth
