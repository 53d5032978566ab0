package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/interop/graphbolt"
)

// ImportGraphBolt imports a DGL GraphBolt on-disk dataset: the directory
// srcDir with a metadata.yaml whose graph section is raw (one node count
// and one numpy (2, E) edge array), as package graphbolt writes it and as
// dgl.graphbolt.OnDiskDataset reads it (docs/format.md, "GraphBolt
// export"). Every edge src→dst is stored in dst's neighbour list, the
// inverse of graphbolt.Export, so importing an export gives the dataset
// back. Node features "feat" and "label" become features.npy and
// labels.npy; without a "label" feature, labels come from the first
// task's sets (nodes in no set are unlabelled). Without a task, a
// labelled dataset gets a random split (Options.SplitFrac, Options.Seed)
// as in the other formats; a task without sets means no split. With both, each set label
// must equal the feature's label of its seed, or the import fails with an
// error matching ErrLabelConflict. The first task's seeds
// become the splits, and its num_classes the number of classes unless
// Options.NumClasses is set. Features keep their stored dtype unless
// Options.FeatDType is set.
//
// Unlike the other importers, the edges are kept as given by default:
// callers that want symmetrising, or self loops and duplicates dropped,
// set Options accordingly (the command line's defaults for this format
// keep everything). With Options.KeepDuplicates each neighbour list keeps
// the order of the edge array (a stable sort by destination), so an
// export of a dataset whose lists are not sorted, such as a relabelled
// copy, comes back byte-identical and samples the same neighbours;
// without it, lists are sorted ascending as in the other formats.
func ImportGraphBolt(srcDir, outDir string, opts *Options) (Report, error) {
	return ImportGraphBoltContext(context.Background(), srcDir, outDir, opts)
}

// ImportGraphBoltContext is ImportGraphBolt, stopped by ctx: on
// cancellation it removes what it wrote and returns ctx's error.
func ImportGraphBoltContext(ctx context.Context, srcDir, outDir string, opts *Options) (Report, error) {
	mpath := filepath.Join(srcDir, graphbolt.MetadataName)
	b, err := os.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return Report{}, fmt.Errorf("%w: %s not found (is %s a GraphBolt dataset directory?)", ErrLayout, mpath, srcDir)
	}
	if err != nil {
		return Report{}, fmt.Errorf("importer: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 { // C2: yaml says only "EOF"
		return Report{}, fileErr(mpath, "the file is empty: want a GraphBolt metadata.yaml with graph, feature_data and tasks")
	}
	l, err := graphbolt.ParseMetadata(b, mpath)
	if err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	name := l.Name
	if name == "" {
		name = baseName(srcDir)
	}
	keepDType := opts == nil || opts.FeatDType == ""
	return run(ctx, outDir, name, "graphbolt:"+absPath(srcDir), opts, true, func(j *job) error {
		j.addBytesIn(int64(len(b)))
		for _, s := range l.Ignored {
			j.o.Logger.Warn("graphbolt: not imported", "what", s)
		}
		j.setNumNodes(l.NumNodes, mpath+" graph.nodes[0].num")
		j.gbTask = l.TaskName
		if err := j.graphBoltEdges(srcDir, l); err != nil {
			return err
		}
		if l.FeatPath != "" {
			s, size, err := openNPYFile(filepath.Join(srcDir, l.FeatPath), RoleFeat, nil)
			if err != nil {
				return err
			}
			defer s.Close()
			j.addBytesIn(size)
			if keepDType && s.h.DType == npy.Float16 {
				j.o.FeatDType, j.rep.FeatDType = "float16", "float16"
			}
			if err := j.copyNPYFeatures(s); err != nil {
				return err
			}
		}
		if j.o.NumClasses == 0 && l.NumClasses > 0 {
			j.o.NumClasses, j.labelLimit = l.NumClasses, l.NumClasses
		}
		var setLabels *extsort.Sorter
		if l.LabelPath == "" {
			for _, s := range l.Sets {
				if s.Labels != "" && setLabels == nil {
					if setLabels, err = extsort.New(&extsort.Options{TempDir: j.tmp, MemBytes: j.setLabelMem()}); err != nil {
						return fmt.Errorf("importer: %w", err)
					}
					defer setLabels.Close()
				}
			}
		}
		if err := j.checkTableMem(j.numNodes); err != nil {
			return err
		}
		// The label feature is copied first, so that the sets' labels
		// can be checked against it (I4).
		var feat *labelLookup
		if l.LabelPath != "" {
			s, size, err := openNPYFile(filepath.Join(srcDir, l.LabelPath), RoleLabel, nil)
			if err != nil {
				return err
			}
			defer s.Close()
			j.addBytesIn(size)
			if err := j.copyNPYLabels(s); err != nil {
				return err
			}
			if feat, err = openLabelLookup(s); err != nil {
				return err
			}
			defer feat.close()
		}
		c := j.newSplitChecker()
		sets := 0
		for k, s := range l.Sets {
			if s.Seeds == "" {
				continue
			}
			if err := j.graphBoltSet(srcDir, k, s, c, setLabels, feat); err != nil {
				return err
			}
			sets++
		}
		if setLabels != nil {
			return j.labelsFromSets(setLabels)
		}
		if l.TaskName == "" {
			// No task: a seeded random split over the labelled nodes,
			// as the other formats make (I13). A task without sets
			// (an export of a dataset without a split) says there is
			// none, and keeps the round trip exact.
			return j.randomSplit()
		}
		if sets == 0 {
			return nil
		}
		j.rep.Split = "task " + l.TaskName // C1: the text report's split line
		return nil
	})
}

// labelLookup reads single labels of a checked label array (one per
// node) by node id, through one cached block: seeds usually ascend.
type labelLookup struct {
	f     *os.File
	name  string
	h     npy.Header
	block []byte
	first int64 // element index of block[0], -1 when empty
	count int64 // elements in block
}

const labelLookupBlock = 64 << 10

func openLabelLookup(s *npyStream) (*labelLookup, error) {
	f, _, err := openFile(s.name)
	if err != nil {
		return nil, err
	}
	return &labelLookup{f: f, name: s.name, h: s.h, first: -1}, nil
}

func (l *labelLookup) close() { _ = l.f.Close() }

// at returns node v's label as the label writer reads it: -1 for NaN and
// -1 (unlabelled), else the class.
func (l *labelLookup) at(v int64) (float64, error) {
	sz := int64(l.h.DType.Size())
	if v < l.first || v >= l.first+l.count {
		per := max(1, labelLookupBlock/sz)
		l.first = v / per * per
		l.count = min(per, l.h.Len()-l.first)
		if int64(cap(l.block)) < l.count*sz {
			l.block = make([]byte, per*sz)
		}
		l.block = l.block[:l.count*sz]
		if _, err := l.f.ReadAt(l.block, l.h.DataOffset+l.first*sz); err != nil {
			l.first, l.count = -1, 0
			return 0, elemErr(l.name, v, "read error: %v", err)
		}
	}
	s := &npyStream{name: l.name, r: bytes.NewReader(l.block[(v-l.first)*sz : (v-l.first+1)*sz]), h: l.h, pos: v, end: v + 1}
	var x [1]float64
	if _, err := s.float64s(x[:]); err != nil {
		return 0, err
	}
	if math.IsNaN(x[0]) {
		return -1, nil
	}
	return x[0], nil
}

// graphBoltEdges reads the (2, E) edge array and writes the CSR.
func (j *job) graphBoltEdges(srcDir string, l *graphbolt.Layout) error {
	path := filepath.Join(srcDir, l.EdgesPath)
	if l.EdgesFormat != "numpy" {
		return fileErr(path, "edge format %q: only numpy (2, E) edge arrays are imported", l.EdgesFormat)
	}
	src, size, err := openNPYFile(path, RoleEdges, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	j.addBytesIn(size)
	if len(src.h.Shape) != 2 || src.h.Shape[0] != 2 {
		return fileErr(path, "shape %v, want (2, num_edges): row 0 sources, row 1 destinations", src.h.Shape)
	}
	if src.h.Fortran { // a Fortran-order (2, E), np.save of an [E, 2]'s transpose: (src, dst) pairs
		if err := j.addEdgeRows(src); err != nil {
			return err
		}
		return j.writeCSR()
	}
	numE := src.h.Shape[1]
	src.end = numE
	dst, err := reopenAt(src, numE)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := j.addEdgePairs(src, dst, numE); err != nil {
		return err
	}
	return j.writeCSR()
}

// graphBoltSet reads set k's seeds (checked against N and the other sets)
// and writes them as split k. The set's labels, when given, must be one
// per seed; they are queued in labels (seed, class) unless labels is nil,
// and must agree with the label feature feat when it is given (a
// disagreement is an error matching ErrLabelConflict).
func (j *job) graphBoltSet(srcDir string, k int, s graphbolt.SetLayout, c *splitChecker, labels *extsort.Sorter, feat *labelLookup) error {
	ss, size, err := openNPYFile(filepath.Join(srcDir, s.Seeds), "seeds", nil)
	if err != nil {
		return err
	}
	defer ss.Close()
	j.addBytesIn(size)
	if len(ss.h.Shape) != 1 && !(len(ss.h.Shape) == 2 && ss.h.Shape[1] == 1) {
		return fileErr(ss.name, "shape %v, want (num_seeds,): only the first task (%q) is read, and its sets must be node seeds (node classification)",
			ss.h.Shape, j.gbTask)
	}
	count := ss.h.Shape[0]
	var ls *npyStream
	if s.Labels != "" {
		if ls, size, err = openNPYFile(filepath.Join(srcDir, s.Labels), RoleLabel, nil); err != nil {
			return err
		}
		defer ls.Close()
		j.addBytesIn(size)
		if ls.h.Len() != count || len(ls.h.Shape) > 2 {
			return fileErr(ls.name, "shape %v: %d labels for %d seeds in %s, want one per seed", ls.h.Shape, ls.h.Len(), count, ss.name)
		}
	}
	ids := make([]int64, 0, count)
	buf := make([]int64, 1<<14)
	lbuf := make([]float64, 1<<14)
	batch := make([]extsort.Edge, 0, 1<<14)
	for int64(len(ids)) < count {
		start := ss.pos
		n, err := ss.int64s(buf)
		if err != nil {
			return err
		}
		for i, v := range buf[:n] {
			if msg := c.add(v, k); msg != "" {
				return elemErr(ss.name, start+int64(i), "seed: %s", msg)
			}
		}
		ids = append(ids, buf[:n]...)
		if ls == nil {
			continue
		}
		lstart := ls.pos
		if m, err := ls.float64s(lbuf[:n]); err != nil {
			return err
		} else if m != n {
			return elemErr(ls.name, lstart+int64(m), "truncated")
		}
		batch = batch[:0]
		for i, x := range lbuf[:n] {
			if feat != nil {
				y, err := feat.at(buf[i])
				if err != nil {
					return err
				}
				if x != y && !(math.IsNaN(x) && y == -1) {
					return &FormatError{File: ls.name, Index: lstart + int64(i), Kind: ErrLabelConflict,
						Msg: fmt.Sprintf("label %v of seed %d, but %s says %v (-1: unlabelled): the task's labels and the label feature must agree",
							x, buf[i], feat.name, y)}
				}
			}
			switch {
			case x == -1:
				continue
			case x != float64(int64(x)) || x < 0 || x >= float64(j.labelLimit):
				if j.o.NumClasses == 0 {
					return elemErr(ls.name, lstart+int64(i), "label %v of seed %d: want an integer class >= 0 (below 2^31-1) or -1", x, buf[i])
				}
				return elemErr(ls.name, lstart+int64(i), "label %v of seed %d: want an integer class in [0, %d) or -1", x, buf[i], j.labelLimit)
			}
			batch = append(batch, extsort.Edge{Src: buf[i], Dst: int64(x)})
		}
		if labels != nil {
			if err := labels.AddBatch(batch); err != nil {
				return fmt.Errorf("importer: sorting set labels: %w", err)
			}
		}
	}
	if err := ss.drain(); err != nil {
		return err
	}
	return j.writeSplit(k, ids)
}

// labelsFromSets writes labels.npy from the sets' (seed, class) pairs:
// nodes in no set are unlabelled.
func (j *job) labelsFromSets(s *extsort.Sorter) error {
	it, err := s.Sort()
	if err != nil {
		return fmt.Errorf("importer: sorting set labels: %w", err)
	}
	lw, err := j.startLabels()
	if err != nil {
		return err
	}
	next := int64(0)
	fill := func(upto int64) error {
		for ; next < upto; next++ {
			lw.add(-1)
			if err := lw.flush(false); err != nil {
				return err
			}
		}
		return nil
	}
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if err := fill(e.Src); err != nil {
			return err
		}
		if msg := lw.add(float64(e.Dst)); msg != "" {
			return fmt.Errorf("importer: internal error: %s", msg)
		}
		if err := lw.flush(false); err != nil {
			return err
		}
		next++
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("importer: sorting set labels: %w", err)
	}
	if err := fill(j.numNodes); err != nil {
		return err
	}
	return lw.commit("task sets")
}

// setLabelMem is the budget of the set labels' sorter: the sorter's share
// less the split checker's two bits per node, which it runs beside.
func (j *job) setLabelMem() int64 {
	return max(j.sortMem()-(j.numNodes+3)/4, extsort.MinMemBytes)
}
