#!/usr/bin/env python3
"""Checks ScriptSampler against brute force on random graphs (NumPy only).

    python3 bench/peers/sampler_test.py [SEED]

For each batch: the seeds come first, nodes are unique, every sampled edge
is an edge of the graph, a node gets min(degree, fanout) neighbours (all
with fanout -1), no (source, target) pair repeats, each hop's targets are
the previous hop's new nodes, and the sampler's scratch is clean after.
gather_rows on a memory-mapped .npy equals fancy indexing, for chunks
smaller and larger than the request and repeated ids.
Prints the seed; exits non-zero on the first failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tempfile  # noqa: E402

from sampler import ScriptSampler, gather_rows  # noqa: E402


def graph(rng, n, m):
    e = rng.integers(0, n, (2, m))
    e = np.concatenate([e, e[::-1]], 1)
    e = np.unique(e[:, e[0] != e[1]], axis=1)
    e = e[:, np.lexsort((e[1], e[0]))]
    indptr = np.zeros(n + 1, np.int64)
    np.add.at(indptr, e[0] + 1, 1)
    return np.cumsum(indptr), e[1].astype(np.int32)


def check(seed):
    rng = np.random.default_rng(seed)
    for n, m, fanouts in ((50, 40, [3, 2]), (2000, 20000, [5, 3]), (3000, 60000, [10, 10, 10]), (500, 3000, [-1, 4])):
        indptr, indices = graph(rng, n, m)
        adj = [set(indices[indptr[v]:indptr[v + 1]].tolist()) for v in range(n)]
        s = ScriptSampler({"indptr": indptr, "indices": indices, "n": n}, fanouts, seed)
        for _ in range(10):
            seeds = rng.choice(n, min(n, 40), replace=False).astype(np.int64)
            nodes, ei, bs = s.sample(seeds)
            assert bs == len(seeds) and (nodes[:bs] == seeds).all(), "seeds first"
            assert len(np.unique(nodes)) == len(nodes), "nodes unique"
            assert (s.local == -1).all(), "scratch clean"
            pairs = set(zip(ei[0].tolist(), ei[1].tolist()))
            assert len(pairs) == ei.shape[1], "a (source, target) pair repeats"
            for a, b in pairs:
                assert nodes[a] in adj[nodes[b]], "not an edge"
            # Hop by hop: targets of hop h are the nodes first reached at h-1.
            lo, hi = 0, bs
            for k in fanouts:
                cnt = np.bincount(ei[1], minlength=len(nodes))[lo:hi]
                deg = indptr[nodes[lo:hi] + 1] - indptr[nodes[lo:hi]]
                want = deg if k < 0 else np.minimum(deg, k)
                assert (cnt == want).all(), "neighbours per node"
                reached = {a for a, b in pairs if lo <= b < hi}
                new = [a for a in reached if a >= hi]
                lo, hi = hi, hi + len(new)
                assert sorted(new) == list(range(lo, hi)), "new nodes numbered in order"
            assert hi == len(nodes), "every node reached by the last hop"


def check_gather(seed):
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "features.npy")
        feats = rng.standard_normal((5000, 7)).astype(np.float32)
        np.save(path, feats)
        mapped = np.load(path, mmap_mode="r")
        for n, chunk in ((0, 16), (1, 16), (999, 64), (3000, 1 << 16), (4000, 7)):
            nodes = rng.integers(0, len(feats), n)
            x = gather_rows(mapped, nodes, chunk)
            assert x.shape == (n, 7) and x.dtype == np.float32, "shape"
            assert (x == feats[nodes]).all(), "gathered rows differ"
        del mapped


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else int.from_bytes(os.urandom(4), "little")
    print("sampler_test seed", seed)
    check(seed)
    check_gather(seed)
    print("ok")
