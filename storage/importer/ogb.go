package importer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
)

// ImportOGB imports an OGB node-property dataset from its raw layout in
// srcDir into a new dataset in outDir.
//
// The text form is raw/edge.csv.gz, raw/num-node-list.csv.gz and,
// optionally, raw/num-edge-list.csv.gz (checked against the edge count),
// raw/node-feat.csv.gz, raw/node-label.csv.gz and
// split/<name>/{train,valid,test}.csv.gz. Each .csv.gz may also be a plain
// .csv. The binary form of ogbn-papers100M is recognised by raw/data.npz
// (members edge_index.npy [2, E], num_nodes_list.npy and optionally
// node_feat.npy [N, D]) with labels in raw/node-label.npz (member
// node_label.npy, [N] or [N, 1], NaN = unlabelled) or raw/node-label.csv.gz.
// Only homogeneous graphs (one entry in the node-count list) are accepted.
// Without a split directory a random split over labelled nodes is made.
func ImportOGB(srcDir, outDir string, opts *Options) (Report, error) {
	return ImportOGBContext(context.Background(), srcDir, outDir, opts)
}

// ImportOGBContext is ImportOGB, stopped by ctx: within about a second of its
// cancellation it removes its temporary files and the arrays written so
// far and returns an error wrapping ctx.Err(), with no manifest written.
func ImportOGBContext(ctx context.Context, srcDir, outDir string, opts *Options) (Report, error) {
	split, splitDir, err := chooseSplit(srcDir, opts)
	if err != nil {
		return Report{}, err
	}
	source := "ogb:" + absPath(srcDir)
	if split != "" {
		source += " split=" + split
	}
	raw := filepath.Join(srcDir, "raw")
	return run(ctx, outDir, filepath.Base(filepath.Clean(srcDir)), source, opts, false, func(j *job) error {
		if exists(filepath.Join(raw, "data.npz")) {
			if err := j.ogbBinary(raw); err != nil {
				return err
			}
		} else if err := j.ogbText(raw); err != nil {
			return err
		}
		if splitDir == "" {
			return j.randomSplit()
		}
		j.rep.Split = split
		if err := j.checkTableMem(j.numNodes); err != nil {
			return err
		}
		c := j.newSplitChecker()
		for k, name := range splitLabels {
			path, err := findText(splitDir, name)
			if err != nil {
				return err
			}
			ids, err := j.readTextSplit(path, k, c)
			if err != nil {
				return err
			}
			if err := j.writeSplit(k, ids); err != nil {
				return err
			}
		}
		return nil
	})
}

// ogbText reads the gzip CSV form.
func (j *job) ogbText(raw string) error {
	path, err := findText(raw, "num-node-list")
	if err != nil {
		return err
	}
	counts, err := j.readTextInts(path)
	if err != nil {
		return err
	}
	if len(counts) != 1 || counts[0] < 0 {
		return fileErr(path, "got %d node counts %v, want one non-negative count (heterogeneous graphs are not supported)", len(counts), head(counts))
	}
	j.setNumNodes(counts[0], path)

	edgePath, err := findText(raw, "edge")
	if err != nil {
		return err
	}
	read, err := j.readTextEdges(edgePath, nil)
	if err != nil {
		return err
	}
	if path, err := findText(raw, "num-edge-list"); err == nil {
		counts, err := j.readTextInts(path)
		if err != nil {
			return err
		}
		if len(counts) != 1 || counts[0] != read {
			return fileErr(path, "edge counts %v, but %s has %d edges", head(counts), edgePath, read)
		}
	}
	if err := j.writeCSR(); err != nil {
		return err
	}
	if path, err := findText(raw, "node-feat"); err == nil {
		if err := j.copyTextFeatures(path); err != nil {
			return err
		}
	}
	if path, err := findText(raw, "node-label"); err == nil {
		if err := j.copyTextLabels(path); err != nil {
			return err
		}
	}
	return nil
}

// npzEdges is data.npz's edge array member.
const npzEdges = "edge_index.npy"

// ogbBinary reads the npz form of ogbn-papers100M.
func (j *job) ogbBinary(raw string) error {
	zpath := filepath.Join(raw, "data.npz")
	z, err := openNPZ(zpath)
	if err != nil {
		return err
	}
	defer z.Close()
	j.addBytesIn(z.size)

	ns, err := z.open("num_nodes_list.npy")
	if err != nil {
		return err
	}
	counts := make([]int64, 2)
	n, err := ns.int64s(counts)
	ns.Close()
	if err != nil {
		return err
	}
	if n != 1 || counts[0] < 0 {
		return fileErr(ns.name, "shape %v, want a single non-negative node count (heterogeneous graphs are not supported)", ns.h.Shape)
	}
	j.setNumNodes(counts[0], ns.name)

	src, err := z.open(npzEdges)
	if err != nil {
		return err
	}
	defer src.Close()
	if len(src.h.Shape) != 2 || src.h.Shape[0] != 2 {
		return fileErr(src.name, "shape %v, want [2, num_edges]", src.h.Shape)
	}
	if src.h.Fortran { // a Fortran-order [2, E] holds (src, dst) pairs
		if err := j.addEdgeRows(src); err != nil {
			return err
		}
		return j.ogbBinaryRest(raw, z)
	}
	numE := src.h.Shape[1]
	src.end = numE
	dst, err := z.openAt(npzEdges, numE)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := j.addEdgePairs(src, dst, numE); err != nil {
		return err
	}
	return j.ogbBinaryRest(raw, z)
}

// ogbBinaryRest writes the CSR of the edges read, then copies data.npz's
// features and the labels.
func (j *job) ogbBinaryRest(raw string, z *npzArchive) error {
	if err := j.writeCSR(); err != nil {
		return err
	}

	if z.has("node_feat.npy") {
		fs, err := z.open("node_feat.npy")
		if err != nil {
			return err
		}
		err = j.copyNPYFeatures(fs)
		fs.Close()
		if err != nil {
			return err
		}
	}

	lpath := filepath.Join(raw, "node-label.npz")
	if exists(lpath) {
		lz, err := openNPZ(lpath)
		if err != nil {
			return err
		}
		defer lz.Close()
		j.addBytesIn(lz.size)
		ls, err := lz.open("node_label.npy")
		if err != nil {
			return err
		}
		defer ls.Close()
		return j.copyNPYLabels(ls)
	}
	if path, err := findText(raw, "node-label"); err == nil {
		return j.copyTextLabels(path)
	}
	return nil
}

// addEdgePairs reads numE sources from src and numE destinations from dst
// in step. Errors name the element index of the offending id. Edge
// src→dst goes to dst's neighbour list (addEdge).
func (j *job) addEdgePairs(src, dst *npyStream, numE int64) error {
	const chunk = 1 << 15
	sb := make([]int64, chunk)
	db := make([]int64, chunk)
	for done := int64(0); done < numE; {
		want := int(min(chunk, numE-done))
		sStart, dStart := src.pos, dst.pos
		ns, err := src.int64s(sb[:want])
		if err != nil {
			return err
		}
		nd, err := dst.int64s(db[:want])
		if err != nil {
			return err
		}
		if ns != want || nd != want {
			return elemErr(src.name, done, "internal error: short read of edge ids")
		}
		for i := range want {
			s, d := sb[i], db[i]
			if msg := j.idMsg("source", s); msg != "" {
				return elemErr(src.name, sStart+int64(i), "edge %d: %s", done+int64(i), msg)
			}
			if msg := j.idMsg("destination", d); msg != "" {
				return elemErr(dst.name, dStart+int64(i), "edge %d: %s", done+int64(i), msg)
			}
			if err := j.addEdge(s, d); err != nil {
				return err
			}
		}
		done += int64(want)
	}
	return dst.drain()
}

// chooseSplit picks the split directory: Options.Split, or the only one.
// It returns "" when srcDir has no split directory.
func chooseSplit(srcDir string, opts *Options) (name, dir string, err error) {
	want := ""
	if opts != nil {
		want = opts.Split
	}
	root := filepath.Join(srcDir, "split")
	ents, err := os.ReadDir(root)
	if err != nil {
		if os.IsNotExist(err) {
			if want != "" {
				return "", "", opterr.Errorf(ErrInvalidOptions, "%s %q: %s has no split directory", opterr.Field("Split"), want, srcDir)
			}
			return "", "", nil
		}
		return "", "", fmt.Errorf("importer: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	switch {
	case want != "":
		if !slices.Contains(names, want) {
			return "", "", opterr.Errorf(ErrInvalidOptions, "%s %q not found in %s; choices: %s", opterr.Field("Split"), want, root, strings.Join(names, ", "))
		}
		return want, filepath.Join(root, want), nil
	case len(names) == 0:
		return "", "", nil
	case len(names) == 1:
		return names[0], filepath.Join(root, names[0]), nil
	}
	return "", "", opterr.Errorf(ErrInvalidOptions, "%s holds several splits; choose one with %s: %s", root, opterr.Field("Split"), strings.Join(names, ", "))
}

// findText returns dir/base.csv.gz, or dir/base.csv when only that exists.
func findText(dir, base string) (string, error) {
	gz := filepath.Join(dir, base+".csv.gz")
	if exists(gz) {
		return gz, nil
	}
	plain := filepath.Join(dir, base+".csv")
	if exists(plain) {
		return plain, nil
	}
	return "", fmt.Errorf("%w: missing %s", ErrLayout, gz)
}

func head(v []int64) []int64 {
	if len(v) > 4 {
		return v[:4]
	}
	return v
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
