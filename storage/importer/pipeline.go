package importer

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// job is one import in progress: the pipeline the three formats share.
// Its methods are called in order: edges (addEdge… then writeCSR),
// features, labels, splits, finish. cleanup always runs.
type job struct {
	ctx    context.Context // checked at chunk granularity
	o      Options
	start  time.Time
	outDir string
	b      *storage.Builder
	tmp    string
	open   []*storage.ArrayWriter // every writer created; aborted on failure
	csr    *storage.CSRWriter     // the graph's writer once created; aborted on failure
	names  []string               // file names of open and csr
	rep    Report

	numNodes     int64  // -1 until known
	numNodesFrom string // where numNodes came from, for errors (I15)
	gbTask       string // GraphBolt: the task read, for errors

	// edges
	sorter  *extsort.Sorter
	batch   []extsort.Edge
	maxID   int64
	edgeBar progress.Task

	// features
	featDim int64
	featBar progress.Task // open feature progress task, or nil

	// labels
	labelled   bitset // nil without labels
	numLabels  int64
	maxLabel   int64
	maxLabelAt int64 // the node whose label is maxLabel (first)
	labelLimit int64
}

// begin validates opts and creates the output directory. With byRow (a
// GraphBolt import that keeps duplicates) each neighbour list keeps the
// order of the source's edges instead of being sorted (extsort ByRow).
func begin(outDir, name, source string, opts *Options, byRow bool) (*job, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	j := &job{o: opts.withDefaults(), start: time.Now(), outDir: outDir, numNodes: -1, maxID: -1, maxLabel: -1}
	if j.o.Name == "" {
		j.o.Name = name
	}
	j.rep = Report{Name: j.o.Name, Source: source, OutDir: outDir, FeatDType: j.o.FeatDType, Symmetrized: !j.o.Directed}
	j.labelLimit = math.MaxInt32
	if j.o.NumClasses > 0 {
		j.labelLimit = j.o.NumClasses
	}
	b, err := storage.Create(outDir, &storage.CreateOptions{Force: j.o.Force})
	if err != nil {
		return nil, err
	}
	j.b = b
	base := j.o.TempDir
	if base == "" {
		// Beside the arrays: a replacement's staging directory, so that
		// a killed import --force leaves its sort runs where the next
		// Create in outDir removes them with the rest.
		base = b.Dir()
	}
	cleanStaleTemps(base, j.o.Logger)
	j.tmp, err = os.MkdirTemp(base, tempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("importer: temp dir: %w", err)
	}
	j.sorter, err = extsort.New(&extsort.Options{TempDir: j.tmp, MemBytes: j.sortMem(), Dedup: !j.o.KeepDuplicates,
		ByRow: byRow && j.o.KeepDuplicates})
	if err != nil {
		j.cleanup()
		return nil, fmt.Errorf("importer: %w", err)
	}
	j.batch = make([]extsort.Edge, 0, 4096)
	j.edgeBar = j.o.Progress.Start("edges", 0, progress.Items)
	j.o.Logger.Info("import started", "name", j.o.Name, "source", source, "out", outDir, "mem_bytes", j.o.MemBytes)
	return j, nil
}

// sortMem is the edge sorter's budget: MemBytes less the reserve.
func (j *job) sortMem() int64 { return j.o.MemBytes - ReserveBytes }

// checkTableMem refuses N whose per-node tables (one bit a node for the
// labelled set, two for split membership) would not fit in the sorter's
// share of the budget, which they take over after the sort. It is called
// before the first of them is made.
func (j *job) checkTableMem(n int64) error {
	need := (n+63)/64*8 + (n+3)/4
	if need <= j.sortMem() {
		return nil
	}
	return fmt.Errorf("%w: %d nodes need %d bytes (%d MiB) of per-node tables after the sort, more than the %d bytes MemBytes leaves beside ReserveBytes; raise --mem (Options.MemBytes) to at least %d",
		ErrInvalidOptions, n, need, (need+1<<20-1)>>20, j.sortMem(), need+ReserveBytes)
}

// cleanup aborts every uncommitted array and removes the temp dir. It is
// safe after finish.
func (j *job) cleanup() {
	j.abortWriters()
	j.open = nil
	if j.sorter != nil {
		_ = j.sorter.Close()
	}
	for _, t := range []*progress.Task{&j.edgeBar, &j.featBar} {
		if *t != nil {
			(*t).Done()
			*t = nil
		}
	}
	if j.tmp != "" {
		_ = os.RemoveAll(j.tmp)
	}
}

// removeArrays aborts the arrays of a failed import and removes those
// already committed, so that a failed import leaves neither a manifest nor
// stale arrays.
func (j *job) removeArrays() {
	j.abortWriters()
	if j.b.Replacing() {
		j.b.Abort() // the staging directory: the old dataset stays as it was
		return
	}
	for _, name := range j.names {
		_ = os.Remove(filepath.Join(j.outDir, name))
	}
}

// abortWriters discards every uncommitted array.
func (j *job) abortWriters() {
	for _, w := range j.open {
		w.Abort()
	}
	if j.csr != nil {
		j.csr.Abort()
	}
}

func (j *job) create(name string, d npy.DType, tail []int64) (*storage.ArrayWriter, error) {
	w, err := j.b.CreateArray(name, d, tail)
	if err != nil {
		return nil, err
	}
	j.open = append(j.open, w)
	j.names = append(j.names, name)
	return w, nil
}

func (j *job) addBytesIn(n int64) { j.rep.BytesIn += n }

// setNumNodes fixes N; it must be called before node ids are checked.
// from says where N came from ("raw/num-node-list.csv.gz", "--num-nodes
// (Options.NumNodes)"); range errors name it.
func (j *job) setNumNodes(n int64, from string) {
	j.numNodes, j.numNodesFrom = n, from
	j.rep.Nodes = n
}

// inferredFrom is where N comes from without a node count.
const inferredFrom = "the largest edge id + 1"

// nodeCount is N with where it came from, for a feature or label count
// that does not match it: "3, N from the largest edge id + 1; nodes after
// the last one with an edge need --num-nodes (Options.NumNodes)". Before,
// "(3)" alone left a user whose last nodes have no edge to guess why
// their one-row-per-node file had "more feature rows than nodes".
func (j *job) nodeCount() string {
	switch j.numNodesFrom {
	case "":
		return fmt.Sprint(j.numNodes)
	case inferredFrom:
		return fmt.Sprintf("%d, N from %s; nodes after the last one with an edge need --num-nodes (Options.NumNodes)", j.numNodes, j.numNodesFrom)
	}
	return fmt.Sprintf("%d, N from %s", j.numNodes, j.numNodesFrom)
}

// rangeMsg is "out of range [0, N)" with where N came from.
func (j *job) rangeMsg() string {
	if j.numNodesFrom == "" {
		return fmt.Sprintf("out of range [0, %d)", j.numNodes)
	}
	return fmt.Sprintf("out of range [0, %d) (N = %d from %s)", j.numNodes, j.numNodes, j.numNodesFrom)
}

// idMsg checks one node id of an edge (role "source" or "destination")
// against N and returns what is wrong with it, or "".
func (j *job) idMsg(role string, v int64) string {
	switch {
	case v < 0:
		return fmt.Sprintf("negative %s node id %d", role, v)
	case j.numNodes >= 0 && v >= j.numNodes:
		return fmt.Sprintf("%s node %d %s", role, v, j.rangeMsg())
	}
	return ""
}

// edgeMsg checks both ends of an edge.
func (j *job) edgeMsg(src, dst int64) string {
	if msg := j.idMsg("source", src); msg != "" {
		return msg
	}
	return j.idMsg("destination", dst)
}

// addEdge queues one checked source edge src→dst: it drops self loops
// unless kept and adds the reverse edge when symmetrising. The edge is
// stored in dst's neighbour list (CSR row dst holds src): row v is the
// list v aggregates from, its in-neighbours, as DGL, PyG, OGB and
// GraphBolt read an edge_index (u, v) (docs/format.md, "Edge direction").
// The sorter's Src is the CSR row.
func (j *job) addEdge(src, dst int64) error {
	j.rep.EdgesRead++
	j.maxID = max(j.maxID, src, dst)
	if src == dst {
		if !j.o.KeepSelfLoops {
			j.rep.SelfLoopsDropped++
			return nil
		}
		j.batch = append(j.batch, extsort.Edge{Src: src, Dst: dst})
	} else {
		j.batch = append(j.batch, extsort.Edge{Src: dst, Dst: src})
		if !j.o.Directed {
			j.batch = append(j.batch, extsort.Edge{Src: src, Dst: dst})
		}
	}
	if len(j.batch) >= cap(j.batch)-1 {
		return j.flushEdges()
	}
	return nil
}

func (j *job) flushEdges() error {
	if err := j.ctx.Err(); err != nil {
		return err
	}
	if len(j.batch) == 0 {
		return nil
	}
	if err := j.sorter.AddBatch(j.batch); err != nil {
		return fmt.Errorf("importer: sorting edges: %w", err)
	}
	j.edgeBar.Add(int64(len(j.batch)))
	j.batch = j.batch[:0]
	return nil
}

// writeCSR sorts the queued edges and streams indptr.npy and indices.npy.
// Memory is the sorter's budget plus fixed buffers, whatever the degrees.
func (j *job) writeCSR() error {
	if err := j.flushEdges(); err != nil {
		return err
	}
	if j.numNodes < 0 {
		if err := checkInferredNodes(j.maxID, j.rep.EdgesRead); err != nil {
			return err
		}
		j.setNumNodes(j.maxID+1, inferredFrom)
	}
	n := j.numNodes
	if n <= 0 {
		if j.numNodesFrom != "" && j.numNodesFrom != inferredFrom {
			return fmt.Errorf("%w: the graph has no nodes: N = %d from %s, and no edges", ErrFormat, n, j.numNodesFrom)
		}
		return fmt.Errorf("%w: the graph has no nodes (no edges and no node count)", ErrFormat)
	}
	if err := j.checkSpace(n); err != nil {
		return err
	}
	j.edgeBar.Describe("sorting edges")
	it, err := j.sorter.Sort()
	if err != nil {
		return fmt.Errorf("importer: sorting edges: %w", err)
	}
	csr, err := j.b.CreateCSR(n)
	if err != nil {
		return err
	}
	j.csr = csr
	j.names = append(j.names, storage.FileIndptr, storage.FileIndices)
	var count int64
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if err := csr.AppendEdge(e.Src, e.Dst); err != nil {
			return fmt.Errorf("importer: internal error: %w", err)
		}
		if count++; count&(1<<16-1) == 0 {
			if err := j.ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("importer: sorting edges: %w", err)
	}
	if err := csr.Commit(); err != nil {
		return err
	}
	count = csr.Edges()
	st := j.sorter.Stats()
	j.rep.EdgesStored = count
	j.rep.DuplicatesDropped = st.Duplicates
	j.rep.SortRuns = st.Runs
	j.rep.SortSpilledBytes = st.SpilledBytes
	_ = j.sorter.Close()
	j.edgeBar.Done()
	j.edgeBar = nil
	j.o.Logger.Info("edges written", "nodes", n, "edges_read", j.rep.EdgesRead, "edges_stored", count,
		"self_loops_dropped", j.rep.SelfLoopsDropped, "duplicates_dropped", st.Duplicates, "runs", st.Runs)
	return nil
}

// The number of nodes inferred from the largest id (no Options.NumNodes,
// no feature rows) may be at most max(InferNodesPerEdge × edges read,
// InferNodesFloor). A larger id is almost always a stray or corrupt value,
// and would make indptr.npy 8 bytes per node up to it.
const (
	InferNodesPerEdge = 64
	InferNodesFloor   = 1 << 20
)

// checkInferredNodes applies the rule above to largest id maxID.
func checkInferredNodes(maxID, edges int64) error {
	limit := int64(InferNodesFloor)
	if edges <= math.MaxInt64/InferNodesPerEdge {
		limit = max(limit, InferNodesPerEdge*edges)
	} else {
		limit = math.MaxInt64
	}
	if maxID < limit {
		return nil
	}
	return fmt.Errorf("%w: largest node id %d would make %d nodes for %d edges read (more than %d per edge and more than %d): "+
		"a stray id? give the node count explicitly (--num-nodes, Options.NumNodes) to accept it",
		ErrFormat, maxID, uint64(maxID)+1, edges, InferNodesPerEdge, InferNodesFloor)
}

// freeBytes reports the bytes available to an unprivileged writer on the
// file system holding dir. A variable so that tests can fake a full disk.
var freeBytes = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(min(uint64(st.Bavail)*uint64(st.Bsize), math.MaxInt64)), nil
}

// checkSpace refuses to start the CSR when the output file system cannot
// hold indptr.npy (8 bytes per node, plus one) and indices.npy for the
// edges read (doubled when symmetrising). Duplicates may make indices
// smaller, so only indptr must fit for sure; both are in the message.
func (j *job) checkSpace(n int64) error {
	free, err := freeBytes(j.outDir)
	if err != nil {
		return nil // unknown: let the writes report it
	}
	indptr := 8 * (n + 1)
	edges := j.rep.EdgesRead
	if !j.o.Directed {
		edges *= 2
	}
	indices := edges * int64(storage.IndicesDType(n).Size())
	if indptr <= free {
		return nil
	}
	hint := ""
	if j.b.Replacing() {
		hint = "; the dataset being replaced (--force) stays until the new one is complete: remove it first to free its room"
	}
	return fmt.Errorf("importer: %s has %d bytes free, but indptr.npy for %d nodes needs %d bytes (and indices.npy about %d more)%s",
		j.outDir, free, n, indptr, indices, hint)
}

// featWriter streams feature rows into features.npy.
type featWriter struct {
	j    *job
	w    *storage.ArrayWriter
	file string // the source, for errors
	line int64  // 1-based line of a text source's row being written, or 0
	f16  bool
	dim  int64
	rows int64
}

// maxFloat16 is the largest finite float16.
const maxFloat16 = 65504

// Magnitudes from overflowFloat16 (overflowFloat32) on round to ±Inf in
// float16 (float32): the midpoint between the largest finite value and
// the next power of two, where ties to even go to Inf. Smaller ones round
// to a finite value (65510 to 65504, as np.float16(65510) does), so they
// are stored, not refused as overflowing (I8).
const (
	overflowFloat16 = 65520
	overflowFloat32 = 0x1p128 - 0x1p103
)

// startFeatures starts features.npy with rows of dim values read from
// file.
func (j *job) startFeatures(file string, dim int64) (*featWriter, error) {
	if dim <= 0 {
		return nil, fmt.Errorf("importer: internal error: feature width %d", dim)
	}
	f16 := j.o.FeatDType == "float16"
	d := npy.Float32
	if f16 {
		d = npy.Float16
	}
	w, err := j.create(storage.FileFeatures, d, []int64{dim})
	if err != nil {
		return nil, err
	}
	j.featBar = j.o.Progress.Start("features", j.numNodes, progress.Items)
	return &featWriter{j: j, w: w, file: file, f16: f16, dim: dim}, nil
}

// write appends whole rows (len(v) a multiple of dim).
func (f *featWriter) write(v []float32) error {
	if err := f.j.ctx.Err(); err != nil {
		return err
	}
	for i, x := range v {
		if err := f.check(float64(x), i); err != nil {
			return err
		}
	}
	return f.store(v)
}

// write64 appends whole rows of float64 values, checked before they are
// narrowed to float32, so that a finite value beyond float32's range is
// named as it is in the source (I1), not as the +Inf it would become.
func (f *featWriter) write64(v []float64, scratch []float32) error {
	if err := f.j.ctx.Err(); err != nil {
		return err
	}
	for i, x := range v {
		if err := f.check(x, i); err != nil {
			return err
		}
		if f.f16 {
			scratch[i] = toFloat32Odd(x)
		} else {
			scratch[i] = float32(x)
		}
	}
	return f.store(scratch[:len(v)])
}

// toFloat32Odd narrows x to float32 rounding to odd: toward zero, with
// the last mantissa bit set when that is inexact. Rounded again to
// float16 (11 significant bits, 13 fewer than float32's) it gives the
// float16 nearest x, ties to even, as NumPy's astype(np.float16) does.
// float32(x), rounded to nearest, then rounded again to float16 is one
// float16 ulp off when the first rounding lands on a float16 midpoint:
// 1 + 2^-11 + 2^-40 became 0x3c00 instead of 0x3c01.
func toFloat32Odd(x float64) float32 {
	f := float32(x)
	if float64(f) == x || math.IsNaN(x) || math.IsInf(float64(f), 0) {
		return f
	}
	b := math.Float32bits(f)
	if math.Abs(float64(f)) > math.Abs(x) {
		b-- // rounded away from zero: one step back (sign-magnitude bits)
	}
	return math.Float32frombits(b | 1)
}

func (f *featWriter) store(v []float32) error {
	f.rows += int64(len(v)) / f.dim
	f.j.featBar.Add(int64(len(v)) / f.dim)
	if f.f16 {
		return f.w.WriteFloat32sAsFloat16(v)
	}
	return f.w.WriteFloat32s(v)
}

// check rejects the source value x at position i of the rows being
// written when it is NaN or ±Inf, or finite but beyond the range of the
// stored dtype (float32's ±3.4028235e38, float16's ±65504), which would
// store it as ±Inf. With AllowNonFinite it is counted instead, in
// Report.NonFiniteFeatures or Report.OverflowFeatures, and stored.
func (f *featWriter) check(x float64, i int) error {
	limit, dtype, overflowAt := float64(math.MaxFloat32), "float32", overflowFloat32
	if f.f16 {
		limit, dtype, overflowAt = maxFloat16, "float16", overflowFloat16
	}
	ax := math.Abs(x)
	if ax < overflowAt { // false for NaN
		return nil
	}
	nonFinite := math.IsNaN(x) || math.IsInf(x, 0)
	if f.j.o.AllowNonFinite {
		if nonFinite {
			f.j.rep.NonFiniteFeatures++
		} else {
			f.j.rep.OverflowFeatures++
		}
		return nil
	}
	row, col := f.rows+int64(i)/f.dim, int64(i)%f.dim
	what := fmt.Sprintf("is %v; pass --allow-nonfinite (Options.AllowNonFinite) to store it", x)
	if !nonFinite {
		what = fmt.Sprintf("is %v, beyond %s's range (±%v): it would overflow to %sInf; pass --allow-nonfinite (Options.AllowNonFinite) to store it as that",
			x, dtype, float32(limit), map[bool]string{true: "-", false: "+"}[x < 0])
	}
	msg := fmt.Sprintf("feature of node %d, column %d (0-based) %s", row, col, what)
	if f.line > 0 {
		return lineErr(f.file, f.line, "%s", msg)
	}
	return elemErr(f.file, row*f.dim+col, "%s", msg)
}

// commit checks the row count against N (file names the source).
func (f *featWriter) commit(file string) error {
	f.j.featBar.Done()
	f.j.featBar = nil
	if f.rows != f.j.numNodes {
		return fileErr(file, "%d feature rows, want one per node (%s)", f.rows, f.j.nodeCount())
	}
	if err := f.w.Commit(); err != nil {
		return err
	}
	f.j.featDim = f.dim
	f.j.rep.FeatDim = f.dim
	f.j.rep.FeatRows = f.rows
	f.j.o.Logger.Info("features written", "rows", f.rows, "dim", f.dim, "dtype", f.j.o.FeatDType)
	if n := f.j.rep.NonFiniteFeatures; n > 0 {
		f.j.o.Logger.Warn("features stored with NaN/Inf values (allowed by AllowNonFinite); validate will report them",
			"file", file, "count", n)
	}
	if n := f.j.rep.OverflowFeatures; n > 0 {
		f.j.o.Logger.Warn("finite feature values beyond the stored dtype's range overflowed to ±Inf on conversion (allowed by AllowNonFinite); validate will report them as Inf",
			"file", file, "count", n, "dtype", f.j.o.FeatDType)
	}
	return nil
}

// copyNPYFeatures streams an [N, D] array into features.npy.
func (j *job) copyNPYFeatures(s *npyStream) error {
	switch {
	case len(s.h.Shape) == 2 && s.h.Shape[1] > 0:
	case len(s.h.Shape) == 1:
		s.h.Shape = []int64{s.h.Shape[0], 1}
	default:
		return fileErr(s.name, "features have shape %v, want [num_nodes, dim]", s.h.Shape)
	}
	if s.h.Shape[0] != j.numNodes {
		return fileErr(s.name, "%d feature rows, want one per node (%s)", s.h.Shape[0], j.nodeCount())
	}
	dim := s.h.Shape[1]
	fw, err := j.startFeatures(s.name, dim)
	if err != nil {
		return err
	}
	rows := max(1, (1<<18)/dim)
	buf := make([]float32, rows*dim)
	if s.h.DType == npy.Float64 {
		buf64 := make([]float64, rows*dim)
		for {
			n, err := s.float64s(buf64)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			if err := fw.write64(buf64[:n], buf); err != nil {
				return err
			}
		}
		if err := s.drain(); err != nil {
			return err
		}
		return fw.commit(s.name)
	}
	for {
		n, err := s.float32s(buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if err := fw.write(buf[:n]); err != nil {
			return err
		}
	}
	if err := s.drain(); err != nil {
		return err
	}
	return fw.commit(s.name)
}

// labelWriter streams labels into labels.npy.
type labelWriter struct {
	j   *job
	w   *storage.ArrayWriter
	buf []int32
	n   int64
}

func (j *job) startLabels() (*labelWriter, error) {
	w, err := j.create(storage.FileLabels, npy.Int32, nil)
	if err != nil {
		return nil, err
	}
	if err := j.checkTableMem(j.numNodes); err != nil {
		return nil, err
	}
	j.labelled = newBitset(j.numNodes)
	return &labelWriter{j: j, w: w, buf: make([]int32, 0, 1<<14)}, nil
}

// add appends the label of the next node and returns what is wrong with
// x, or "". NaN and -1 mean unlabelled; other values must be integers in
// [0, NumClasses) (or [0, 2^31-1) when NumClasses is inferred).
func (l *labelWriter) add(x float64) string {
	if l.n >= l.j.numNodes {
		return fmt.Sprintf("more labels than nodes (%s)", l.j.nodeCount())
	}
	v := int32(-1)
	switch {
	case math.IsNaN(x) || x == -1:
	case x != math.Trunc(x):
		return fmt.Sprintf("label %v is not an integer", x)
	case x < 0 || x >= float64(l.j.labelLimit):
		if l.j.o.NumClasses > 0 {
			return fmt.Sprintf("label %v out of range [0, %d) (NumClasses %d)", x, l.j.labelLimit, l.j.o.NumClasses)
		}
		if x < 0 {
			return fmt.Sprintf("label %v is negative; -1 or NaN mark unlabelled nodes", x)
		}
		return fmt.Sprintf("label %v is too large: labels are int32 classes below 2^31-1", x)
	default:
		v = int32(x)
		l.j.labelled.set(l.n)
		l.j.numLabels++
		if int64(v) > l.j.maxLabel {
			l.j.maxLabel, l.j.maxLabelAt = int64(v), l.n
		}
	}
	l.buf = append(l.buf, v)
	l.n++
	return ""
}

// flush writes buffered labels when the buffer is full (or always, with
// force).
func (l *labelWriter) flush(force bool) error {
	if len(l.buf) == cap(l.buf) || (force && len(l.buf) > 0) {
		if err := l.j.ctx.Err(); err != nil {
			return err
		}
		if err := l.w.WriteInt32s(l.buf); err != nil {
			return err
		}
		l.buf = l.buf[:0]
	}
	return nil
}

func (l *labelWriter) commit(file string) error {
	if err := l.flush(true); err != nil {
		return err
	}
	if l.n != l.j.numNodes {
		return fileErr(file, "%d labels, want one per node (%s)", l.n, l.j.nodeCount())
	}
	// Inferred classes beyond the labelled nodes cannot all have an
	// example: past maxInferredClasses that is a stray label (an id, a
	// typo) that would make the model's output layer that wide (5,000,001
	// classes for 6 labelled nodes took 24 GB in train). --num-classes
	// states a count on purpose.
	if j := l.j; j.o.NumClasses == 0 && j.maxLabel+1 > max(j.numLabels, maxInferredClasses) {
		return fileErr(file, "node %d: label %d would make %d classes for %d labelled nodes; give --num-classes if that many is meant",
			j.maxLabelAt, j.maxLabel, j.maxLabel+1, j.numLabels)
	}
	if err := l.w.Commit(); err != nil {
		return err
	}
	j := l.j
	j.rep.Labelled = j.numLabels
	j.rep.NumClasses = j.o.NumClasses
	if j.rep.NumClasses == 0 {
		j.rep.NumClasses = j.maxLabel + 1
	}
	j.o.Logger.Info("labels written", "labelled", j.numLabels, "num_classes", j.rep.NumClasses)
	return nil
}

// maxInferredClasses is the most classes an import infers from its labels
// without --num-classes when the labelled nodes are fewer (IGB's largest
// label set has 2,983 classes, ogbn-papers100M 172).
const maxInferredClasses = 1 << 16

// copyNPYLabels streams a [N] or [N, 1] array of labels.
func (j *job) copyNPYLabels(s *npyStream) error {
	if !(len(s.h.Shape) == 1 || (len(s.h.Shape) == 2 && s.h.Shape[1] == 1)) {
		return fileErr(s.name, "labels have shape %v, want [num_nodes] or [num_nodes, 1]", s.h.Shape)
	}
	if s.h.Shape[0] != j.numNodes {
		return fileErr(s.name, "%d labels, want one per node (%s)", s.h.Shape[0], j.nodeCount())
	}
	lw, err := j.startLabels()
	if err != nil {
		return err
	}
	buf := make([]float64, 1<<14)
	for {
		start := s.pos
		n, err := s.float64s(buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		for i, x := range buf[:n] {
			if msg := lw.add(x); msg != "" {
				return elemErr(s.name, start+int64(i), "%s", msg)
			}
			if err := lw.flush(false); err != nil {
				return err
			}
		}
	}
	if err := s.drain(); err != nil {
		return err
	}
	return lw.commit(s.name)
}

// splitNames are the split array files in train, valid, test order.
var splitNames = [3]string{storage.FileTrain, storage.FileValid, storage.FileTest}

// splitChecker checks that split lists are in range and disjoint, with 2
// bits per node recording which split holds it.
type splitChecker struct {
	n        int64
	tags     []byte
	rangeMsg string // "out of range [0, N) (N from ...)"
}

func (j *job) newSplitChecker() *splitChecker {
	n := j.numNodes
	return &splitChecker{n: n, tags: make([]byte, (n+3)/4), rangeMsg: j.rangeMsg()}
}

var splitLabels = [3]string{"train", "valid", "test"}

// add records node v in split k and returns what is wrong, or "".
func (c *splitChecker) add(v int64, k int) string {
	if v < 0 || v >= c.n {
		return fmt.Sprintf("node %d %s", v, c.rangeMsg)
	}
	sh := uint(v&3) * 2
	if t := (c.tags[v>>2] >> sh) & 3; t != 0 {
		if int(t-1) == k {
			return fmt.Sprintf("node %d listed twice in %s", v, splitLabels[k])
		}
		return fmt.Sprintf("node %d is also in %s: splits must be disjoint", v, splitLabels[t-1])
	}
	c.tags[v>>2] |= byte(k+1) << sh
	return ""
}

// writeSplit sorts ids (already checked) and writes split k.
func (j *job) writeSplit(k int, ids []int64) error {
	slices.Sort(ids)
	w, err := j.create(splitNames[k], npy.Int64, nil)
	if err != nil {
		return err
	}
	if err := w.WriteInt64s(ids); err != nil {
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	switch k {
	case 0:
		j.rep.Train = int64(len(ids))
	case 1:
		j.rep.Valid = int64(len(ids))
	case 2:
		j.rep.Test = int64(len(ids))
	}
	return nil
}

// randomSplit assigns labelled nodes to train/valid/test with exact sizes
// round(L × SplitFrac[k]) (test shrinks if rounding overshoots L). It scans
// nodes in order and puts each labelled node in split k with probability
// need[k]/remaining (selection sampling), so every assignment with those
// sizes is equally likely, the output is sorted, and memory is the
// labelled bitset plus fixed buffers.
func (j *job) randomSplit() error {
	if j.labelled == nil || j.numLabels == 0 {
		return nil
	}
	L := j.numLabels
	var need [3]int64
	for k, f := range j.o.SplitFrac {
		need[k] = int64(math.Round(float64(L) * f))
	}
	need[0] = min(need[0], L)
	need[1] = min(need[1], L-need[0])
	need[2] = min(need[2], L-need[0]-need[1])
	var ws [3]*storage.ArrayWriter
	var bufs [3][]int64
	for k := range ws {
		w, err := j.create(splitNames[k], npy.Int64, nil)
		if err != nil {
			return err
		}
		ws[k] = w
		bufs[k] = make([]int64, 0, 4096)
	}
	rng := rand.New(rand.NewPCG(uint64(j.o.Seed), 0x9e3779b97f4a7c15))
	sizes := need
	remaining := L
	for v := int64(0); v < j.numNodes; v++ {
		if v&(1<<20-1) == 0 {
			if err := j.ctx.Err(); err != nil {
				return err
			}
		}
		if !j.labelled.has(v) {
			continue
		}
		r := rng.Int64N(remaining)
		remaining--
		k := -1
		switch {
		case r < need[0]:
			k = 0
		case r < need[0]+need[1]:
			k = 1
		case r < need[0]+need[1]+need[2]:
			k = 2
		}
		if k < 0 {
			continue
		}
		need[k]--
		bufs[k] = append(bufs[k], v)
		if len(bufs[k]) == cap(bufs[k]) {
			if err := ws[k].WriteInt64s(bufs[k]); err != nil {
				return err
			}
			bufs[k] = bufs[k][:0]
		}
	}
	for k := range ws {
		if err := ws[k].WriteInt64s(bufs[k]); err != nil {
			return err
		}
		if err := ws[k].Commit(); err != nil {
			return err
		}
	}
	j.rep.Train, j.rep.Valid, j.rep.Test = sizes[0], sizes[1], sizes[2]
	j.rep.Split, j.rep.RandomSplit = "random", true
	j.o.Logger.Info("random split written", "seed", j.o.Seed, "train", sizes[0], "valid", sizes[1], "test", sizes[2])
	return nil
}

// checkSplitLabels counts the nodes of source splits that have no label
// (I17): training skips them, so a split of 140 with 5 of them trains on
// 135, and a GraphBolt export would write their -1 as a target. They are
// legal (the source says so), so this warns, with the count per split and
// the first such node, in Report.SplitUnlabelled and the log; validate
// reports them as a warning too. A random split draws labelled nodes only.
func (j *job) checkSplitLabels() error {
	if j.labelled == nil || j.rep.RandomSplit {
		return nil
	}
	buf := make([]int64, 1<<14)
	first := int64(-1)
	for k, name := range splitNames {
		if _, ok := j.b.Entry(name); !ok {
			continue
		}
		s, _, err := openNPYFile(filepath.Join(j.b.Dir(), name), "split", nil)
		if err != nil {
			return err
		}
		for {
			n, err := s.int64s(buf)
			if err != nil {
				s.Close()
				return err
			}
			if n == 0 {
				break
			}
			for _, v := range buf[:n] {
				if !j.labelled.has(v) {
					j.rep.SplitUnlabelled[k]++
					if first < 0 || v < first {
						first = v
					}
				}
			}
		}
		s.Close()
	}
	if u := j.rep.SplitUnlabelled; u != [3]int64{} {
		j.rep.FirstSplitUnlabelled = first
		j.o.Logger.Warn("split nodes without a label: training skips them", "train", u[0], "valid", u[1], "test", u[2], "first_node", first)
	}
	return nil
}

// finish writes the manifest and completes the report.
func (j *job) finish() (Report, error) {
	if j.featDim == 0 {
		j.rep.FeatDType = ""
	}
	m := storage.Manifest{
		Name:              j.o.Name,
		NumNodes:          j.numNodes,
		NumEdges:          j.rep.EdgesStored,
		FeatDim:           j.featDim,
		FeatDType:         j.rep.FeatDType, // "" without features (C8)
		NumClasses:        j.rep.NumClasses,
		Symmetrized:       !j.o.Directed,
		Source:            j.rep.Source,
		SelfLoopsDropped:  j.rep.SelfLoopsDropped,
		DuplicatesDropped: j.rep.DuplicatesDropped,
	}
	if j.rep.RandomSplit {
		m.Seed = j.o.Seed
	}
	if err := j.b.Finish(m); err != nil {
		return Report{}, err
	}
	j.removeOldTemps()
	if mf, err := storage.LoadManifest(j.outDir); err == nil {
		for _, f := range mf.Files {
			j.rep.BytesOut += f.Bytes
		}
	}
	j.rep.Wall = time.Since(j.start)
	j.o.Logger.Info("import finished", "name", j.o.Name, "nodes", j.rep.Nodes, "edges", j.rep.EdgesStored, "wall", j.rep.Wall)
	return j.rep, nil
}

// run executes body on a new job and finishes it, cleaning up on every
// path. body fills the dataset's arrays. byRow is begin's.
func run(ctx context.Context, outDir, name, source string, opts *Options, byRow bool, body func(j *job) error) (Report, error) {
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	j, err := begin(outDir, name, source, opts, byRow)
	if err != nil {
		return Report{}, err
	}
	defer j.cleanup()
	// Hold the Go heap to the budget: at the default collector target
	// the garbage of the sorter's growth steps and of the read chunks let
	// RSS reach about 2 × the sort buffer (I8: 149 MB at a 64 MiB budget).
	defer membudget.Of(j.o.MemBytes).Hold()()
	j.ctx = ctx
	err = body(j)
	if err == nil {
		err = j.checkSplitLabels()
	}
	if err != nil {
		j.o.Logger.Debug("import failed", "err", err)
		j.removeArrays()
		return Report{}, err
	}
	rep, err := j.finish()
	if err != nil {
		j.removeArrays()
	}
	return rep, err
}

// tempPrefix names the per-import temp directories.
const tempPrefix = ".import-tmp-"

// cleanStaleTemps removes temp directories of crashed imports: those in
// dir untouched for extsort.StaleAge. Failures are only logged.
func cleanStaleTemps(dir string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-extsort.StaleAge)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			p := filepath.Join(dir, e.Name())
			if err := os.RemoveAll(p); err != nil {
				log.Warn("cannot remove stale import temp dir", "dir", p, "err", err)
			} else {
				log.Info("removed stale import temp dir", "dir", p)
			}
		}
	}
}

// removeOldTemps removes, after a successful import, the sort-run
// directories that earlier imports into outDir left there when they were
// killed (cleanStaleTemps only removes those older than extsort.StaleAge,
// since an import might still be running). A finished dataset directory
// holds no run of a live import: writers of a dataset directory hold its
// lock (internal/dirlock), and this import's own runs are gone. Temp dirs
// under a separate Options.TempDir are left to cleanStaleTemps.
func (j *job) removeOldTemps() {
	ents, err := os.ReadDir(j.outDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(j.outDir, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tempPrefix) || p == j.tmp {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			j.o.Logger.Warn("cannot remove old import temp dir", "dir", p, "err", err)
		} else {
			j.o.Logger.Info("removed old import temp dir", "dir", p)
		}
	}
}

// bitset is a fixed-size set of node ids.
type bitset []uint64

func newBitset(n int64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int64)      { b[i>>6] |= 1 << uint(i&63) }
func (b bitset) has(i int64) bool { return b[i>>6]&(1<<uint(i&63)) != 0 }
func baseName(path string) string { return trimExt(filepath.Base(filepath.Clean(path))) }

// trimExt removes compression and table extensions from a file name.
func trimExt(s string) string {
	for _, ext := range []string{".gz", ".csv", ".tsv", ".txt", ".el", ".edges", ".edgelist"} {
		if len(s) > len(ext) && s[len(s)-len(ext):] == ext {
			s = s[:len(s)-len(ext)]
		}
	}
	return s
}
