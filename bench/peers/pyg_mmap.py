#!/usr/bin/env python3
"""PyG+mmap peer of `ssdgnn bench ooc` (OUTRE's PyG+mmap baseline).

Trains a 3-layer GraphSAGE with PyTorch Geometric's NeighborLoader on an
ssdgnn dataset directory, with the node features memory-mapped from
features.npy (np.load(mmap_mode="r")), so every feature row a batch needs
goes through the page cache, as in the `mmap-baseline` configuration.

    python3 bench/peers/pyg_mmap.py bench/results/ooc-data --epochs 2 \
        --fanouts 10,10,10 --batch-size 1000 --hidden 32 > pyg.json

Prints one JSON object per epoch on stdout (epoch, wall_s, sample_gather_s,
compute_s, loss, train_acc, and valid_acc after the last epoch), then a
summary object. Run it inside the same memory limit as the harness, e.g.
bench/capped-run.sh $((2<<30)) python3 bench/peers/pyg_mmap.py DIR.

Caveat: PyG's sampler wants int64 CSR arrays, so indptr/indices are converted
to int64 tensors in memory (8 bytes per edge); only the features stay
memory-mapped. The ssdgnn mmap-baseline maps the graph as well.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE
from torch_geometric.typing import SparseTensor


def load(dirname):
    with open(os.path.join(dirname, "dataset.json")) as f:
        manifest = json.load(f)

    def arr(name):
        return np.load(os.path.join(dirname, name), mmap_mode="r")

    feats = arr("features.npy")  # float32 or float16 [N, D], memory-mapped
    indptr = torch.from_numpy(np.asarray(arr("indptr.npy"), dtype=np.int64))
    indices = torch.from_numpy(np.asarray(arr("indices.npy"), dtype=np.int64))
    n = int(manifest["num_nodes"])
    # The graph is symmetrised, so the CSR of out-neighbours is also the CSC
    # that NeighborLoader samples from.
    adj_t = SparseTensor(rowptr=indptr, col=indices, sparse_sizes=(n, n), is_sorted=True, trust_data=True)
    # torch.from_numpy shares the mapping: indexing reads only the rows asked
    # for. np.memmap is read-only; torch warns about that and never writes.
    x = torch.from_numpy(feats)
    y = torch.from_numpy(np.asarray(arr("labels.npy"), dtype=np.int64))
    data = Data(x=x, y=y, adj_t=adj_t, num_nodes=n)
    split = {s: torch.from_numpy(np.asarray(arr(s + "_idx.npy"), dtype=np.int64)) for s in ("train", "valid", "test")}
    return manifest, data, split


def loader(data, idx, fanouts, batch_size, shuffle, workers):
    return NeighborLoader(data, num_neighbors=fanouts, input_nodes=idx, batch_size=batch_size,
                          shuffle=shuffle, num_workers=workers)


@torch.no_grad()
def evaluate(model, data, idx, fanouts, batch_size, workers):
    model.eval()
    correct = total = 0
    for batch in loader(data, idx, fanouts, batch_size, False, workers):
        out = model(batch.x.float(), batch.adj_t)[: batch.batch_size]
        y = batch.y[: batch.batch_size]
        correct += int((out.argmax(-1) == y).sum())
        total += batch.batch_size
    return correct / max(1, total)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--fanouts", default="10,10,10")
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    fanouts = [int(s) for s in args.fanouts.split(",")]

    manifest, data, split = load(args.dir)
    model = GraphSAGE(in_channels=int(manifest["feat_dim"]), hidden_channels=args.hidden,
                      num_layers=len(fanouts), out_channels=int(manifest["num_classes"]))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    train = split["train"][data.y[split["train"]] >= 0]

    t_start = time.perf_counter()
    epochs = []
    for epoch in range(args.epochs):
        model.train()
        prep = comp = loss_sum = 0.0
        correct = seen = 0
        t0 = time.perf_counter()
        t_prev = t0
        for batch in loader(data, train, fanouts, args.batch_size, True, args.workers):
            t1 = time.perf_counter()
            prep += t1 - t_prev  # sampling + feature gather (page cache / storage)
            opt.zero_grad()
            out = model(batch.x.float(), batch.adj_t)[: batch.batch_size]
            y = batch.y[: batch.batch_size]
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            loss_sum += float(loss) * batch.batch_size
            correct += int((out.argmax(-1) == y).sum())
            seen += batch.batch_size
            t_prev = time.perf_counter()
            comp += t_prev - t1
        rec = {"epoch": epoch, "wall_s": time.perf_counter() - t0, "sample_gather_s": prep, "compute_s": comp,
               "loss": loss_sum / max(1, seen), "train_acc": correct / max(1, seen)}
        if epoch == args.epochs - 1:
            rec["valid_acc"] = evaluate(model, data, split["valid"], fanouts, args.batch_size, args.workers)
        epochs.append(rec)
        print(json.dumps(rec), flush=True)
    summary = {"peer": "pyg+mmap", "epochs": len(epochs),
               "epoch_s": sum(e["wall_s"] for e in epochs) / max(1, len(epochs)),
               "final_valid_acc": epochs[-1].get("valid_acc") if epochs else None,
               "elapsed_s": time.perf_counter() - t_start}
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
