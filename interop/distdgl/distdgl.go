// Package distdgl writes an ssdgnn dataset in DGL's chunked graph format
// (the input of DistDGL's distributed partitioning pipeline) together with
// a partition assignment taken from one of the dataset's partitionings, so
// that DGL's dispatch step (tools/dispatch_data.py) can run without DGL's
// own partitioning step. The layout, and the DGL version it was written to
// (2.5), are specified in docs/format.md ("DistDGL export").
//
// A partition-major copy (partition.Relabel) is exported in its own ids,
// with node data "orig_id" mapping each node to the original dataset's id.
//
// The graph is homogeneous: node type "_N", canonical edge type
// "_N:_E:_N". As in package graphbolt, every stored neighbour u of node v
// is exported as the edge u→v, so each DistDGL partition owns (DGL gives
// an edge to its destination's partition) exactly the CSR rows of its
// nodes.
//
// # Memory and atomicity
//
// Export streams every array and edge chunk with fixed buffers sized from
// Options.MemBytes, the budget of the whole export; the CSR, features, labels, splits and part.npy are
// read with pread, never mapped, so resident memory does not grow with the
// graph. Split masks need no per-node state: the sorted split files are
// merged with the node scan. Every file is written under a temporary name,
// fsynced and renamed; metadata.json is written last. Overwriting needs
// Options.Force.
package distdgl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/interop/internal/csrstream"
	"github.com/ssdgnn/ssdgnn/interop/internal/exportdir"
	"github.com/ssdgnn/ssdgnn/interop/internal/intarray"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Names of the homogeneous graph's types, as DGL spells its defaults.
const (
	NodeType = "_N"
	EdgeType = "_N:_E:_N"
)

// File names.
const (
	MetadataName      = "metadata.json"
	PartitionsDir     = "partitions"
	PartitionMetaName = "partition_meta.json"
)

// ColOrigID is the node data of a relabelled copy's export: each node's
// id in the original dataset (int64).
const ColOrigID = "orig_id"

// Sentinel errors; returned errors wrap them.
var (
	// ErrInvalidOptions is wrapped by every error of Options.Validate and
	// when the options do not fit the dataset.
	ErrInvalidOptions = errors.New("distdgl: invalid options")
)

// Defaults of Options.
const (
	DefaultMemBytes = 64 << 20
	// MinMemBytes is the smallest accepted MemBytes: the whole
	// process's reserve (internal/membudget: the runtime and the page
	// cache of the files written) beside 24 MiB: the smallest chunks (a
	// quarter of the budget), one chunk's writers (a 1 MiB buffer for each
	// node data array) and room for the clean page cache the reads go
	// through. Measured on a 1M-node, 670 MiB dataset in a memory cgroup
	// of MemBytes, cold cache: 16 MiB killed, 32 MiB 48 s, 40 MiB 19 s,
	// 48 MiB 9.8 s, 64 MiB 6.6 s (7.1 s uncapped): below 48 MiB the reads
	// and writes thrash in the page cache left.
	MinMemBytes = membudget.ReserveBytes + 24<<20
)

// Options configures Export. The zero value of every field selects its
// default; a nil *Options means all defaults.
type Options struct {
	// Partition names the partitioning (DIR/partitions/<name>/) whose
	// part.npy becomes the assignment. Required.
	Partition string
	// NumChunks is the number of chunks of every edge and node-data file.
	// Default: the partitioning's number of parts, at most N (and 1 for an
	// empty graph).
	NumChunks int
	// LabelDType is the dtype of node data "label": npy.Int64 (default,
	// what PyTorch's losses want) or npy.Int32.
	LabelDType npy.DType
	// MemBytes is the memory budget of the whole export: its chunks take
	// a quarter of it, and the Go runtime's soft memory limit is
	// membudget's (MemBytes less membudget.PageCacheBytes) while the
	// export runs. Default DefaultMemBytes; at
	// least MinMemBytes.
	MemBytes int64
	// Force overwrites an existing export.
	Force bool
	// Progress receives progress reports; nil reports nothing.
	Progress progress.Reporter
	// Logger receives stage logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports whether o is usable. A nil receiver is not: Partition
// is required.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return opterr.Errorf(ErrInvalidOptions, format, args...)
	}
	switch {
	case o == nil || o.Partition == "":
		return bad("%s is required (the name of a partitioning made by 'ssdgnn partition')", opterr.Field("Partition"))
	case o.NumChunks < 0:
		return bad("%s %d is negative", opterr.Field("NumChunks"), o.NumChunks)
	case o.LabelDType != npy.Invalid && o.LabelDType != npy.Int32 && o.LabelDType != npy.Int64:
		return bad("LabelDType %v, want int32 or int64", o.LabelDType)
	case o.MemBytes != 0 && o.MemBytes < MinMemBytes:
		return bad("%s %d, want at least %d (%d MiB)", opterr.Field("MemBytes"), o.MemBytes, MinMemBytes, MinMemBytes>>20)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.LabelDType == npy.Invalid {
		r.LabelDType = npy.Int64
	}
	if r.MemBytes == 0 {
		r.MemBytes = DefaultMemBytes
	}
	r.Progress = progress.Or(r.Progress)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// chunkItems is the number of edges or nodes buffered at a time (about 48
// bytes each, a quarter of MemBytes).
func (o *Options) chunkItems() int64 { return min(max(o.MemBytes/4/48, 4096), 1<<22) }

// Metadata is the chunked graph format's metadata.json.
type Metadata struct {
	GraphName        string                              `json:"graph_name"`
	NodeType         []string                            `json:"node_type"`
	NumNodesPerChunk [][]int64                           `json:"num_nodes_per_chunk"`
	EdgeType         []string                            `json:"edge_type"`
	NumEdgesPerChunk [][]int64                           `json:"num_edges_per_chunk"`
	Edges            map[string]ChunkFileSpec            `json:"edges"`
	NodeData         map[string]map[string]ChunkFileSpec `json:"node_data"`
	EdgeData         map[string]map[string]ChunkFileSpec `json:"edge_data"`
}

// ChunkFileSpec lists the chunk files of one array.
type ChunkFileSpec struct {
	Format Format   `json:"format"`
	Data   []string `json:"data"`
}

// Format is a chunk file format: "csv" with a delimiter, or "numpy".
type Format struct {
	Name      string `json:"name"`
	Delimiter string `json:"delimiter,omitempty"`
}

// PartitionMeta is partition_meta.json of the assignment directory, as
// DGL's tools/partition_algo/base.py reads it.
type PartitionMeta struct {
	AlgoName string `json:"algo_name"`
	NumParts int    `json:"num_parts"`
	Version  string `json:"version"`
	// Method is ssdgnn's partitioning method; DGL ignores the key.
	Method string `json:"ssdgnn_method"`
}

// Report describes a finished export.
type Report struct {
	Dir      string   `json:"dir"`
	Nodes    int64    `json:"nodes"`
	Edges    int64    `json:"edges"`
	Chunks   int      `json:"chunks"`
	Parts    int      `json:"parts"`
	NodeData []string `json:"node_data"`
	// UnlabelledMasked counts, per mask (train, val, test), the masked
	// nodes whose label is -1: the dataset's split holds nodes without a
	// label (import warns, validate too). Training in ssdgnn skips them;
	// DGL's cross_entropy fails on a -1 target.
	UnlabelledMasked [3]int64      `json:"unlabelled_masked"`
	BytesWritten     int64         `json:"bytes_written"`
	Wall             time.Duration `json:"wall_ns"`
}

// String is a short human summary.
func (r Report) String() string {
	warn := ""
	if u := r.UnlabelledMasked; u != [3]int64{} {
		warn = fmt.Sprintf("\n  warning: %d train_mask, %d val_mask and %d test_mask nodes have label -1 (no label): DGL's cross_entropy fails on a -1 target; drop them (label >= 0) before training", u[0], u[1], u[2])
	}
	return fmt.Sprintf("DistDGL chunked graph in %s\n  nodes %d, edges %d, %d chunks, node data %v%s\n  partition assignment of %d parts in %s\n  %d bytes written in %v",
		r.Dir, r.Nodes, r.Edges, r.Chunks, r.NodeData, warn, r.Parts, filepath.Join(r.Dir, PartitionsDir), r.BytesWritten, r.Wall.Round(time.Millisecond))
}

// ChunkSizes splits total items into n chunks whose sizes differ by at
// most one, larger chunks first.
func ChunkSizes(total int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = total / int64(n)
		if int64(i) < total%int64(n) {
			out[i]++
		}
	}
	return out
}

// syncFS makes the chunk files, renamed into place without an fsync each
// (atomicfile.File.Defer), durable before the metadata is written; a
// variable so that a test can see that it runs, and when.
var syncFS = atomicfile.SyncFS

// owned are the entries of an export directory besides metadata.json.
var owned = []string{"edges", "node_data", PartitionsDir}

// Export writes the dataset in dir as a DGL chunked graph in out, with
// the partition assignment of partitioning opts.Partition in
// out/partitions/.
func Export(dir, out string, opts *Options) (Report, error) {
	return ExportContext(context.Background(), dir, out, opts)
}

// ExportContext is Export, stopped by ctx within a chunk: it then returns
// ctx's error and leaves no metadata.json (the export does not look
// complete).
func ExportContext(ctx context.Context, dir, out string, opts *Options) (_ Report, err error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	o := opts.withDefaults()
	defer membudget.Of(o.MemBytes).Hold()()
	m, msum, err := storage.LoadManifestChecksum(dir)
	if err != nil {
		return Report{}, err
	}
	pt, err := partition.Open(dir, o.Partition)
	if err != nil {
		return Report{}, err
	}
	pman := pt.Manifest()
	partEntry := *pman.File(partition.FilePart)
	pdir := pt.Dir()
	pt.Close() // part.npy is read with pread below, not through the mapping
	if o.NumChunks == 0 {
		o.NumChunks = int(max(1, min(int64(pman.K), m.NumNodes)))
	}
	if int64(o.NumChunks) > max(1, m.NumNodes) {
		return Report{}, opterr.Errorf(ErrInvalidOptions, "%s %d exceeds the %d nodes", opterr.Field("NumChunks"), o.NumChunks, m.NumNodes)
	}
	if err := exportdir.Prepare(dir, out, MetadataName, owned, o.Force); err != nil {
		return Report{}, err
	}
	defer func() {
		if err != nil { // nothing of a failed export is left behind
			exportdir.Abandon(out, MetadataName, owned)
		}
	}()
	for _, d := range owned {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return Report{}, fmt.Errorf("distdgl: %w", err)
		}
	}
	x := &exporter{ctx: ctx, o: o, dir: dir, out: out, m: m}
	meta := Metadata{
		GraphName:        m.Name,
		NodeType:         []string{NodeType},
		NumNodesPerChunk: [][]int64{ChunkSizes(m.NumNodes, o.NumChunks)},
		EdgeType:         []string{EdgeType},
		NumEdgesPerChunk: [][]int64{ChunkSizes(m.NumEdges, o.NumChunks)},
		Edges:            map[string]ChunkFileSpec{},
		NodeData:         map[string]map[string]ChunkFileSpec{NodeType: {}},
		EdgeData:         map[string]map[string]ChunkFileSpec{},
	}
	if meta.GraphName == "" {
		meta.GraphName = "graph"
	}
	bar := o.Progress.Start("distdgl export", 2*m.NumNodes+m.NumEdges, progress.Items)
	defer bar.Done()
	x.bar = bar
	if meta.Edges[EdgeType], err = x.edges(meta.NumEdgesPerChunk[0]); err != nil {
		return Report{}, err
	}
	nd, names, err := x.nodeData(meta.NumNodesPerChunk[0])
	if err != nil {
		return Report{}, err
	}
	meta.NodeData[NodeType] = nd
	_ = os.Remove(filepath.Join(out, "node_data")) // none: no litter (fails when not empty)
	if err := x.assignment(pdir, &partEntry, pman); err != nil {
		return Report{}, cmp.Or(storage.ManifestUnchanged(dir, msum), pt.Unchanged(), err)
	}
	// The dataset's files and part.npy were read by path, long after
	// they were opened: a dataset replaced meanwhile (which takes its
	// partitionings along) gave some of them, a partitioning replaced
	// meanwhile another assignment than the K and method
	// partition_meta.json states.
	if err := cmp.Or(storage.ManifestUnchanged(dir, msum), pt.Unchanged()); err != nil {
		return Report{}, err
	}
	js, err := json.MarshalIndent(&meta, "", "  ")
	if err != nil {
		return Report{}, fmt.Errorf("distdgl: %w", err)
	}
	js = append(js, '\n')
	// The chunk files were renamed into place without an fsync each (two
	// a file bounded a 12,003-file export at 317 files a second): one
	// syncfs makes them all durable before the metadata vouches for them.
	if err := syncFS(out); err != nil {
		return Report{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(out, MetadataName), js); err != nil {
		return Report{}, err
	}
	rep := Report{Dir: out, Nodes: m.NumNodes, Edges: m.NumEdges, Chunks: o.NumChunks, Parts: pman.K, NodeData: names,
		UnlabelledMasked: x.unlabelled, BytesWritten: x.written + int64(len(js)), Wall: time.Since(start)}
	o.Logger.Info("distdgl export finished", "out", out, "nodes", rep.Nodes, "edges", rep.Edges, "chunks", rep.Chunks, "wall", rep.Wall)
	return rep, nil
}

type exporter struct {
	ctx     context.Context
	o       Options
	dir     string
	out     string
	m       *storage.Manifest
	bar     progress.Task
	written int64
	// unlabelled counts, per mask, the masked nodes whose label is -1.
	unlabelled [3]int64
}

// textOut is one text file being written atomically with a buffer.
type textOut struct {
	ctx context.Context
	af  *atomicfile.File
	buf []byte
}

func (x *exporter) createText(rel string) (*textOut, error) {
	af, err := atomicfile.Create(filepath.Join(x.out, rel))
	if err != nil {
		return nil, err
	}
	af.Defer() // made durable together before the metadata (Export)
	return &textOut{ctx: x.ctx, af: af, buf: make([]byte, 0, 1<<20)}, nil
}

// flush writes the buffer; it is where a cancelled export stops.
func (t *textOut) flush() error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	if len(t.buf) == 0 {
		return nil
	}
	if _, err := t.af.Write(t.buf); err != nil {
		return fmt.Errorf("distdgl: write %s: %w", t.af.Name(), err)
	}
	t.buf = t.buf[:0]
	return nil
}

func (t *textOut) maybeFlush() error {
	if len(t.buf) > cap(t.buf)-64 {
		return t.flush()
	}
	return nil
}

func (t *textOut) commit(x *exporter) error {
	x.written += int64(len(t.buf))
	if err := t.flush(); err != nil {
		t.af.Abort()
		return err
	}
	if fi, err := os.Stat(t.af.TempName()); err == nil {
		x.written += fi.Size() - int64(len(t.buf))
	}
	return t.af.Commit()
}

// edges writes the edge chunks: "src dst" lines, src the neighbour and
// dst the CSR row, in CSR order.
func (x *exporter) edges(sizes []int64) (ChunkFileSpec, error) {
	spec := ChunkFileSpec{Format: Format{Name: "csv", Delimiter: " "}}
	r, err := csrstream.Open(x.dir, x.m)
	if err != nil {
		return spec, err
	}
	defer r.Close()
	chunk := x.o.chunkItems()
	rows, nbrs := make([]int64, chunk), make([]int64, chunk)
	for c, size := range sizes {
		rel := fmt.Sprintf("edges/edges-%d.txt", c)
		t, err := x.createText(rel)
		if err != nil {
			return spec, err
		}
		for left := size; left > 0; {
			n, err := r.Next(rows[:min(chunk, left)], nbrs)
			if err == nil && n == 0 {
				err = fmt.Errorf("%w: %s: fewer edges than num_edges %d", storage.ErrMismatch, x.dir, x.m.NumEdges)
			}
			if err != nil {
				t.af.Abort()
				return spec, err
			}
			for i := range n {
				t.buf = strconv.AppendInt(t.buf, nbrs[i], 10)
				t.buf = append(t.buf, ' ')
				t.buf = strconv.AppendInt(t.buf, rows[i], 10)
				t.buf = append(t.buf, '\n')
				if err := t.maybeFlush(); err != nil {
					t.af.Abort()
					return spec, err
				}
			}
			left -= int64(n)
			x.bar.Add(int64(n))
		}
		if err := t.commit(x); err != nil {
			return spec, err
		}
		spec.Data = append(spec.Data, rel)
	}
	return spec, nil
}

// assignment writes partitions/_N.txt (one part id per line, line i for
// node i) and partitions/partition_meta.json, checking every part id.
func (x *exporter) assignment(pdir string, e *storage.FileEntry, pm *partition.Manifest) error {
	f, err := storage.OpenArrayFile(pdir, e)
	if err != nil {
		return err
	}
	defer f.Close()
	t, err := x.createText(filepath.Join(PartitionsDir, NodeType+".txt"))
	if err != nil {
		return err
	}
	defer t.af.Abort()
	n := x.m.NumNodes
	chunk := x.o.chunkItems()
	raw := make([]byte, 4*chunk)
	for done := int64(0); done < n; {
		k := min(chunk, n-done)
		if err := f.ReadDataAt(raw[:4*k], 4*done); err != nil {
			return err
		}
		for i := range k {
			p := int32(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
			if p < 0 || int(p) >= pm.K {
				return &storage.CorruptError{File: f.Path, Field: "part", Index: done + i, Offset: -1, Msg: fmt.Sprintf("part %d out of range [0,%d)", p, pm.K)}
			}
			t.buf = strconv.AppendInt(t.buf, int64(p), 10)
			t.buf = append(t.buf, '\n')
			if err := t.maybeFlush(); err != nil {
				return err
			}
		}
		done += k
		x.bar.Add(k)
	}
	if err := t.commit(x); err != nil {
		return err
	}
	algo := "metis" // DGL's dispatch accepts only "random" and "metis"
	if pm.Method == partition.Random {
		algo = "random"
	}
	js, err := json.MarshalIndent(PartitionMeta{AlgoName: algo, NumParts: pm.K, Version: "1.0.0", Method: string(pm.Method)}, "", "    ")
	if err != nil {
		return fmt.Errorf("distdgl: %w", err)
	}
	x.written += int64(len(js)) + 1
	return atomicfile.WriteFile(filepath.Join(x.out, PartitionsDir, PartitionMetaName), append(js, '\n'))
}

// arrayOut is one .npy chunk being written; its writes stop when the
// export is cancelled.
type arrayOut struct {
	ctx context.Context
	*npy.File
}

func (x *exporter) createArray(rel string, d npy.DType, tail []int64) (*arrayOut, error) {
	f, err := npy.Create(filepath.Join(x.out, rel), d, tail)
	if err != nil {
		return nil, fmt.Errorf("distdgl: %s: %w", rel, err)
	}
	f.Defer() // made durable together before the metadata (Export)
	return &arrayOut{ctx: x.ctx, File: f}, nil
}

// write appends p; it is where a cancelled export stops.
func (a *arrayOut) write(p []byte) error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	if _, err := a.Write(p); err != nil {
		return fmt.Errorf("distdgl: write %s: %w", a.Name(), err)
	}
	return nil
}

func (a *arrayOut) commit(x *exporter) error {
	h, err := a.Commit()
	if err != nil {
		return fmt.Errorf("distdgl: %s: %w", a.Name(), err)
	}
	x.written += h.DataOffset + h.DataBytes()
	return nil
}

// nodeColumn is one node-data array being chunked.
type nodeColumn struct {
	name  string
	dtype npy.DType
	tail  []int64
	spec  ChunkFileSpec
	cur   *arrayOut
	bytes []byte // the current batch's encoded values
}

// nodeData writes the node-data chunks: feat (the stored rows, float32
// or float16), label, and train/val/test masks (bool), each chunked by
// sizes. It scans nodes once, reading every source sequentially.
func (x *exporter) nodeData(sizes []int64) (map[string]ChunkFileSpec, []string, error) {
	n := x.m.NumNodes
	var cols []*nodeColumn
	var feat *storage.ArrayFile
	var rowBytes int64
	if x.m.FeatDim > 0 {
		e := x.m.File(storage.FileFeatures)
		if e == nil {
			return nil, nil, fmt.Errorf("%w: %s: feat_dim %d but no %s", storage.ErrMismatch, x.dir, x.m.FeatDim, storage.FileFeatures)
		}
		f, err := storage.OpenArrayFile(x.dir, e)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		feat = f
		d, _ := npy.ParseDType(e.DType)
		rowBytes = x.m.FeatDim * int64(d.Size())
		cols = append(cols, &nodeColumn{name: "feat", dtype: d, tail: []int64{x.m.FeatDim}})
	}
	var labels *intarray.Reader
	if e := x.m.File(storage.FileLabels); e != nil {
		r, err := intarray.Open(x.dir, e)
		if err != nil {
			return nil, nil, err
		}
		defer r.Close()
		labels = r
		cols = append(cols, &nodeColumn{name: "label", dtype: x.o.LabelDType})
	}
	// A relabelled copy's export speaks the copy's ids; each node's
	// original id travels with it as node data orig_id.
	var orig *intarray.Reader
	if x.m.RelabelledFrom != nil {
		e := x.m.File(storage.FileOrigIDs)
		if e == nil {
			return nil, nil, fmt.Errorf("%w: %s: relabelled, but the manifest lists no %s", storage.ErrMismatch, x.dir, storage.FileOrigIDs)
		}
		r, err := intarray.Open(x.dir, e)
		if err != nil {
			return nil, nil, err
		}
		defer r.Close()
		orig = r
		cols = append(cols, &nodeColumn{name: ColOrigID, dtype: npy.Int64})
	}
	var splits [3]*intarray.Reader
	var splitPos [3]int64
	for k, name := range []string{storage.FileTrain, storage.FileValid, storage.FileTest} {
		if e := x.m.File(name); e != nil {
			r, err := intarray.Open(x.dir, e)
			if err != nil {
				return nil, nil, err
			}
			defer r.Close()
			splits[k] = r
			cols = append(cols, &nodeColumn{name: [3]string{"train_mask", "val_mask", "test_mask"}[k], dtype: npy.Bool})
		}
	}
	chunk := x.o.chunkItems()
	if rowBytes > 0 {
		chunk = max(1, min(chunk, x.o.MemBytes/4/rowBytes))
	}
	lab := make([]int64, chunk)
	var labv []int64 // the current batch's labels, for the masks' count of -1
	if labels != nil {
		labv = make([]int64, chunk)
	}
	var prev [3]int64
	for k := range prev {
		prev[k] = -1
	}
	node := int64(0)
	// One chunk's files are open at a time: a failed export removes them
	// here (a defer per file would keep every chunk's writer, a 1 MiB
	// buffer and a descriptor, until the export ends).
	defer func() {
		for _, col := range cols {
			if col.cur != nil {
				col.cur.Abort()
			}
		}
	}()
	for c, size := range sizes {
		for _, col := range cols {
			rel := fmt.Sprintf("node_data/%s-%d.npy", col.name, c)
			if size == 0 {
				continue
			}
			a, err := x.createArray(rel, col.dtype, col.tail)
			if err != nil {
				return nil, nil, err
			}
			col.cur = a
			col.spec.Format = Format{Name: "numpy"}
			col.spec.Data = append(col.spec.Data, rel)
		}
		for end := node + size; node < end; {
			k := min(chunk, end-node)
			for _, col := range cols {
				var b []byte
				switch col.name {
				case "feat":
					b = grow(&col.bytes, int(k*rowBytes))
					if err := feat.ReadDataAt(b, node*rowBytes); err != nil {
						return nil, nil, err
					}
				case "label":
					if err := labels.Read(lab[:k], node); err != nil {
						return nil, nil, err
					}
					b = grow(&col.bytes, int(k)*col.dtype.Size())
					for i, v := range lab[:k] {
						if v < -1 || (x.m.NumClasses > 0 && v >= x.m.NumClasses) {
							return nil, nil, &storage.CorruptError{File: labels.Path(), Field: "labels", Index: node + int64(i), Offset: -1,
								Msg: fmt.Sprintf("class %d out of range [-1,%d)", v, x.m.NumClasses)}
						}
						putInt(b, col.dtype, i, v)
					}
					copy(labv, lab[:k])
				case ColOrigID:
					if err := orig.Read(lab[:k], node); err != nil {
						return nil, nil, err
					}
					b = grow(&col.bytes, int(k)*8)
					for i, v := range lab[:k] {
						if v < 0 || v >= n {
							return nil, nil, &storage.CorruptError{File: orig.Path(), Field: "orig_ids", Index: node + int64(i), Offset: -1,
								Msg: fmt.Sprintf("id %d out of range [0,%d)", v, n)}
						}
						putInt(b, npy.Int64, i, v)
					}
				default:
					s := map[string]int{"train_mask": 0, "val_mask": 1, "test_mask": 2}[col.name]
					b = grow(&col.bytes, int(k))
					clear(b)
					r := splits[s]
					for splitPos[s] < r.Len() {
						v, err := r.At(splitPos[s])
						if err != nil {
							return nil, nil, err
						}
						if v <= prev[s] || v >= n {
							return nil, nil, &storage.CorruptError{File: r.Path(), Field: col.name, Index: splitPos[s], Offset: -1,
								Msg: fmt.Sprintf("node %d not in (%d, %d): splits are strictly ascending node ids", v, prev[s], n)}
						}
						if v >= node+k {
							break
						}
						b[v-node] = 1
						if labv != nil && labv[v-node] == -1 {
							x.unlabelled[s]++
						}
						prev[s] = v
						splitPos[s]++
					}
				}
				if err := col.cur.write(b); err != nil {
					return nil, nil, err
				}
			}
			node += k
			x.bar.Add(k)
		}
		for _, col := range cols {
			if size == 0 {
				continue
			}
			if err := col.cur.commit(x); err != nil {
				return nil, nil, err // the deferred Abort removes what is left
			}
			col.cur = nil
		}
	}
	out := map[string]ChunkFileSpec{}
	var names []string
	for _, col := range cols {
		out[col.name] = col.spec
		names = append(names, col.name)
	}
	return out, names, nil
}

func grow(b *[]byte, n int) []byte {
	if cap(*b) < n {
		*b = make([]byte, n)
	}
	return (*b)[:n]
}

// putInt stores v as element i of b, little-endian int32 or int64.
func putInt(b []byte, d npy.DType, i int, v int64) {
	if d == npy.Int32 {
		u := uint32(int32(v))
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		return
	}
	u := uint64(v)
	for j := range 8 {
		b[8*i+j] = byte(u >> (8 * j))
	}
}
