// Package graphbolt writes an ssdgnn dataset as a DGL GraphBolt on-disk
// dataset (the directory dgl.graphbolt.OnDiskDataset opens) and parses and
// checks GraphBolt's metadata.yaml, which package importer uses to read
// such a directory back. The layout, and the DGL version it was written
// to (2.5), are specified in docs/format.md ("GraphBolt export").
//
// A partition-major copy (partition.Relabel) is exported in its own ids,
// with node feature "orig_id" mapping each node to the original dataset's
// id (orig_ids.npy, linked or copied as features are).
//
// # Edge direction
//
// ssdgnn aggregates at node v over indices[indptr[v]:indptr[v+1]]. DGL
// aggregates at an edge's destination over its in-edges, and GraphBolt
// builds a CSC (per destination, its sources) from the edge list. So every
// stored neighbour u of v is exported as the edge u→v (src u, dst v), and
// GraphBolt's CSC of the export equals ssdgnn's CSR. A symmetrised dataset
// (the importers' default) holds both directions, so this only matters
// for directed ones.
//
// # Memory
//
// Export streams every array with fixed buffers sized from
// Options.MemBytes, the budget of the whole export (the CSR is read with pread, not mapped), so its
// resident memory does not grow with the graph. features.npy is hard
// linked when the output is on the same file system (the export then
// shares the inode: writing to one changes the other; ssdgnn itself only
// ever replaces files by rename, which leaves the link intact), else
// copied.
//
// # Atomicity
//
// Every file is written under a temporary name, fsynced and renamed;
// metadata.yaml is written last, so a directory without it is not an
// export. Overwriting needs Options.Force and removes metadata.yaml
// first, then the directories an export owns (edges/, node_data/, set/,
// and GraphBolt's own preprocessed/, which would be stale).
package graphbolt
