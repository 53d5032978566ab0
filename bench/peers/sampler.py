"""The PyG+mmap peer's own neighbour sampler and row gather (NumPy only).

pyg_mmap.py uses the sampler where PyG has neither pyg-lib nor
torch-sparse, which NeighborLoader needs, and gather_rows for every
batch's feature rows. sampler_test.py checks both against brute force.
"""

import numpy as np


class ScriptSampler:
    """NeighborLoader's uniform sampling without replacement, on the mapped CSR.

    The graph is symmetrised, so out-neighbours are in-neighbours. Yields
    (nodes, edge_index, batch_size): nodes[:batch_size] are the seeds,
    edge_index[0] the sampled neighbour (message source), edge_index[1] the
    node it was sampled for, both as positions in nodes.
    """

    def __init__(self, g, fanouts, seed):
        self.indptr, self.indices = g["indptr"], g["indices"]
        self.fanouts = fanouts
        self.rng = np.random.default_rng(seed)
        self.local = np.full(g["n"], -1, dtype=np.int64)

    def sample(self, seeds):
        local, rng = self.local, self.rng
        nodes = [seeds]
        local[seeds] = np.arange(len(seeds))
        count = len(seeds)
        frontier = seeds
        rows, cols = [], []
        for k in self.fanouts:
            start = np.asarray(self.indptr[frontier], dtype=np.int64)
            deg = np.asarray(self.indptr[frontier + 1], dtype=np.int64) - start
            take = deg if k < 0 else np.minimum(deg, k)
            # Edge positions: all of a node's edges when it has at most k,
            # else k distinct ones: the k smallest of one random key per edge.
            small = deg == take
            seg = np.repeat(np.arange(len(frontier)), np.where(small, deg, 0))
            off = np.arange(len(seg)) - np.repeat(np.cumsum(np.where(small, deg, 0)) - np.where(small, deg, 0), np.where(small, deg, 0))
            pos_small, dst_small = start[seg] + off, seg
            big = np.nonzero(~small)[0]
            if len(big):
                bdeg = deg[big]
                bseg = np.repeat(np.arange(len(big)), bdeg)
                boff = np.arange(len(bseg)) - np.repeat(np.cumsum(bdeg) - bdeg, bdeg)
                order = np.lexsort((rng.random(len(bseg)), bseg))
                rank = np.arange(len(order)) - np.repeat(np.cumsum(bdeg) - bdeg, bdeg)
                keep = order[rank < k]
                pos_big = start[big[bseg[keep]]] + boff[keep]
                dst_big = big[bseg[keep]]
                pos = np.concatenate([pos_small, pos_big])
                dst = np.concatenate([dst_small, dst_big])
            else:
                pos, dst = pos_small, dst_small
            srt = np.argsort(pos)  # read the mapped indices in file order
            nb = np.empty(len(pos), dtype=np.int64)
            nb[srt] = self.indices[pos[srt]]
            new = np.unique(nb[local[nb] < 0])
            local[new] = np.arange(count, count + len(new))
            count += len(new)
            nodes.append(new)
            rows.append(local[nb])
            cols.append(local[frontier[dst]])
            frontier = new
        nodes = np.concatenate(nodes)
        local[nodes] = -1
        edge_index = np.stack([np.concatenate(rows), np.concatenate(cols)])
        return nodes, edge_index, len(seeds)


def gather_rows(feats, nodes, chunk=1 << 16):
    """feats[nodes], read in file order a chunk of rows at a time, so that
    the only full-size copy is the result (fancy indexing a memmap whole,
    then scattering, holds two copies of a batch's rows)."""
    x = np.empty((len(nodes), feats.shape[1]), dtype=feats.dtype)
    srt = np.argsort(nodes, kind="stable")
    for i in range(0, len(srt), chunk):
        pos = srt[i:i + chunk]
        x[pos] = feats[nodes[pos]]
    return x
