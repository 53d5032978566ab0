package partition

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
)

// File names inside DIR/partitions/<name>/.
const (
	ManifestName       = "manifest.json"
	FileStats          = "stats.json"
	FilePart           = "part.npy"
	FileCross          = "cross.npy"
	FileMembersOffsets = "members_offsets.npy"
	FileMembers        = "members.npy"
	FileTrainOffsets   = "train_offsets.npy"
	FileTrainMembers   = "train_members.npy"
	FileAdjIndptr      = "adj_indptr.npy"
	FileAdjIndices     = "adj_indices.npy"
)

// FormatName and FormatVersion identify the partition format.
const (
	FormatName    = "ssdgnn-partitions"
	FormatVersion = 1
)

// Manifest is the content of manifest.json.
type Manifest struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	Name     string `json:"name"`
	Method   Method `json:"method"`
	K        int    `json:"k"`
	NumNodes int64  `json:"num_nodes"`
	NumEdges int64  `json:"num_edges"`
	NumTrain int64  `json:"num_train"`
	// Files lists every file; stats.json has dtype "json" and no shape.
	Files []storage.FileEntry `json:"files"`
}

// File returns the entry named name, or nil.
func (m *Manifest) File(name string) *storage.FileEntry {
	for i := range m.Files {
		if m.Files[i].Name == name {
			return &m.Files[i]
		}
	}
	return nil
}

// Stats describes a partitioning; it is stats.json.
type Stats struct {
	Name     string `json:"name"`
	Method   Method `json:"method"`
	K        int    `json:"k"`
	K1       int    `json:"k1"`
	K2       int    `json:"k2"`
	NumNodes int64  `json:"num_nodes"`
	NumEdges int64  `json:"num_edges"`
	NumTrain int64  `json:"num_train"`
	// EdgeCut is the fraction of directed edges whose endpoints lie in
	// different final parts; CutEdges is their number.
	EdgeCut    float64 `json:"edge_cut"`
	CutEdges   int64   `json:"cut_edges"`
	MaxNodes   int64   `json:"max_nodes"`
	AvgNodes   float64 `json:"avg_nodes"`
	MaxTrain   int64   `json:"max_train"`
	AvgTrain   float64 `json:"avg_train"`
	EmptyParts int     `json:"empty_parts"`
	// WallSeconds covers the whole Run; AssignSeconds only the computation
	// of part ids (for metis including writing the graph file).
	WallSeconds   float64 `json:"wall_seconds"`
	AssignSeconds float64 `json:"assign_seconds"`
	// PeakRSSBytes is VmHWM of this process during Run (reset at its
	// start). It includes resident pages of the mmapped dataset.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// FilterBytes is the Bloom filter memory allocated (level-1 filters
	// plus one set of level-2 filters per worker; the level-1 filters are
	// garbage once level 2 starts, so the peak is at most this); 0 if
	// none.
	FilterBytes int64 `json:"filter_bytes"`
	Passes      int   `json:"passes"`
	// Refine is the number of refinement rounds requested (0: none),
	// RefineMoves the number of nodes they moved and RefineSeconds their
	// time (included in AssignSeconds).
	Refine        int     `json:"refine,omitempty"`
	RefineMoves   int64   `json:"refine_moves,omitempty"`
	RefineSeconds float64 `json:"refine_seconds,omitempty"`
	// The other phases of AssignSeconds: OrderSeconds computes the stream
	// order (BFS), Level1Seconds and Level2Seconds run each level's
	// streams (level 2 with its per-part setup). WriteSeconds is the rest
	// of WallSeconds: the cut count and every output file. Zero where a
	// method has no such phase.
	OrderSeconds  float64 `json:"order_seconds,omitempty"`
	Level1Seconds float64 `json:"level1_seconds,omitempty"`
	Level2Seconds float64 `json:"level2_seconds,omitempty"`
	WriteSeconds  float64 `json:"write_seconds"`
	Seed          int64   `json:"seed"`
	Order         string  `json:"order"`
	// OrderWhy is why OrderAuto (the default) resolved to Order: the
	// memory it found. It depends on the machine (cgroup limit,
	// MemAvailable), so the same seed on another machine, or with other
	// memory free, may stream in the other order and give another
	// partition; passing Order itself gives this one anywhere. Empty when
	// the order was given.
	OrderWhy      string  `json:"order_why,omitempty"`
	Gamma         float64 `json:"gamma"`
	Epsilon       float64 `json:"epsilon"`
	Lambda        float64 `json:"lambda"`
	FalsePositive float64 `json:"false_positive"`
	Workers       int     `json:"workers"`
	// External* describe the gpmetis child process (metis only).
	ExternalSeconds      float64 `json:"external_seconds,omitempty"`
	ExternalPeakRSSBytes int64   `json:"external_peak_rss_bytes,omitempty"`
}

// arrayWriter streams one .npy file atomically and checksums its data.
type arrayWriter struct {
	name string
	f    *npy.File
	h    *xxhash.Digest
	buf  []byte
	err  error
	ctx  context.Context // checked every ctxEvery writes
	n    int
}

// ctxEvery is how many writes an arrayWriter makes between checks of its
// context.
const ctxEvery = 1024

func createArray(dir, name string, d npy.DType) (*arrayWriter, error) {
	f, err := npy.Create(filepath.Join(dir, name), d, nil)
	if err != nil {
		return nil, fmt.Errorf("partition: %s: %w", name, err)
	}
	return &arrayWriter{name: name, f: f, h: xxhash.New()}, nil
}

func (a *arrayWriter) write(p []byte) {
	if a.err != nil || len(p) == 0 {
		return
	}
	if a.n++; a.ctx != nil && a.n%ctxEvery == 0 {
		if a.err = a.ctx.Err(); a.err != nil {
			return
		}
	}
	a.h.Write(p)
	if _, err := a.f.Write(p); err != nil {
		a.err = fmt.Errorf("partition: write %s: %w", a.name, err)
	}
}

func (a *arrayWriter) int64s(v []int64) {
	a.write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*8))
}

func (a *arrayWriter) int32s(v []int32) {
	a.write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*4))
}

// stream writes the values gen passes to put, in batches of 8192, for
// arrays made one value at a time.
func stream[T int32 | int64](a *arrayWriter, gen func(put func(T))) {
	buf := make([]T, 0, 8192)
	flush := func() {
		a.write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*int(unsafe.Sizeof(buf[0]))))
		buf = buf[:0]
	}
	gen(func(v T) {
		if buf = append(buf, v); len(buf) == cap(buf) {
			flush()
		}
	})
	flush()
}

// ids writes node ids as int32 or int64.
func (a *arrayWriter) ids(d npy.DType, l storage.NodeList) {
	if d == npy.Int32 && l.Int32() != nil {
		a.int32s(l.Int32())
		return
	}
	if d == npy.Int64 && l.Int64() != nil {
		a.int64s(l.Int64())
		return
	}
	n := l.Len()
	if cap(a.buf) < n*8 {
		a.buf = make([]byte, n*8)
	}
	if d == npy.Int32 {
		out := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(a.buf))), n)
		for i := range n {
			out[i] = int32(l.At(i))
		}
		a.write(a.buf[:n*4])
		return
	}
	out := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(a.buf))), n)
	for i := range n {
		out[i] = l.At(i)
	}
	a.write(a.buf[:n*8])
}

func (a *arrayWriter) commit() (storage.FileEntry, error) {
	if a.err != nil {
		a.f.Abort()
		return storage.FileEntry{}, a.err
	}
	hdr, err := a.f.Commit()
	if err != nil {
		return storage.FileEntry{}, fmt.Errorf("partition: %s: %w", a.name, err)
	}
	return storage.FileEntry{
		Name: a.name, DType: hdr.DType.String(), Shape: hdr.Shape,
		Bytes: hdr.DataOffset + hdr.DataBytes(), DataOffset: hdr.DataOffset,
		Checksum: storage.FormatChecksum(a.h.Sum64()),
	}, nil
}

// writeArray writes a whole in-memory array.
func writeArray(ctx context.Context, dir, name string, fill func(a *arrayWriter), d npy.DType) (storage.FileEntry, error) {
	if err := ctx.Err(); err != nil {
		return storage.FileEntry{}, err
	}
	a, err := createArray(dir, name, d)
	if err != nil {
		return storage.FileEntry{}, err
	}
	a.ctx = ctx
	fill(a)
	return a.commit()
}

// crossCounts computes per-node cross-partition neighbour counts with
// workers goroutines over node ranges.
func crossCounts(d *storage.Dataset, part []int32, workers int) ([]int32, int64) {
	n := int64(len(part))
	cross := make([]int32, n)
	sums := make([]int64, max(workers, 1))
	sweepRanges(n, workers, func(w int, lo, hi int64) {
		var s int64
		for v := lo; v < hi; v++ {
			nb := d.Neighbors(v)
			same, _ := sameNeighbors(nb, part, v)
			c := int32(nb.Len()) - same
			cross[v] = c
			s += int64(c)
		}
		sums[w] = s
	})
	var cut int64
	for _, s := range sums {
		cut += s
	}
	return cross, cut
}

// sameNeighbors counts v's neighbours u (nb) with part[u] == part[v], and
// how many of them are v itself (self loops).
func sameNeighbors(nb storage.NodeList, part []int32, v int64) (same, loops int32) {
	pv := part[v]
	if x := nb.Int32(); x != nil {
		for _, u := range x {
			if part[u] == pv {
				same++
				if int64(u) == v {
					loops++
				}
			}
		}
		return same, loops
	}
	for i := range nb.Len() {
		if u := nb.At(i); part[u] == pv {
			same++
			if u == v {
				loops++
			}
		}
	}
	return same, loops
}

// sweepRanges calls fn(w, lo, hi) on workers goroutines (at least one),
// worker w taking the w-th of workers contiguous ranges of [0, n), and
// returns when all have.
func sweepRanges(n int64, workers int, fn func(w int, lo, hi int64)) {
	workers = max(workers, 1)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*int64(w)/int64(workers), n*int64(w+1)/int64(workers)
		wg.Add(1)
		go func() {
			defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	wg.Wait()
}

// write produces every output file, stats.json, and the manifest last.
func write(d *storage.Dataset, dir string, o *Options, res result, start time.Time, assignSecs float64) (Stats, error) {
	n := d.NumNodes()
	k := res.k
	train := d.TrainIdx()
	st := Stats{
		Name: o.Name, Method: o.Method, K: k, K1: res.k1, K2: res.k2,
		NumNodes: n, NumEdges: d.NumEdges(), NumTrain: int64(len(train)),
		AssignSeconds: assignSecs, FilterBytes: res.filterBytes,
		Passes: o.Passes, Seed: o.Seed, Order: o.Order, OrderWhy: o.autoWhy, Gamma: o.Gamma, Epsilon: o.Epsilon,
		Lambda: o.Lambda, FalsePositive: o.FalsePositive, Workers: o.Workers,
		ExternalSeconds: res.extSeconds, ExternalPeakRSSBytes: res.extRSS,
		Refine: res.refine, RefineMoves: res.refineMoves, RefineSeconds: res.refineSecs,
		OrderSeconds: res.orderSecs, Level1Seconds: res.level1Secs, Level2Seconds: res.level2Secs,
	}
	// Record only what the method read (Method.Streams).
	if o.Method != Fennel {
		st.FalsePositive = 0
	}
	if !o.Method.Streams() {
		st.Passes, st.Order, st.OrderWhy, st.Gamma, st.Epsilon, st.Lambda = 0, "", "", 0, 0, 0
	}
	part := res.part
	for v, p := range part {
		if p < 0 || int(p) >= k {
			return Stats{}, fmt.Errorf("partition: internal error: node %d has part %d of %d", v, p, k)
		}
	}
	var files []storage.FileEntry
	add := func(e storage.FileEntry, err error) error {
		if err == nil {
			files = append(files, e)
		}
		return err
	}
	if err := add(writeArray(o.ctx, dir, FilePart, func(a *arrayWriter) { a.int32s(part) }, npy.Int32)); err != nil {
		return Stats{}, err
	}
	cross, cut := crossCounts(d, part, o.Workers)
	st.CutEdges = cut
	if st.NumEdges > 0 {
		st.EdgeCut = float64(cut) / float64(st.NumEdges)
	}
	if err := add(writeArray(o.ctx, dir, FileCross, func(a *arrayWriter) { a.int32s(cross) }, npy.Int32)); err != nil {
		return Stats{}, err
	}
	cross = nil

	toff, tmem := groupIDs(part, train, k)
	if err := add(writeArray(o.ctx, dir, FileTrainOffsets, func(a *arrayWriter) { a.int64s(toff) }, npy.Int64)); err != nil {
		return Stats{}, err
	}
	if err := add(writeArray(o.ctx, dir, FileTrainMembers, func(a *arrayWriter) { a.int64s(tmem) }, npy.Int64)); err != nil {
		return Stats{}, err
	}
	off, mem := group(part, k)
	if err := add(writeArray(o.ctx, dir, FileMembersOffsets, func(a *arrayWriter) { a.int64s(off) }, npy.Int64)); err != nil {
		return Stats{}, err
	}
	if err := add(writeArray(o.ctx, dir, FileMembers, func(a *arrayWriter) { a.int64s(mem) }, npy.Int64)); err != nil {
		return Stats{}, err
	}
	for p := range k {
		sz, tz := off[p+1]-off[p], toff[p+1]-toff[p]
		st.MaxNodes = max(st.MaxNodes, sz)
		st.MaxTrain = max(st.MaxTrain, tz)
		if sz == 0 {
			st.EmptyParts++
		}
	}
	st.AvgNodes = float64(n) / float64(k)
	st.AvgTrain = float64(len(train)) / float64(k)
	toff, tmem, part = nil, nil, nil

	// Adjacency in members order: indptr then indices. Members order
	// visits the CSR at random.
	if err := adviseCSR(d, ""); err != nil {
		return Stats{}, err
	}
	err := add(writeArray(o.ctx, dir, FileAdjIndptr, func(a *arrayWriter) {
		stream(a, func(put func(int64)) {
			var acc int64
			put(0)
			for _, v := range mem {
				acc += d.Degree(v)
				put(acc)
			}
		})
	}, npy.Int64))
	if err != nil {
		return Stats{}, err
	}
	idt := storage.IndicesDType(n)
	err = add(writeArray(o.ctx, dir, FileAdjIndices, func(a *arrayWriter) {
		for _, v := range mem {
			a.ids(idt, d.Neighbors(v))
		}
	}, idt))
	if err != nil {
		return Stats{}, err
	}
	mem = nil

	st.WallSeconds = time.Since(start).Seconds()
	st.WriteSeconds = st.WallSeconds - st.AssignSeconds
	st.PeakRSSBytes = memstat.PeakRSS()
	js, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return Stats{}, fmt.Errorf("partition: %w", err)
	}
	js = append(js, '\n')
	if err := atomicfile.WriteFile(filepath.Join(dir, FileStats), js); err != nil {
		return Stats{}, err
	}
	files = append(files, storage.FileEntry{Name: FileStats, DType: "json", Bytes: int64(len(js)),
		Checksum: storage.FormatChecksum(xxhash.Sum64(js))})
	m := Manifest{Format: FormatName, Version: FormatVersion, Name: o.Name, Method: o.Method, K: k,
		NumNodes: n, NumEdges: d.NumEdges(), NumTrain: int64(len(train)), Files: files}
	mj, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return Stats{}, fmt.Errorf("partition: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ManifestName), append(mj, '\n')); err != nil {
		return Stats{}, err
	}
	return st, nil
}
