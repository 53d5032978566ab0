package importer

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// IGB layout, relative to the source directory.
const (
	igbFeat  = "paper/node_feat.npy"
	igbEdges = "paper__cites__paper/edge_index.npy"
	igbLabel = "paper/node_label_19.npy"
	igbLab2K = "paper/node_label_2K.npy"
)

// ImportNPY imports a graph in the IGB (Illinois Graph Benchmark)
// homogeneous layout from srcDir into a new dataset in outDir:
//
//	paper/node_feat.npy                  [N, D] float16/32/64 (optional)
//	paper/node_label_19.npy or _2K.npy   [N] or [N, 1], ints or floats (optional; Options.LabelFile)
//	paper__cites__paper/edge_index.npy   [E, 2] (or [2, E]) integer ids
//
// N is Options.NumNodes (--num-nodes) when set, checked against the
// arrays; else the rows of the features, else of the labels. An
// edges-only directory needs Options.NumNodes.
// Files without the .npy magic (IGB large/full) are read as raw arrays
// described by Options.Raw[RoleFeat|RoleLabel|RoleEdges]; every file's
// size must equal its header (or spec) exactly. An .npz in place of one
// of these .npy files is refused naming it (ErrLayout). IGB has no split,
// so a random split over labelled nodes is made.
func ImportNPY(srcDir, outDir string, opts *Options) (Report, error) {
	return ImportNPYContext(context.Background(), srcDir, outDir, opts)
}

// ImportNPYContext is ImportNPY, stopped by ctx: within about a second of its
// cancellation it removes its temporary files and the arrays written so
// far and returns an error wrapping ctx.Err(), with no manifest written.
func ImportNPYContext(ctx context.Context, srcDir, outDir string, opts *Options) (Report, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	// An .npz where the layout names a .npy (np.savez output) would be
	// skipped (features, labels) or reported missing: name it instead.
	check := []string{igbFeat, igbEdges}
	switch {
	case o.LabelFile != "":
		check = append(check, filepath.Join("paper", o.LabelFile))
	case !exists(filepath.Join(srcDir, igbLabel)) && !exists(filepath.Join(srcDir, igbLab2K)):
		check = append(check, igbLabel, igbLab2K)
	}
	for _, rel := range check {
		if err := npzInstead(filepath.Join(srcDir, rel)); err != nil {
			return Report{}, err
		}
	}
	labelPath := ""
	switch {
	case o.LabelFile != "":
		labelPath = filepath.Join(srcDir, "paper", o.LabelFile)
		if !exists(labelPath) {
			return Report{}, fmt.Errorf("%w: missing %s (Options.LabelFile)", ErrLayout, labelPath)
		}
	case exists(filepath.Join(srcDir, igbLabel)):
		labelPath = filepath.Join(srcDir, igbLabel)
	case exists(filepath.Join(srcDir, igbLab2K)):
		labelPath = filepath.Join(srcDir, igbLab2K)
	}
	source := "igb:" + absPath(srcDir)
	return run(ctx, outDir, filepath.Base(filepath.Clean(srcDir)), source, opts, false, func(j *job) error {
		var feat, label *npyStream
		defer func() {
			if feat != nil {
				feat.Close()
			}
			if label != nil {
				label.Close()
			}
		}()
		if p := filepath.Join(srcDir, igbFeat); exists(p) {
			s, size, err := openNPYFile(p, RoleFeat, rawSpec(j, RoleFeat))
			if err != nil {
				return err
			}
			feat = s
			j.addBytesIn(size)
		}
		if labelPath != "" {
			s, size, err := openNPYFile(labelPath, RoleLabel, rawSpec(j, RoleLabel))
			if err != nil {
				return err
			}
			label = s
			j.addBytesIn(size)
		}
		n, from := j.o.NumNodes, ""
		if n > 0 {
			from = "--num-nodes (Options.NumNodes)"
		}
		for _, s := range []*npyStream{feat, label} {
			if s == nil || len(s.h.Shape) == 0 {
				continue
			}
			rows := s.h.Shape[0]
			if n > 0 && rows != n {
				return fileErr(s.name, "%d rows, want %d (N from %s)", rows, n, from)
			}
			if from == "" {
				n, from = rows, "the rows of "+s.name
			}
		}
		if feat == nil && label == nil && n == 0 {
			return fmt.Errorf("%w: %s has neither %s nor labels to count the nodes: pass --num-nodes (Options.NumNodes)", ErrLayout, srcDir, igbFeat)
		}
		j.setNumNodes(n, from)
		if err := j.npyEdges(filepath.Join(srcDir, igbEdges)); err != nil {
			return err
		}
		if err := j.writeCSR(); err != nil {
			return err
		}
		if feat != nil {
			if err := j.copyNPYFeatures(feat); err != nil {
				return err
			}
		}
		if label != nil {
			if err := j.copyNPYLabels(label); err != nil {
				return err
			}
		}
		return j.randomSplit()
	})
}

func rawSpec(j *job, role string) *RawSpec {
	if s, ok := j.o.Raw[role]; ok {
		return &s
	}
	return nil
}

// npyEdges streams an edge array of shape [E, 2] (rows of src, dst) or
// [2, E] (a row of sources, then a row of destinations) into the sorter.
func (j *job) npyEdges(path string) error {
	s, size, err := openNPYFile(path, RoleEdges, rawSpec(j, RoleEdges))
	if err != nil {
		return err
	}
	defer s.Close()
	j.addBytesIn(size)
	sh := s.h.Shape
	if len(sh) == 2 && sh[0] == 2 && sh[1] == 2 {
		// Two edges as [E, 2] or as PyG's [2, E]: the shape cannot tell.
		j.o.Logger.Warn("the edge array is 2×2, read as [E, 2]: each row an edge (src, dst); a [2, E] array of two edges (row 0 sources) must be saved as [E, 2]",
			"file", path)
	}
	switch {
	case len(sh) == 2 && sh[1] == 2: // [E, 2], also when E is 2
		if s.h.Fortran { // np.save of a [2, E]'s transpose: E sources, then E destinations
			return j.addEdgeHalves(s, sh[0])
		}
		return j.addEdgeRows(s)
	case len(sh) == 2 && sh[0] == 2: // [2, E]
		if s.h.Fortran { // np.save of an [E, 2]'s transpose: (src, dst) pairs
			return j.addEdgeRows(s)
		}
		return j.addEdgeHalves(s, sh[1])
	}
	return fileErr(path, "shape %v, want [num_edges, 2] or [2, num_edges]", sh)
}

// addEdgeHalves streams an edge array file whose data is numE sources
// followed by numE destinations (a C-order [2, E]), reading both halves in
// step with a second stream.
func (j *job) addEdgeHalves(s *npyStream, numE int64) error {
	s.end = numE
	dst, err := reopenAt(s, numE)
	if err != nil {
		return err
	}
	defer dst.Close()
	return j.addEdgePairs(s, dst, numE)
}

// addEdgeRows streams an edge array whose data is (src, dst) pairs (a
// C-order [E, 2], or a Fortran-order [2, E]) into the sorter. Errors name
// the element index of the offending id.
func (j *job) addEdgeRows(s *npyStream) error {
	buf := make([]int64, 1<<16)
	for {
		start := s.pos
		n, err := s.int64s(buf)
		if err != nil {
			return err
		}
		if n == 0 {
			return s.drain()
		}
		for i := 0; i < n; i += 2 {
			if msg := j.idMsg("source", buf[i]); msg != "" {
				return elemErr(s.name, start+int64(i), "edge %d: %s", (start+int64(i))/2, msg)
			}
			if msg := j.idMsg("destination", buf[i+1]); msg != "" {
				return elemErr(s.name, start+int64(i)+1, "edge %d: %s", (start+int64(i))/2, msg)
			}
			if err := j.addEdge(buf[i], buf[i+1]); err != nil {
				return err
			}
		}
	}
}

// npzInstead is an ErrLayout error when the .npy at path is missing and
// an .npz of the same name is there: the import would have gone on
// without the features or labels it holds.
func npzInstead(path string) error {
	if exists(path) {
		return nil
	}
	npz := strings.TrimSuffix(path, ".npy") + ".npz"
	if !exists(npz) {
		return nil
	}
	return fmt.Errorf("%w: %s is missing but %s is there: import npy reads .npy arrays; save the array with np.save(%q, np.load(npz)[name])",
		ErrLayout, path, npz, filepath.Base(path))
}
