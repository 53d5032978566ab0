#!/usr/bin/env python3
"""PyG+mmap peer of `ssdgnn bench ooc` (OUTRE's PyG+mmap baseline).

Trains a GraphSAGE (torch_geometric.nn.GraphSAGE, mean aggregation) on an
ssdgnn dataset directory, with the node features memory-mapped from
features.npy (np.load(mmap_mode="r")), so every feature row a batch needs
goes through the page cache, as in the `mmap-baseline` configuration. The
model runs on --device (cuda when a GPU is visible).

    python3 bench/peers/pyg_mmap.py DIR --epochs 2 --fanouts 10,10,10 \
        --batch-size 1000 --hidden 32 > pyg.json

Sampling: PyG's NeighborLoader when pyg-lib or torch-sparse is installed
(--sampler pyg); otherwise (--sampler auto falls back, and the output says
so) a sampler in this script with NeighborLoader's semantics: uniform,
without replacement, per hop from the previous hop's new nodes, the union
of sampled nodes as one subgraph with the seeds first. PyG's wheels for
torch 2.11 lack both extensions on the lent GPU machines.

Prints one JSON object per epoch on stdout (epoch, wall_s, sample_gather_s,
compute_s, loss, train_acc, read_bytes from /proc/self/io, rss_anon_bytes
and vm_hwm_bytes from /proc/self/status, and valid_acc after the last
epoch), then a summary object. The first line (after the model is on the
device) gives the same two memory figures: torch's own footprint. Run it inside the same memory
limit as ssdgnn, e.g. ssdgnn bench capped --limit 2GiB -- python3
bench/peers/pyg_mmap.py DIR.

Caveat: the graph (indptr, indices) is memory-mapped as well in the script's
sampler; NeighborLoader converts it to int64 tensors in memory (8 bytes per
edge).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sampler import ScriptSampler, gather_rows  # noqa: E402  (beside this script)
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE


def read_bytes():
    """Bytes this process caused to be read from storage (/proc/self/io)."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def load(dirname):
    with open(os.path.join(dirname, "dataset.json")) as f:
        manifest = json.load(f)

    def arr(name):
        return np.load(os.path.join(dirname, name), mmap_mode="r")

    g = {
        "feats": arr("features.npy"),  # float32 or float16 [N, D], memory-mapped
        "indptr": arr("indptr.npy"),
        "indices": arr("indices.npy"),
        "labels": np.asarray(arr("labels.npy"), dtype=np.int64),
        "n": int(manifest["num_nodes"]),
    }
    split = {s: np.asarray(arr(s + "_idx.npy"), dtype=np.int64) for s in ("train", "valid", "test")}
    return manifest, g, split


def memory():
    """This process's resident anonymous memory and peak resident set
    (/proc/self/status RssAnon, VmHWM), in bytes; -1 where unreadable."""
    out = {"rss_anon_bytes": -1, "vm_hwm_bytes": -1}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("RssAnon", "VmHWM"):
                    out["rss_anon_bytes" if k == "RssAnon" else "vm_hwm_bytes"] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def batches(sampler, g, idx, batch_size, shuffle, rng, times):
    """Yields (x, edge_index, y, batch_size); adds the seconds spent sampling
    and gathering feature rows to times["sample"] and times["gather"]."""
    order = rng.permutation(idx) if shuffle else idx
    for i in range(0, len(order), batch_size):
        t0 = time.perf_counter()
        seeds = np.asarray(order[i:i + batch_size], dtype=np.int64)
        nodes, edge_index, bs = sampler.sample(seeds)
        t1 = time.perf_counter()
        x = gather_rows(g["feats"], nodes)
        times["sample"] += t1 - t0
        times["gather"] += time.perf_counter() - t1
        times["input_rows"] += len(nodes)
        yield torch.from_numpy(x), torch.from_numpy(edge_index), torch.from_numpy(g["labels"][seeds]), bs


def pyg_batches(data, idx, fanouts, batch_size, shuffle, workers):
    from torch_geometric.loader import NeighborLoader
    for b in NeighborLoader(data, num_neighbors=fanouts, input_nodes=torch.from_numpy(idx), batch_size=batch_size,
                            shuffle=shuffle, num_workers=workers):
        yield b.x, b.edge_index, b.y[: b.batch_size], b.batch_size


def pyg_data(g):
    from torch_geometric.data import Data
    indptr = torch.from_numpy(np.asarray(g["indptr"], dtype=np.int64))
    col = torch.from_numpy(np.asarray(g["indices"], dtype=np.int64))
    row = torch.repeat_interleave(torch.arange(g["n"]), indptr[1:] - indptr[:-1])
    return Data(x=torch.from_numpy(g["feats"]), y=torch.from_numpy(g["labels"]),
                edge_index=torch.stack([col, row]), num_nodes=g["n"])


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
    ap.add_argument("--train-frac", type=float, default=1.0, help="train on this fraction of train_idx (its first nodes by a seeded shuffle)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--sampler", choices=("auto", "pyg", "script"), default="auto")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    fanouts = [int(s) for s in args.fanouts.split(",")]
    dev = torch.device(args.device)

    manifest, g, split = load(args.dir)
    import torch_geometric.typing as pt
    have_pyg = bool(getattr(pt, "WITH_PYG_LIB", False) or getattr(pt, "WITH_TORCH_SPARSE", False))
    kind = args.sampler if args.sampler != "auto" else ("pyg" if have_pyg else "script")
    if kind == "pyg" and not have_pyg:
        print("pyg_mmap: --sampler pyg needs pyg-lib or torch-sparse", file=sys.stderr)
        return 2
    model = GraphSAGE(in_channels=int(manifest["feat_dim"]), hidden_channels=args.hidden,
                      num_layers=len(fanouts), out_channels=int(manifest["num_classes"])).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    train = split["train"][g["labels"][split["train"]] >= 0]
    if args.train_frac < 1:
        train = np.sort(rng.permutation(train)[: max(1, int(len(train) * args.train_frac))])
    times = {"sample": 0.0, "gather": 0.0, "input_rows": 0}
    if kind == "pyg":
        data = pyg_data(g)
        source = lambda idx, shuffle: pyg_batches(data, idx, fanouts, args.batch_size, shuffle, args.workers)
    else:
        sampler = ScriptSampler(g, fanouts, args.seed)
        source = lambda idx, shuffle: batches(sampler, g, idx, args.batch_size, shuffle, rng, times)

    @torch.no_grad()
    def evaluate(idx):
        model.eval()
        correct = total = 0
        for x, ei, y, bs in source(idx, False):
            out = model(x.to(dev).float(), ei.to(dev))[:bs]
            correct += int((out.argmax(-1).cpu() == y).sum())
            total += bs
        return correct / max(1, total)

    print(json.dumps({"peer": "pyg+mmap", "sampler": kind, "device": str(dev),
                      "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
                      "train_nodes": int(len(train)), "torch": torch.__version__, **memory()}), flush=True)
    t_start = time.perf_counter()
    epochs = []
    for epoch in range(args.epochs):
        model.train()
        prep = comp = loss_sum = 0.0
        correct = seen = 0
        rb0 = read_bytes()
        times.update(sample=0.0, gather=0.0, input_rows=0)
        t0 = time.perf_counter()
        t_prev = t0
        for x, ei, y, bs in source(train, True):
            t1 = time.perf_counter()
            prep += t1 - t_prev  # sampling + feature gather (page cache / storage)
            x, ei, y = x.to(dev).float(), ei.to(dev), y.to(dev)
            opt.zero_grad()
            out = model(x, ei)[:bs]
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            loss_sum += float(loss.detach()) * bs  # float() waits for the device
            correct += int((out.argmax(-1) == y).sum())
            seen += bs
            t_prev = time.perf_counter()
            comp += t_prev - t1
        rec = {"epoch": epoch, "wall_s": time.perf_counter() - t0, "sample_gather_s": prep, "compute_s": comp,
               "loss": loss_sum / max(1, seen), "train_acc": correct / max(1, seen),
               "read_bytes": read_bytes() - rb0, **memory()}
        if kind == "script":  # NeighborLoader does not say which is which
            rec.update(sample_s=times["sample"], gather_s=times["gather"], input_rows=times["input_rows"])
        if epoch == args.epochs - 1:
            rec["valid_acc"] = evaluate(split["valid"])
        epochs.append(rec)
        print(json.dumps(rec), flush=True)
    summary = {"peer": "pyg+mmap", "sampler": kind, "device": str(dev), "epochs": len(epochs),
               "epoch_s": sum(e["wall_s"] for e in epochs) / max(1, len(epochs)),
               "read_bytes_per_epoch": sum(e["read_bytes"] for e in epochs) / max(1, len(epochs)),
               "final_valid_acc": epochs[-1].get("valid_acc") if epochs else None,
               "elapsed_s": time.perf_counter() - t_start}
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
