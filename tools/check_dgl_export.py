#!/usr/bin/env python3
"""Check an ssdgnn export with DGL (docs/dgl.md).

usage: check_dgl_export.py graphbolt DIR | distdgl DIR

graphbolt: opens DIR with dgl.graphbolt.OnDiskDataset(DIR).load() and checks
the node, edge and set counts against metadata.yaml.
distdgl: parses metadata.json, every chunk and the partition assignment and
checks counts and ranges (needs numpy; DGL is imported only to prove it is
installed, since dispatch itself needs a cluster).

When DGL (or numpy) is not importable it prints a skip message and exits 0.
Not part of `make test`.
"""
import json
import os
import sys


def skip(why):
    print(f"SKIP: {why}; nothing checked")
    sys.exit(0)


def check_graphbolt(path):
    try:
        import dgl.graphbolt as gb
        import numpy as np
        import yaml
    except Exception as e:  # ImportError, or DGL failing to load its library
        skip(f"DGL GraphBolt not importable ({e})")
    with open(os.path.join(path, "metadata.yaml")) as f:
        meta = yaml.safe_load(f)
    n = meta["graph"]["nodes"][0]["num"]
    e = np.load(os.path.join(path, meta["graph"]["edges"][0]["path"]), mmap_mode="r").shape[1]
    ds = gb.OnDiskDataset(path).load()
    g = ds.graph
    assert g.total_num_nodes == n, (g.total_num_nodes, n)
    assert g.total_num_edges == e, (g.total_num_edges, e)
    for task in ds.tasks:
        for name, s in (("train", task.train_set), ("validation", task.validation_set), ("test", task.test_set)):
            if s is not None:
                print(f"  {task.metadata.get('name')} {name}: {len(s)} items")
    if "feat" in [k[2] for k in ds.feature.keys()]:
        print("  feat:", tuple(ds.feature.size("node", None, "feat")))
    print(f"OK graphbolt: {n} nodes, {e} edges")


def check_distdgl(path):
    try:
        import numpy as np
    except ImportError as e:
        skip(f"numpy not importable ({e})")
    try:
        import dgl  # noqa: F401
    except Exception as e:
        skip(f"DGL not importable ({e})")
    with open(os.path.join(path, "metadata.json")) as f:
        meta = json.load(f)
    assert meta["node_type"] == ["_N"] and meta["edge_type"] == ["_N:_E:_N"], meta
    n = sum(meta["num_nodes_per_chunk"][0])
    et = meta["edges"]["_N:_E:_N"]
    assert et["format"] == {"name": "csv", "delimiter": " "}, et["format"]
    e = 0
    for c, p in enumerate(et["data"]):
        a = np.loadtxt(os.path.join(path, p), dtype=np.int64, ndmin=2)
        rows = a.shape[0] if a.size else 0
        assert rows == meta["num_edges_per_chunk"][0][c], (p, rows)
        assert rows == 0 or (a.min() >= 0 and a.max() < n), p
        e += rows
    for name, spec in meta["node_data"]["_N"].items():
        total = 0
        for c, p in enumerate(spec["data"]):
            a = np.load(os.path.join(path, p), mmap_mode="r")
            assert a.shape[0] == meta["num_nodes_per_chunk"][0][c], (p, a.shape)
            total += a.shape[0]
        assert total == n, (name, total, n)
    with open(os.path.join(path, "partitions", "partition_meta.json")) as f:
        pm = json.load(f)
    assert pm["version"] == "1.0.0" and pm["algo_name"] in ("random", "metis"), pm
    parts = np.loadtxt(os.path.join(path, "partitions", "_N.txt"), dtype=np.int64, ndmin=1)
    assert parts.shape[0] == n and parts.min() >= 0 and parts.max() < pm["num_parts"]
    print(f"OK distdgl: {n} nodes, {e} edges, {len(et['data'])} chunks, {pm['num_parts']} parts")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("graphbolt", "distdgl"):
        print(__doc__)
        sys.exit(2)
    (check_graphbolt if sys.argv[1] == "graphbolt" else check_distdgl)(sys.argv[2])
