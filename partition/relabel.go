package partition

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	bits64 "math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// DefaultRelabelMem is the default RelabelOptions.MemBytes.
const DefaultRelabelMem = 256 << 20

// relabelFixed is what Relabel allocates whatever the graph: the 1 MiB
// buffers of up to five open array writers, the sequential read chunks
// and the per-part counters' slack.
const relabelFixed = 16 << 20

// relabelChunk is the size of each sequential read.
const relabelChunk = 1 << 20

// ErrRelabelMem is returned when RelabelOptions.MemBytes cannot hold the
// old→new id map; the message names the minimum.
var ErrRelabelMem = errors.New("partition: relabel: memory budget too small")

// RelabelOrder is the order of the nodes within each part of a
// relabelled dataset. Every order keeps the parts themselves as
// contiguous id ranges in part order.
type RelabelOrder string

const (
	// RelabelByDegree numbers each part's nodes by descending in-degree (the
	// number of neighbour lists that name the node), ties by ascending
	// source id. A node's in-degree is how many lists a sampler can draw
	// it from, so the rows a batch needs cluster at the front of each
	// part's range, and the read planner's merged reads carry fewer rows
	// nobody asked for. The default.
	RelabelByDegree RelabelOrder = "degree"
	// RelabelByHeat numbers each part's nodes by descending
	// RelabelOptions.Heat (e.g. a profile's feature counts), ties by
	// ascending source id.
	RelabelByHeat RelabelOrder = "heat"
	// RelabelByID keeps each part's nodes in ascending source id: new ids are
	// exactly the partitioning's members order.
	RelabelByID RelabelOrder = "id"
)

// DefaultRelabelOrder is the order an empty RelabelOptions.Order means.
const DefaultRelabelOrder = RelabelByDegree

// RelabelOrders lists the orders Relabel accepts, the default first.
var RelabelOrders = []RelabelOrder{DefaultRelabelOrder, RelabelByHeat, RelabelByID}

// RelabelOptions configures Relabel. A nil *RelabelOptions means the
// defaults.
type RelabelOptions struct {
	// Order is the order of the nodes within each part (default
	// DefaultRelabelOrder).
	Order RelabelOrder
	// Heat, for RelabelByHeat, is one number per source node (len N): a
	// larger number comes first within its part. The caller's slice
	// counts against MemBytes.
	Heat []uint32
	// MemBytes is the whole process's memory budget (default 256 MiB),
	// split by internal/membudget: membudget.ReserveBytes of it is left
	// to the runtime and the page cache, the Go soft memory limit is
	// MemBytes less membudget.PageCacheBytes while Relabel runs, and what
	// Relabel allocates fits in the rest (Fit.Alloc). With the limit at
	// MemBytes itself, `relabel --mem 64MiB` of a 1M-node graph reached
	// 55 MiB of anonymous memory and was OOM-killed in two of three cold
	// runs in a 64 MiB cgroup (sweep 27). The old→new id
	// map (4 bytes a node, 8 from 2^31 nodes) must fit in it beside
	// 16 MiB of buffers; RelabelMinMem says how much that is. The rest
	// sizes the feature gather window.
	MemBytes int64
	// Force replaces a dataset in OUT, which stays whole until the new
	// copy is complete (storage.CreateOptions.Force).
	Force bool
	// Progress receives one task, in bytes written (nil: none).
	Progress progress.Reporter
	// Logger receives log records (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate checks the options on their own (the heat values' length and
// the memory minimum depend on the dataset and are checked by Relabel).
func (o *RelabelOptions) Validate() error {
	order := o.Order
	if order == "" {
		order = DefaultRelabelOrder
	}
	switch {
	case o.MemBytes < 0:
		return opterr.Errorf(ErrOptions, "relabel: %s %d, want >= 0 (0: the default)", opterr.Field("MemBytes"), o.MemBytes)
	case !slices.Contains(RelabelOrders, order):
		return opterr.Errorf(ErrOptions, "relabel: unknown %s %q (want one of %v)", opterr.Field("Order"), o.Order, RelabelOrders)
	case (order == RelabelByHeat) != (o.Heat != nil):
		return fmt.Errorf("%w: relabel: order %q with %d heat values: heat is given exactly for order %q", ErrOptions, order, len(o.Heat), RelabelByHeat)
	}
	return nil
}

// RelabelStats describes a Relabel run.
type RelabelStats struct {
	Source       string `json:"source"`
	Out          string `json:"out"`
	Partitioning string `json:"partitioning"`
	K            int    `json:"k"`
	NumNodes     int64  `json:"num_nodes"`
	NumEdges     int64  `json:"num_edges"`
	Order        string `json:"order"`
	MemBytes     int64  `json:"mem_bytes"`
	MapBytes     int64  `json:"map_bytes"`
	// KeyBytes is the within-part order's share of MemBytes: the sort
	// keys (4 bytes a node) and the largest part's members, positions
	// and adjacency block. 0 for RelabelByID.
	KeyBytes     int64   `json:"key_bytes"`
	WindowRows   int64   `json:"window_rows"`
	BytesRead    int64   `json:"bytes_read"`
	BytesWritten int64   `json:"bytes_written"`
	ReadCalls    int64   `json:"read_calls"`
	CSRSeconds   float64 `json:"csr_seconds"`
	FeatSeconds  float64 `json:"feature_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
	// PeakRSSBytes is VmHWM of the process, reset at the start.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

// RelabelMinMem is the least RelabelOptions.MemBytes Relabel accepts for
// a dataset of n nodes in RelabelByID; the other orders need
// RelabelMinMemFor's.
func RelabelMinMem(n int64) int64 { return membudget.Least(relabelFixed + mapBytes(n) + 1<<20) }

// RelabelMinMemFor is the least RelabelOptions.MemBytes Relabel accepts
// for dataset d, partitioning p and within-part order o (empty: the
// default).
func RelabelMinMemFor(d *storage.Dataset, p *Partitioning, o RelabelOrder) int64 {
	return RelabelMinMem(d.NumNodes()) + keyBytes(d, p, o)
}

// keyBytes is what a within-part order holds beside the id map: 4 bytes
// a node of sort keys, and for the largest part (by nodes, and by
// adjacency bytes) its members and their positions, 16 bytes a node, and
// its adjacency block.
func keyBytes(d *storage.Dataset, p *Partitioning, o RelabelOrder) int64 {
	if o == RelabelByID {
		return 0
	}
	var nodes, block int64
	isz := p.adjElemBytes()
	for q := range p.K() {
		nodes = max(nodes, p.off[q+1]-p.off[q])
		block = max(block, (p.adjPtr[p.off[q+1]]-p.adjPtr[p.off[q]])*isz)
	}
	return 4*d.NumNodes() + 16*nodes + block
}

// adjElemBytes is the size of one entry of adj_indices.npy.
func (p *Partitioning) adjElemBytes() int64 {
	if p.adj64 != nil {
		return 8
	}
	return 4
}

func mapBytes(n int64) int64 {
	if n < 1<<31 {
		return 4 * n
	}
	return 8 * n
}

// Relabel writes to the new directory out a partition-major copy of the
// dataset d: the nodes of part 0 of the partitioning p come first, then
// part 1's, and so on, so that every part is a contiguous id range and
// part.npy never decreases. Within a part the nodes are in
// RelabelOptions.Order: by descending in-degree (the default), by
// descending heat, or in ascending old id, ties always by ascending old
// id. Features, CSR, labels and splits are rewritten; orig_ids.npy (new →
// old) and new_ids.npy (old → new) are stored; p is carried over under
// the same name (members are 0..N-1, the adjacency files are hard links
// of indptr.npy and indices.npy) so that out can be trained on at once.
// Neighbour lists keep their source order (mapped); in RelabelByID order
// a sampler that draws neighbour positions draws the same edges on both
// datasets.
//
// Memory is bounded by MemBytes: the structures that grow with the graph
// are the old→new map and, for the orders other than RelabelByID, the
// sort keys and the largest part's members and adjacency block
// (RelabelMinMemFor); everything else streams or gathers feature rows in
// windows. The dataset manifest is written last, so an error or a
// cancelled ctx leaves no dataset in out.
func Relabel(ctx context.Context, d *storage.Dataset, p *Partitioning, out string, o *RelabelOptions) (*RelabelStats, error) {
	start := time.Now()
	memstat.ResetPeak()
	var opt RelabelOptions
	if o != nil {
		opt = *o
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.MemBytes == 0 {
		opt.MemBytes = DefaultRelabelMem
	}
	if opt.Order == "" {
		opt.Order = DefaultRelabelOrder
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	n := d.NumNodes()
	if opt.Heat != nil && int64(len(opt.Heat)) != n {
		return nil, fmt.Errorf("%w: %d heat values for %d nodes", ErrMismatch, len(opt.Heat), n)
	}
	if p.man.NumNodes != n || p.man.NumEdges != d.NumEdges() {
		return nil, fmt.Errorf("%w: partitioning %s is for %d nodes / %d edges, dataset has %d / %d",
			ErrMismatch, p.dir, p.man.NumNodes, p.man.NumEdges, n, d.NumEdges())
	}
	// Before any work: a partitioning of another split would be carried
	// into a copy whose partitioning no reader accepts (sweep 28, P1).
	if err := p.CheckTrain(d); err != nil {
		return nil, err
	}
	if need := RelabelMinMemFor(d, p, opt.Order); opt.MemBytes < need {
		// Naming the option (--mem on the command line), in units: the
		// refusal read "given 1048576" and named no flag.
		return nil, opterr.Errorf(ErrRelabelMem, "%d nodes in order %q need at least %d bytes (%s) for the id map, sort keys and buffers; %s is %s",
			n, opt.Order, need, bytefmt.Up(need), opterr.Field("MemBytes"), bytefmt.Down(opt.MemBytes))
	}
	if err := outpath.CheckDir("OUT", out, d.Dir()); err != nil {
		return nil, fmt.Errorf("partition: relabel never writes in place: %w", err)
	}
	// Hold the Go heap to the budget less the page cache's room: the
	// windows are garbage between phases, and the default GC target would
	// let the heap reach twice the live data.
	defer membudget.Of(opt.MemBytes).Hold()()
	b, err := storage.Create(out, &storage.CreateOptions{Force: opt.Force})
	if err != nil {
		return nil, err
	}
	finished, wroteDevice := false, false
	var r *relabeler
	defer func() {
		if finished {
			return
		}
		if b.Replacing() {
			b.Abort() // a replaced copy stays as it was
			return
		}
		// A new OUT: what this run committed goes, so an interrupted
		// or failed relabel leaves no arrays (hundreds of MiB) behind.
		for _, name := range b.Committed() {
			_ = os.Remove(filepath.Join(out, name))
		}
		if wroteDevice {
			_ = os.Remove(filepath.Join(out, storage.FileDevice))
		}
		if r != nil && r.madePartDir {
			_ = os.RemoveAll(Dir(out, p.man.Name))
			_ = os.Remove(filepath.Join(out, DirName)) // only when empty
		}
	}()
	r = &relabeler{ctx: ctx, d: d, p: p, b: b, n: n, opt: &opt, src: d.IDMap(),
		st: &RelabelStats{Source: d.Dir(), Out: out, Partitioning: p.man.Name, K: p.man.K, Order: string(opt.Order),
			NumNodes: n, NumEdges: d.NumEdges(), MemBytes: opt.MemBytes, MapBytes: mapBytes(n), KeyBytes: keyBytes(d, p, opt.Order)}}
	total := 16*n + 8*(n+1) + d.NumEdges()*int64(storage.IndicesDType(n).Size()) + n*d.FeatRowBytes()
	r.task = progress.Or(opt.Progress).Start("relabel", total, progress.Bytes)
	defer r.task.Done()
	if err := r.run(); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		// A replaced source reads as damaged files: say what happened.
		return nil, cmp.Or(p.Unchanged(), datasetUnchanged(d), err)
	}
	m := *d.Manifest()
	m.Files = nil
	m.RelabelledFrom = &storage.Relabelling{Dir: d.Dir(), Name: m.Name,
		ManifestChecksum: d.ManifestChecksum(), Partitioning: p.man.Name, K: p.man.K,
		Order: string(opt.Order)}
	if from := d.Manifest().RelabelledFrom; from != nil {
		m.RelabelledFrom.Original = cmp.Or(from.Original, from.Dir)
		m.RelabelledFrom.OriginalChecksum = cmp.Or(from.OriginalChecksum, from.ManifestChecksum)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The source's files were opened again by path as the run went on
	// (the adjacency, cross counts, features, labels, splits): a
	// partitioning or dataset replaced meanwhile gave some of them, which
	// no check of the copy would catch. Refuse rather than commit it.
	if err := p.Unchanged(); err != nil {
		return nil, err
	}
	if err := datasetUnchanged(d); err != nil {
		return nil, err
	}
	// The copy lies beside its source, on the same device as a rule: the
	// probe's read costs (device.json) carry over, so that training on
	// the copy prices its reads as on the source. A damaged one is
	// left behind (train then says so on the source, not the copy).
	if dp, err := storage.ReadDeviceProfile(d.Dir()); err == nil {
		if err := storage.WriteDeviceProfile(b.Dir(), dp); err != nil {
			return nil, err
		}
		wroteDevice = true
	}
	if err := b.Finish(m); err != nil {
		return nil, err
	}
	finished = true
	if om, err := storage.LoadManifest(out); err == nil {
		for _, f := range om.Files {
			r.st.BytesWritten += f.Bytes
		}
	}
	r.st.WallSeconds = time.Since(start).Seconds()
	r.st.PeakRSSBytes = memstat.PeakRSS()
	return r.st, nil
}

// datasetUnchanged checks that d's directory still holds the dataset
// Open read, as Partitioning.Unchanged does for a partitioning.
func datasetUnchanged(d *storage.Dataset) error {
	return storage.ManifestUnchanged(d.Dir(), d.ManifestChecksum())
}

type relabeler struct {
	ctx  context.Context
	d    *storage.Dataset
	p    *Partitioning
	b    *storage.Builder
	n    int64
	opt  *RelabelOptions
	st   *RelabelStats
	task progress.Task

	// madePartDir says partitioning() created the carried-over
	// partitioning's directory (removed when the run fails).
	madePartDir bool

	// src is the source's own map when the source is itself relabelled
	// (nil otherwise): the maps written are composed with it.
	src   *storage.IDMap
	map32 []int32 // old → new, N < 2^31
	map64 []int64 // old → new otherwise
}

func (r *relabeler) run() error {
	t0 := time.Now()
	if err := r.graph(); err != nil {
		return err
	}
	r.st.CSRSeconds = time.Since(t0).Seconds()
	t1 := time.Now()
	if r.d.FeatDim() > 0 {
		e := r.d.Manifest().File(storage.FileFeatures)
		dt, _ := npy.ParseDType(e.DType)
		w, err := r.b.CreateArray(storage.FileFeatures, dt, []int64{r.d.Manifest().FeatDim})
		if err != nil {
			return err
		}
		if err := r.gather(r.d.Dir(), e, r.d.FeatRowBytes(), w.Write); err != nil {
			w.Abort()
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
	}
	r.st.FeatSeconds = time.Since(t1).Seconds()
	if e := r.d.Manifest().File(storage.FileLabels); e != nil {
		w, err := r.b.CreateArray(storage.FileLabels, npy.Int32, nil)
		if err != nil {
			return err
		}
		if err := r.gather(r.d.Dir(), e, 4, w.Write); err != nil {
			w.Abort()
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
	}
	newTrain, err := r.splits()
	if err != nil {
		return err
	}
	err = r.partitioning(newTrain)
	r.map32, r.map64 = nil, nil
	runtime.GC()
	debug.FreeOSMemory()
	return err
}

// graph writes new_ids.npy, orig_ids.npy and the CSR in new ids: in
// RelabelByID order from part.npy and the streamed adjacency (idMaps,
// csr), otherwise from each part's members sorted by key and its
// adjacency block (orderedMaps, csrOrdered).
func (r *relabeler) graph() error {
	if r.opt.Order == RelabelByID {
		if err := r.idMaps(); err != nil {
			return err
		}
	} else {
		keys := r.opt.Heat
		if keys == nil {
			var err error
			if keys, err = r.inDegrees(); err != nil {
				return err
			}
		}
		if err := r.orderedMaps(keys); err != nil {
			return err
		}
	}
	ow, err := r.b.CreateArray(storage.FileOrigIDs, npy.Int64, nil)
	if err != nil {
		return err
	}
	defer ow.Abort()
	cw, err := r.b.CreateCSR(r.n)
	if err != nil {
		return err
	}
	defer cw.Abort()
	if r.opt.Order == RelabelByID {
		err = r.csr(ow, cw)
	} else {
		err = r.csrOrdered(ow, cw)
	}
	if err != nil {
		return err
	}
	if err := ow.Commit(); err != nil {
		return err
	}
	return cw.Commit()
}

// seqReader reads an array's data section front to back in chunks.
type seqReader struct {
	af   *storage.ArrayFile
	off  int64
	buf  []byte
	st   *RelabelStats
	elem int
}

func (r *relabeler) openSeq(dir string, e *storage.FileEntry, elem int) (*seqReader, error) {
	af, err := storage.OpenArrayFile(dir, e)
	if err != nil {
		return nil, err
	}
	return &seqReader{af: af, buf: make([]byte, relabelChunk), st: r.st, elem: elem}, nil
}

// next returns the next chunk of whole elements (at most relabelChunk
// bytes), or io.EOF at the end.
func (s *seqReader) next() ([]byte, error) {
	left := s.af.DataBytes() - s.off
	if left <= 0 {
		return nil, io.EOF
	}
	k := min(left, int64(len(s.buf)))
	k -= k % int64(s.elem)
	if err := s.af.ReadDataAt(s.buf[:k], s.off); err != nil {
		return nil, err
	}
	s.off += k
	s.st.BytesRead += k
	s.st.ReadCalls++
	return s.buf[:k], nil
}

func (s *seqReader) close() { s.af.Close() }

// each calls fn with every chunk in order, stopping at the first error of
// the read, of ctx or of fn.
func (s *seqReader) each(ctx context.Context, fn func([]byte) error) error {
	for {
		b, err := s.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
}

// int64Stream yields an int64 array one element at a time.
type int64Stream struct {
	s   *seqReader
	cur []int64
	i   int64 // index of the next element
}

func (r *relabeler) openInt64s(name string) (*int64Stream, error) {
	s, err := r.openSeq(r.p.dir, r.p.man.File(name), 8)
	if err != nil {
		return nil, err
	}
	return &int64Stream{s: s}, nil
}

func (s *int64Stream) next() (int64, error) {
	if len(s.cur) == 0 {
		b, err := s.s.next()
		if err == io.EOF {
			return 0, &CorruptError{File: s.s.af.Path, Index: s.i, Offset: -1, Msg: "array ends early"}
		}
		if err != nil {
			return 0, err
		}
		s.cur = npy.AsInt64(b)
	}
	x := s.cur[0]
	s.cur = s.cur[1:]
	s.i++
	return x, nil
}

// idMaps computes old → new from part.npy alone: walking old ids in
// ascending order, node u of part q gets the next id of q's range, which
// is its rank in (part, old id) order. It writes new_ids.npy and keeps
// the map in memory for csr.
func (r *relabeler) idMaps() error {
	k := r.p.man.K
	next := slices.Clone(r.p.off[:k])
	if r.n < 1<<31 {
		r.map32 = make([]int32, r.n)
	} else {
		r.map64 = make([]int64, r.n)
	}
	s, err := r.openSeq(r.p.dir, r.p.man.File(FilePart), 4)
	if err != nil {
		return err
	}
	defer s.close()
	var u int64
	err = s.each(r.ctx, func(b []byte) error {
		for _, q := range npy.AsInt32(b) {
			if q < 0 || int(q) >= k {
				return &CorruptError{File: s.af.Path, Index: u, Offset: -1, Msg: fmt.Sprintf("part %d not in [0,%d)", q, k)}
			}
			v := next[q]
			if v >= r.p.off[q+1] {
				return &CorruptError{File: s.af.Path, Index: u, Offset: -1,
					Msg: fmt.Sprintf("part %d has more nodes than members_offsets gives it (%d)", q, r.p.off[q+1]-r.p.off[q])}
			}
			next[q]++
			if r.map32 != nil {
				r.map32[u] = int32(v)
			} else {
				r.map64[u] = v
			}
			u++
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.writeNewIDs(s.af.Path)
}

// writeNewIDs writes new_ids.npy from the map, entry o being the new id
// of node o of the original dataset: the source's node o, or, when the
// source is itself relabelled (r.src), the source's node that its own
// new_ids gives for o, so that the maps of a copy of a copy still speak
// the original ids. A node the map left unset is a CorruptError of from,
// the partition file the map came from.
func (r *relabeler) writeNewIDs(from string) error {
	w, err := r.b.CreateArray(storage.FileNewIDs, npy.Int64, nil)
	if err != nil {
		return err
	}
	defer w.Abort()
	out := make([]int64, 0, relabelChunk/8)
	for o := range r.n {
		if o%relabelChunk == 0 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		u := o
		if r.src != nil {
			if u, err = r.src.New(o); err != nil {
				return err
			}
		}
		v := r.newID(u)
		if v < 0 {
			return &CorruptError{File: from, Index: -1, Offset: -1, Msg: fmt.Sprintf("node %d is a member of no part", u)}
		}
		out = append(out, v)
		if len(out) == cap(out) || o == r.n-1 {
			if err := w.WriteInt64s(out); err != nil {
				return err
			}
			r.task.Add(int64(len(out)) * 8)
			out = out[:0]
		}
	}
	return w.Commit()
}

// origOf is the id orig_ids.npy stores for the source's node u: u, or
// its original id when the source is itself relabelled.
func (r *relabeler) origOf(u int64) (int64, error) {
	if r.src == nil {
		return u, nil
	}
	return r.src.Orig(u)
}

// inDegrees counts how many neighbour lists of d name each node, in one
// sequential pass over indices.npy (saturating at 2^32-1).
func (r *relabeler) inDegrees() ([]uint32, error) {
	e := r.d.Manifest().File(storage.FileIndices)
	isz := 4
	if e.DType == "int64" {
		isz = 8
	}
	deg := make([]uint32, r.n)
	s, err := r.openSeq(r.d.Dir(), e, isz)
	if err != nil {
		return nil, err
	}
	defer s.close()
	var i int64
	bump := func(x int64) error {
		if x < 0 || x >= r.n {
			return &storage.CorruptError{File: s.af.Path, Field: "indices", Index: i, Offset: -1,
				Msg: fmt.Sprintf("neighbour %d out of range [0,%d)", x, r.n)}
		}
		if deg[x] != ^uint32(0) {
			deg[x]++
		}
		i++
		return nil
	}
	err = s.each(r.ctx, func(b []byte) error {
		if isz == 4 {
			for _, x := range npy.AsInt32(b) {
				if err := bump(int64(x)); err != nil {
					return err
				}
			}
			return nil
		}
		for _, x := range npy.AsInt64(b) {
			if err := bump(x); err != nil {
				return err
			}
		}
		return nil
	})
	return deg, err
}

// orderedMaps computes old → new for the orders other than RelabelByID: part
// q's members, sorted by descending keys (stable, so ties keep ascending
// old id), get q's id range in that order. Each member is checked to be
// in range, of part q (part.npy) and seen once, so damaged partition
// files give a CorruptError rather than a wrong map. It then writes
// new_ids.npy from the map.
func (r *relabeler) orderedMaps(keys []uint32) error {
	const unset = -1
	if r.n < 1<<31 {
		r.map32 = make([]int32, r.n)
		for i := range r.map32 {
			r.map32[i] = unset
		}
	} else {
		r.map64 = make([]int64, r.n)
		for i := range r.map64 {
			r.map64[i] = unset
		}
	}
	memPath := filepath.Join(r.p.dir, FileMembers)
	var buf []int64
	for q := range r.p.man.K {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		lo := r.p.off[q]
		buf = append(buf[:0], r.p.Members(q)...)
		for i, u := range buf {
			if u < 0 || u >= r.n || int(r.p.part[u]) != q || r.newID(u) != unset {
				return &CorruptError{File: memPath, Index: lo + int64(i), Offset: -1,
					Msg: fmt.Sprintf("member %d of part %d is out of range, of another part in part.npy, or repeated", u, q)}
			}
		}
		slices.SortStableFunc(buf, func(a, b int64) int { return cmp.Compare(keys[b], keys[a]) })
		for i, u := range buf {
			if r.map32 != nil {
				r.map32[u] = int32(lo + int64(i))
			} else {
				r.map64[u] = lo + int64(i)
			}
		}
	}
	return r.writeNewIDs(memPath)
}

// csrOrdered writes orig_ids.npy and the CSR in new ids part by part:
// each part's adjacency block (contiguous in adj_indices.npy, in members
// order) is read with one pread and its lists written in new-id order.
func (r *relabeler) csrOrdered(ow *storage.ArrayWriter, cw *storage.CSRWriter) error {
	af, err := storage.OpenArrayFile(r.p.dir, r.p.man.File(FileAdjIndices))
	if err != nil {
		return err
	}
	defer af.Close()
	isz := r.p.adjElemBytes()
	var block []byte
	var pos []int64 // pos[j] = position in the part's members of its j-th node in new order
	var nbrs, origs []int64
	for q := range r.p.man.K {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		lo, hi := r.p.off[q], r.p.off[q+1]
		ptr := r.p.adjPtr[lo : hi+1]
		members := r.p.members[lo:hi]
		size := (ptr[len(ptr)-1] - ptr[0]) * isz
		if cap(block) < int(size) {
			block = make([]byte, size)
		}
		block = block[:size]
		if err := af.ReadDataAt(block, ptr[0]*isz); err != nil {
			return err
		}
		r.st.BytesRead += size
		r.st.ReadCalls++
		pos = slices.Grow(pos[:0], len(members))[:len(members)]
		for i := range pos {
			pos[i] = -1
		}
		for i, u := range members {
			j := r.newID(u) - lo
			if j < 0 || j >= hi-lo || pos[j] != -1 {
				return &CorruptError{File: filepath.Join(r.p.dir, FileMembers), Index: lo + int64(i), Offset: -1,
					Msg: fmt.Sprintf("member %d disagrees with the id map of part %d", u, q)}
			}
			pos[j] = int64(i)
		}
		origs = origs[:0]
		for j, i := range pos {
			a, b := ptr[i]-ptr[0], ptr[i+1]-ptr[0]
			if a < 0 || b < a || b*isz > size {
				return &CorruptError{File: filepath.Join(r.p.dir, FileAdjIndptr), Index: lo + i, Offset: -1,
					Msg: fmt.Sprintf("offsets %d..%d outside part %d's block", ptr[i], ptr[i+1], q)}
			}
			nbrs = nbrs[:0]
			for e := a; e < b; e++ {
				var x int64
				if isz == 4 {
					x = int64(int32(binary.LittleEndian.Uint32(block[e*4:])))
				} else {
					x = int64(binary.LittleEndian.Uint64(block[e*8:]))
				}
				if x < 0 || x >= r.n {
					return &CorruptError{File: af.Path, Index: ptr[0] + e, Offset: -1, Msg: fmt.Sprintf("neighbour %d out of range [0,%d)", x, r.n)}
				}
				nbrs = append(nbrs, r.newID(x))
			}
			if err := cw.Append(lo+int64(j), nbrs); err != nil {
				return err
			}
			o, err := r.origOf(members[i])
			if err != nil {
				return err
			}
			origs = append(origs, o)
			r.task.Add(8 + int64(len(nbrs))*isz)
		}
		if err := ow.WriteInt64s(origs); err != nil {
			return err
		}
		r.task.Add(int64(len(origs)) * 8)
	}
	return nil
}

func (r *relabeler) newID(u int64) int64 {
	if r.map32 != nil {
		return int64(r.map32[u])
	}
	return r.map64[u]
}

// csr writes orig_ids.npy (a copy of members.npy, checked against the
// map) and the CSR in new ids from the partitioning's adjacency, which
// already lists the neighbour lists in members order, i.e. new-id order.
func (r *relabeler) csr(ow *storage.ArrayWriter, cw *storage.CSRWriter) error {
	mem, err := r.openInt64s(FileMembers)
	if err != nil {
		return err
	}
	defer mem.s.close()
	ptr, err := r.openInt64s(FileAdjIndptr)
	if err != nil {
		return err
	}
	defer ptr.s.close()
	ae := r.p.man.File(FileAdjIndices)
	isz := 4
	if ae.DType == "int64" {
		isz = 8
	}
	adj, err := r.openSeq(r.p.dir, ae, isz)
	if err != nil {
		return err
	}
	defer adj.close()
	var pending []byte // adjacency bytes read but not consumed
	var adjIdx int64   // index of pending[0] in adj_indices
	origBuf := make([]int64, 0, 8192)
	var nbrs []int64
	prev, err := ptr.next()
	if err != nil {
		return err
	}
	if prev != 0 {
		return &CorruptError{File: ptr.s.af.Path, Index: 0, Offset: -1, Msg: fmt.Sprintf("starts at %d, want 0", prev)}
	}
	for v := range r.n {
		if v%(1<<16) == 0 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		u, err := mem.next()
		if err != nil {
			return err
		}
		if u < 0 || u >= r.n || r.newID(u) != v {
			return &CorruptError{File: mem.s.af.Path, Index: v, Offset: -1,
				Msg: fmt.Sprintf("member %d disagrees with part.npy (not the node ranked %d in (part, id) order)", u, v)}
		}
		o, err := r.origOf(u)
		if err != nil {
			return err
		}
		origBuf = append(origBuf, o)
		if len(origBuf) == cap(origBuf) {
			if err := ow.WriteInt64s(origBuf); err != nil {
				return err
			}
			r.task.Add(int64(len(origBuf)) * 8)
			origBuf = origBuf[:0]
		}
		end, err := ptr.next()
		if err != nil {
			return err
		}
		if end < prev || end > r.p.man.NumEdges {
			return &CorruptError{File: ptr.s.af.Path, Index: v + 1, Offset: -1, Msg: fmt.Sprintf("offset %d after %d (edges %d)", end, prev, r.p.man.NumEdges)}
		}
		nbrs = nbrs[:0]
		for deg := end - prev; deg > 0; {
			if len(pending) == 0 {
				if pending, err = adj.next(); err != nil {
					if err == io.EOF {
						err = &CorruptError{File: adj.af.Path, Index: adjIdx, Offset: -1, Msg: "ends before adj_indptr says"}
					}
					return err
				}
			}
			take := min(deg, int64(len(pending)/isz))
			for i := range take {
				var x int64
				if isz == 4 {
					x = int64(*(*int32)(unsafe.Pointer(&pending[4*i])))
				} else {
					x = *(*int64)(unsafe.Pointer(&pending[8*i]))
				}
				if x < 0 || x >= r.n {
					return &CorruptError{File: adj.af.Path, Index: adjIdx + i, Offset: -1, Msg: fmt.Sprintf("neighbour %d out of range [0,%d)", x, r.n)}
				}
				nbrs = append(nbrs, r.newID(x))
			}
			pending = pending[take*int64(isz):]
			adjIdx += take
			deg -= take
		}
		if err := cw.Append(v, nbrs); err != nil {
			return err
		}
		r.task.Add(8 + int64(len(nbrs)*isz))
		prev = end
	}
	if prev != r.p.man.NumEdges {
		return &CorruptError{File: ptr.s.af.Path, Index: r.n, Offset: -1, Msg: fmt.Sprintf("ends at %d, want %d", prev, r.p.man.NumEdges)}
	}
	if err := ow.WriteInt64s(origBuf); err != nil {
		return err
	}
	r.task.Add(int64(len(origBuf)) * 8)
	return nil
}

// windowRows is how many rows of rowBytes one output window holds: half
// of gatherFree, what the budget leaves after the reserve, the fixed
// buffers, the id map and the caller's heat values (a quarter goes to
// the bucket buffers, the rest is the collector's slack).
func (r *relabeler) windowRows(rowBytes int64) int64 {
	free := r.gatherFree()
	w := min(max(free/2/rowBytes, 1), 1<<31) // a row's place in its window is a uint32
	if testWindowRows > 0 {
		w = testWindowRows
	}
	r.st.WindowRows = max(r.st.WindowRows, w)
	return w
}

// gatherFree is what the feature gather may use: what the budget's fit
// lets Relabel allocate less the fixed buffers, the id map and the caller's heat values
// (the sort keys Relabel computed itself are garbage by then;
// RelabelMinMemFor leaves at least 1 MiB).
func (r *relabeler) gatherFree() int64 {
	return max(membudget.Of(r.opt.MemBytes).Alloc()-relabelFixed-mapBytes(r.n)-4*int64(len(r.opt.Heat)), 1<<20)
}

// testWindowRows, when positive, overrides windowRows so that tests of
// small graphs cross window boundaries.
var testWindowRows int64

// gather writes the rows of array e (rowBytes each) in new-id order: row
// v of the output is row orig(v) of e. Reading e in new-id order would
// read every page of it once per window that touches it, so gather
// distributes instead, with two sequential passes and a temporary file in
// out: pass 1 reads e front to back and appends each row, tagged with its
// place in its window, to its window's bucket, a fixed region of the
// temporary file (every window but the last holds exactly W rows); pass 2
// reads each bucket front to back, places its rows in the window buffer
// and writes the window. Disk traffic is two reads and two writes of the
// array, all in large sequential pieces; the temporary file, the size of
// the array plus 4 bytes a row, is removed before gather returns.
func (r *relabeler) gather(dir string, e *storage.FileEntry, rowBytes int64, write func([]byte) (int, error)) error {
	if rowBytes == 0 || r.n == 0 {
		return nil
	}
	src, err := r.openSeq(dir, e, int(rowBytes))
	if err != nil {
		return err
	}
	defer src.close()
	if int64(len(src.buf)) < rowBytes {
		src.buf = make([]byte, rowBytes)
	}
	w := r.windowRows(rowBytes)
	nb := (r.n + w - 1) / w
	rec := 4 + rowBytes
	free := r.gatherFree()
	bufRecs := min(max(free/4/nb/rec, 1), max(relabelChunk/rec, 1))
	tmp, err := os.CreateTemp(r.b.Dir(), "relabel-buckets.tmp-*")
	if err != nil {
		return fmt.Errorf("partition: relabel: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	// Pass 1: scatter.
	bufs := make([][]byte, nb)
	fill := make([]int64, nb) // records written to each bucket
	flush := func(b int64) error {
		if len(bufs[b]) == 0 {
			return nil
		}
		if _, err := tmp.WriteAt(bufs[b], (b*w+fill[b])*rec); err != nil {
			return fmt.Errorf("partition: relabel: %w", err)
		}
		fill[b] += int64(len(bufs[b])) / rec
		bufs[b] = bufs[b][:0]
		return nil
	}
	var u int64
	err = src.each(r.ctx, func(chunk []byte) error {
		for off := int64(0); off < int64(len(chunk)); off += rowBytes {
			v := r.newID(u)
			b := v / w
			if bufs[b] == nil {
				bufs[b] = make([]byte, 0, bufRecs*rec)
			}
			var tag [4]byte
			binary.LittleEndian.PutUint32(tag[:], uint32(v-b*w))
			bufs[b] = append(append(bufs[b], tag[:]...), chunk[off:off+rowBytes]...)
			if int64(len(bufs[b])) >= bufRecs*rec {
				if err := flush(b); err != nil {
					return err
				}
			}
			u++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for b := range nb {
		if err := flush(b); err != nil {
			return err
		}
	}
	bufs = nil
	// Pass 2: place.
	out := make([]byte, min(w, r.n)*rowBytes)
	seen := make([]bool, min(w, r.n))
	rbuf := make([]byte, max(relabelChunk/rec, 1)*rec)
	for b := range nb {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		rows := min(w, r.n-b*w)
		if fill[b] != rows {
			return fmt.Errorf("partition: relabel: window %d received %d rows of %d (the id map is not a permutation)", b, fill[b], rows)
		}
		clear(seen[:rows])
		for done := int64(0); done < rows; {
			k := min(rows-done, int64(len(rbuf))/rec)
			if _, err := tmp.ReadAt(rbuf[:k*rec], (b*w+done)*rec); err != nil {
				return fmt.Errorf("partition: relabel: %w", err)
			}
			r.st.BytesRead += k * rec
			r.st.ReadCalls++
			for i := range k {
				p := rbuf[i*rec:]
				at := int64(binary.LittleEndian.Uint32(p))
				if at >= rows || seen[at] {
					return fmt.Errorf("partition: relabel: window %d: row %d placed twice or out of range (the id map is not a permutation)", b, at)
				}
				seen[at] = true
				copy(out[at*rowBytes:(at+1)*rowBytes], p[4:rec])
			}
			done += k
		}
		if _, err := write(out[:rows*rowBytes]); err != nil {
			return err
		}
		r.task.Add(rows * rowBytes)
	}
	return nil
}

// splits rewrites train/valid/test: one bitmap per split, indexed by new
// id (each old id u of the split sets bit new(u)), then the set bits in
// ascending order. It returns the number of training ids written
// (train_idx.npy becomes the carried partitioning's train_members.npy).
func (r *relabeler) splits() (int64, error) {
	names := []string{storage.FileTrain, storage.FileValid, storage.FileTest}
	var got int64
	for i, name := range names {
		e := r.d.Manifest().File(name)
		if e == nil {
			continue
		}
		bits := make([]uint64, (r.n+63)/64)
		s, err := r.openSeq(r.d.Dir(), e, 8)
		if err != nil {
			return 0, err
		}
		var idx int64
		err = s.each(r.ctx, func(b []byte) error {
			for _, u := range npy.AsInt64(b) {
				if u < 0 || u >= r.n {
					return &storage.CorruptError{File: s.af.Path, Field: name[:len(name)-4], Index: idx, Offset: -1,
						Msg: fmt.Sprintf("node id %d out of range [0,%d)", u, r.n)}
				}
				v := r.newID(u)
				if bits[v/64]&(1<<(v%64)) != 0 {
					return &storage.CorruptError{File: s.af.Path, Field: name[:len(name)-4], Index: idx, Offset: -1,
						Msg: fmt.Sprintf("node id %d repeated", u)}
				}
				bits[v/64] |= 1 << (v % 64)
				idx++
			}
			return nil
		})
		s.close()
		if err != nil {
			return 0, err
		}
		w, err := r.b.CreateArray(name, npy.Int64, nil)
		if err != nil {
			return 0, err
		}
		buf := make([]int64, 0, 8192)
		for wi, word := range bits {
			for ; word != 0; word &= word - 1 {
				buf = append(buf, int64(wi)*64+int64(bits64.TrailingZeros64(word)))
				if len(buf) == cap(buf) {
					if err := w.WriteInt64s(buf); err != nil {
						w.Abort()
						return 0, err
					}
					r.task.Add(int64(len(buf)) * 8)
					buf = buf[:0]
				}
			}
		}
		if err := w.WriteInt64s(buf); err != nil {
			w.Abort()
			return 0, err
		}
		r.task.Add(int64(len(buf)) * 8)
		if err := w.Commit(); err != nil {
			return 0, err
		}
		if i == 0 {
			got = idx
		}
	}
	return got, nil
}

// partitioning writes OUT/partitions/<name>/: the same parts as p, now
// contiguous ranges. The adjacency files are hard links of the new CSR
// (same 128-byte header and bytes: members order is id order).
func (r *relabeler) partitioning(numTrain int64) error {
	if numTrain != r.p.man.NumTrain {
		return fmt.Errorf("%w: partitioning %s has %d training nodes, the dataset %d", ErrMismatch, r.p.dir, r.p.man.NumTrain, numTrain)
	}
	name := r.p.man.Name
	dir := Dir(r.b.Dir(), name)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		r.madePartDir = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	if _, err := atomicfile.CleanTemps(dir); err != nil {
		return err
	}
	k := r.p.man.K
	var files []storage.FileEntry
	add := func(e storage.FileEntry, err error) error {
		if err == nil {
			files = append(files, e)
		}
		return err
	}
	err := add(writeArray(r.ctx, dir, FilePart, func(a *arrayWriter) {
		stream(a, func(put func(int32)) {
			for q := range k {
				for range r.p.off[q+1] - r.p.off[q] {
					put(int32(q))
				}
			}
		})
	}, npy.Int32))
	if err != nil {
		return err
	}
	cross, err := createArray(dir, FileCross, npy.Int32)
	if err != nil {
		return err
	}
	err = r.gather(r.p.dir, r.p.man.File(FileCross), 4, func(b []byte) (int, error) {
		cross.write(b)
		return len(b), cross.err
	})
	if err != nil {
		cross.f.Abort()
		return err
	}
	if err := add(cross.commit()); err != nil {
		return err
	}
	if err := add(writeArray(r.ctx, dir, FileMembersOffsets, func(a *arrayWriter) { a.int64s(r.p.off) }, npy.Int64)); err != nil {
		return err
	}
	if err := add(writeArray(r.ctx, dir, FileTrainOffsets, func(a *arrayWriter) { a.int64s(r.p.toff) }, npy.Int64)); err != nil {
		return err
	}
	err = add(writeArray(r.ctx, dir, FileMembers, func(a *arrayWriter) {
		stream(a, func(put func(int64)) {
			for v := range r.n {
				put(v)
			}
		})
	}, npy.Int64))
	if err != nil {
		return err
	}
	// Training members grouped by part, ascending within: the new
	// train_idx.npy itself, since parts are ascending id ranges.
	for _, l := range []struct{ from, to string }{
		{storage.FileTrain, FileTrainMembers},
		{storage.FileIndptr, FileAdjIndptr},
		{storage.FileIndices, FileAdjIndices},
	} {
		e, ok := r.b.Entry(l.from)
		if !ok {
			if l.from != storage.FileTrain {
				return fmt.Errorf("partition: relabel: internal error: %s not written", l.from)
			}
			// No split file: an empty train_members.npy.
			if err := add(writeArray(r.ctx, dir, FileTrainMembers, func(*arrayWriter) {}, npy.Int64)); err != nil {
				return err
			}
			continue
		}
		if err := linkOrCopy(filepath.Join(r.b.Dir(), l.from), filepath.Join(dir, l.to)); err != nil {
			return err
		}
		e.Name = l.to
		files = append(files, e)
	}
	st := r.p.stats
	js, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	js = append(js, '\n')
	if err := atomicfile.WriteFile(filepath.Join(dir, FileStats), js); err != nil {
		return err
	}
	files = append(files, storage.FileEntry{Name: FileStats, DType: "json", Bytes: int64(len(js)),
		Checksum: storage.FormatChecksum(xxhash.Sum64(js))})
	m := *r.p.man
	m.Files = files
	mj, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	for _, f := range files {
		r.st.BytesWritten += f.Bytes
	}
	return atomicfile.WriteFile(filepath.Join(dir, ManifestName), append(mj, '\n'))
}

// linkOrCopy makes dst a hard link of src, or a copy where the file
// system refuses links; either way dst appears atomically.
func linkOrCopy(src, dst string) error {
	os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return atomicfile.SyncDir(filepath.Dir(dst))
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	defer in.Close()
	af, err := atomicfile.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(af, in); err != nil {
		af.Abort()
		return fmt.Errorf("partition: copy %s: %w", src, err)
	}
	return af.Commit()
}

// MembersRange is the positions [lo, hi) of part q's members in
// members.npy. When Contiguous holds they are also part q's node ids.
func (p *Partitioning) MembersRange(q int) (lo, hi int64) { return p.off[q], p.off[q+1] }

// Contiguous checks that every part is one contiguous id range, in part
// order: part.npy never decreases and members.npy is 0..N-1. It is what
// a relabelled dataset promises of its partitioning.
func (p *Partitioning) Contiguous() error {
	for v := 1; v < len(p.part); v++ {
		if p.part[v] < p.part[v-1] {
			return &CorruptError{File: filepath.Join(p.dir, FilePart), Index: int64(v), Offset: -1,
				Msg: fmt.Sprintf("part %d after part %d: parts are not contiguous id ranges", p.part[v], p.part[v-1])}
		}
	}
	for i, v := range p.members {
		if v != int64(i) {
			return &CorruptError{File: filepath.Join(p.dir, FileMembers), Index: int64(i), Offset: -1,
				Msg: fmt.Sprintf("member %d, want %d in a partition-major dataset", v, i)}
		}
	}
	return nil
}
