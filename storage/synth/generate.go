package synth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/x448/float16"

	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Report describes a finished generation.
type Report struct {
	// Config is the configuration used, defaults filled in.
	Config Config
	// Nodes and Edges of the written graph; Edges counts directed entries
	// of the symmetric CSR (twice the undirected edges).
	Nodes, Edges int64
	// SelfLoopsDropped counts sampled stubs whose endpoint was the source
	// itself; DuplicatesDropped the directed pairs removed as repeats.
	SelfLoopsDropped, DuplicatesDropped int64
	// BytesWritten is the size of all dataset files, manifest included.
	BytesWritten int64
	// Workers is the number of generator workers that ran: Options.Workers,
	// or fewer when their chunks did not fit the budget (Options.MemBytes).
	Workers int
	// SortBytes is the external sorter's edge buffer: what Options.MemBytes
	// leaves beside the reserve and the workers' chunks.
	SortBytes int64
	// SortRuns and SpilledBytes describe the external sort; zero when the
	// edges fitted in SortBytes.
	SortRuns, SpilledBytes int64
	// Wall is the elapsed time; EdgesWall and FeaturesWall the two stages,
	// which run concurrently.
	Wall, EdgesWall, FeaturesWall time.Duration
	// PeakRSS is the process's resident-set high-water mark (VmHWM) in
	// bytes when Generate returned, 0 where the OS does not report it. It
	// covers the whole process lifetime, not only this call.
	PeakRSS int64
}

// Generate writes a synthetic dataset described by cfg into outDir (see
// the package doc for the model and the guarantees). On error no manifest
// is written, so the directory is not a dataset; temporary files are
// removed.
func Generate(outDir string, cfg Config, opts *Options) (Report, error) {
	return GenerateContext(context.Background(), outDir, cfg, opts)
}

// GenerateContext is Generate, stopped by ctx: within about a second of
// its cancellation it removes its temporary files and returns an error
// wrapping ctx.Err(), with no manifest written.
func GenerateContext(ctx context.Context, outDir string, cfg Config, opts *Options) (Report, error) {
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	c := cfg.withDefaults()
	b, err := storage.Create(outDir, &storage.CreateOptions{Force: opts != nil && opts.Force})
	if err != nil {
		return Report{}, err
	}
	finished := false
	defer func() {
		if !finished {
			b.Abort() // a replaced dataset stays as it was
		}
	}()
	if err := checkSpace(outDir, c, b.Replacing()); err != nil {
		return Report{}, err
	}
	o := opts.withDefaults(outDir)
	o.Workers = fitWorkers(o.MemBytes, o.Workers)
	// Hold the Go heap within the budget: at the default collector target
	// the garbage of the sort runs and feature chunks let the heap reach
	// twice the live data.
	defer membudget.Of(o.MemBytes).Hold()()
	if _, err := extsort.CleanStale(o.TempDir); err != nil {
		return Report{}, fmt.Errorf("synth: %w", err)
	}
	g := &generator{m: newModel(c), b: b, o: o}
	rep := Report{Config: c, Nodes: c.Nodes, Workers: o.Workers, SortBytes: sortBytes(o.MemBytes, o.Workers)}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var nodeErr error
	var na *nodeArrays
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.Now()
		na, nodeErr = g.writeNodeArrays(ctx)
		rep.FeaturesWall = time.Since(t)
		if nodeErr != nil {
			cancel()
		}
	}()
	t := time.Now()
	csr, es, edgeErr := g.writeEdges(ctx)
	rep.EdgesWall = time.Since(t)
	if edgeErr != nil {
		cancel()
	}
	wg.Wait()
	if err := firstErr(edgeErr, nodeErr); err != nil {
		if csr != nil {
			csr.Abort()
		}
		if na != nil {
			na.abort()
		}
		return Report{}, err
	}
	// Builder commits are not safe for concurrent use: commit here.
	if err := csr.Commit(); err != nil {
		na.abort()
		return Report{}, err
	}
	if err := na.commit(); err != nil {
		return Report{}, err
	}
	rep.Edges = csr.Edges()
	rep.SelfLoopsDropped = es.selfLoops
	rep.DuplicatesDropped = es.sort.Duplicates
	rep.SortRuns, rep.SpilledBytes = es.sort.Runs, es.sort.SpilledBytes
	err = b.Finish(storage.Manifest{
		Name:              c.Name,
		NumNodes:          c.Nodes,
		NumEdges:          rep.Edges,
		FeatDim:           int64(c.FeatDim),
		FeatDType:         c.FeatDType,
		NumClasses:        int64(c.Classes),
		Symmetrized:       true,
		Source:            source(c),
		SelfLoopsDropped:  rep.SelfLoopsDropped,
		DuplicatesDropped: rep.DuplicatesDropped,
		Seed:              c.Seed,
	})
	if err != nil {
		return Report{}, err
	}
	finished = true
	m, err := storage.LoadManifest(outDir)
	if err != nil {
		return Report{}, err
	}
	for _, f := range m.Files {
		rep.BytesWritten += f.Bytes
	}
	if fi, err := os.Stat(outDir + string(os.PathSeparator) + storage.ManifestName); err == nil {
		rep.BytesWritten += fi.Size()
	}
	rep.Wall = time.Since(start)
	rep.PeakRSS = memstat.PeakRSS()
	return rep, nil
}

// firstErr prefers a real failure over the context cancellation it caused
// in the other stage.
func firstErr(errs ...error) error {
	var ctxErr error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, context.Canceled) {
			ctxErr = err
			continue
		}
		return err
	}
	return ctxErr
}

// source is the manifest's provenance line.
func source(c Config) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return strings.Join([]string{
		"synth-dcsbm/v1",
		"avg_degree=" + f(c.AvgDegree),
		"communities=" + strconv.Itoa(c.Communities),
		"homophily=" + f(c.Homophily),
		"degree_exp=" + f(c.DegreeExp),
		"feat_noise=" + f(c.FeatNoise),
		"split=" + f(c.TrainFrac) + "/" + f(c.ValidFrac) + "/" + f(c.TestFrac),
	}, " ")
}

type generator struct {
	m *model
	b *storage.Builder
	o Options
}

type edgeStats struct {
	selfLoops int64
	sort      extsort.Stats
}

// edgeBatch is the output of one chunk of source nodes.
type edgeBatch struct {
	edges     []extsort.Edge
	nodes     int64
	selfLoops int64
}

// edgeChunkNodes is the number of source nodes per generation task,
// sized for about edgeBatchEdges directed edges.
func (g *generator) edgeChunkNodes() int64 {
	return max(1, int64(edgeBatchEdges/max(1, g.m.cfg.AvgDegree)))
}

// The generator's chunks, counted in WorkerBytes.
const (
	// edgeBatchEdges is the expected directed edges of one edge batch;
	// edgeBatchBytes its size (a batch's buffer is kept for reuse only
	// while it is at most twice that; one of hubs may be larger once).
	edgeBatchEdges = 1 << 16
	edgeBatchBytes = edgeBatchEdges * int64(unsafe.Sizeof(extsort.Edge{}))
	// featChunkBytes is the size of one chunk of feature rows.
	featChunkBytes = 1 << 20
)

// writeEdges samples the stubs in parallel, sorts and deduplicates them
// externally, and streams the CSR. The returned CSRWriter is not
// committed; on error it is nil or must be aborted by the caller.
func (g *generator) writeEdges(ctx context.Context) (csr *storage.CSRWriter, st edgeStats, err error) {
	s, err := extsort.New(&extsort.Options{TempDir: g.o.TempDir, MemBytes: sortBytes(g.o.MemBytes, g.o.Workers), Dedup: true})
	if err != nil {
		return nil, st, fmt.Errorf("synth: %w", err)
	}
	defer s.Close()
	n := g.m.cfg.Nodes
	task := g.o.Progress.Start("edges", 2*n, progress.Items)
	defer task.Done()

	// Generation: workers claim chunks of source nodes; the order in which
	// batches reach the sorter does not matter, its output is sorted.
	gctx, gcancel := context.WithCancel(ctx)
	defer gcancel()
	chunk := g.edgeChunkNodes()
	var nextChunk atomic.Int64
	batches := make(chan edgeBatch, g.o.Workers)
	free := make(chan []extsort.Edge, 2*g.o.Workers+1)
	var wg sync.WaitGroup
	for range g.o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gctx.Err() == nil {
				lo := nextChunk.Add(1)*chunk - chunk
				if lo >= n {
					return
				}
				var buf []extsort.Edge
				select {
				case buf = <-free:
				default:
				}
				b := g.genEdges(lo, min(lo+chunk, n), buf[:0])
				select {
				case batches <- b:
				case <-gctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(batches) }()
	var addErr error
	for b := range batches {
		if addErr == nil {
			if addErr = s.AddBatch(b.edges); addErr != nil {
				gcancel()
			}
			st.selfLoops += b.selfLoops
			task.Add(b.nodes)
		}
		if int64(cap(b.edges))*int64(unsafe.Sizeof(extsort.Edge{})) <= 2*edgeBatchBytes {
			select {
			case free <- b.edges:
			default:
			}
		}
	}
	if addErr != nil {
		return nil, st, fmt.Errorf("synth: sort edges: %w", addErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, st, err
	}

	task.Describe("edges: merge + write CSR")
	it, err := s.Sort()
	if err != nil {
		return nil, st, fmt.Errorf("synth: sort edges: %w", err)
	}
	defer it.Close()
	csr, err = g.b.CreateCSR(n)
	if err != nil {
		return nil, st, err
	}
	fail := func(err error) (*storage.CSRWriter, edgeStats, error) {
		csr.Abort()
		return nil, st, err
	}
	var count, reported int64
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if err := csr.AppendEdge(e.Src, e.Dst); err != nil {
			return fail(err)
		}
		if count++; count&(1<<16-1) == 0 {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			task.Add(e.Src - reported)
			reported = e.Src
		}
	}
	if err := it.Err(); err != nil {
		return fail(fmt.Errorf("synth: sort edges: %w", err))
	}
	task.Add(n - reported)
	st.sort = s.Stats()
	return csr, st, nil
}

// genEdges samples the out-stubs of nodes [lo, hi) and appends both
// directions of each, self loops dropped and counted.
func (g *generator) genEdges(lo, hi int64, buf []extsort.Edge) edgeBatch {
	m := g.m
	var self int64
	for u := lo; u < hi; u++ {
		r := newRNG(m.seed, streamEdges, uint64(u))
		cu, ku := m.community(uint64(u))
		for s := m.stubs(&r, ku); s > 0; s-- {
			v := int64(m.endpoint(&r, cu))
			if v == u {
				self++
				continue
			}
			buf = append(buf, extsort.Edge{Src: u, Dst: v}, extsort.Edge{Src: v, Dst: u})
		}
	}
	return edgeBatch{edges: buf, nodes: hi - lo, selfLoops: self}
}

// nodeArrays holds the uncommitted per-node arrays.
type nodeArrays struct {
	ws []*storage.ArrayWriter
}

func (a *nodeArrays) abort() {
	for _, w := range a.ws {
		w.Abort()
	}
}

func (a *nodeArrays) commit() error {
	for i, w := range a.ws {
		if err := w.Commit(); err != nil {
			for _, x := range a.ws[i+1:] {
				x.Abort()
			}
			return err
		}
	}
	return nil
}

// writeNodeArrays writes labels, splits and features. On error the
// returned arrays (possibly nil) must be aborted by the caller.
func (g *generator) writeNodeArrays(ctx context.Context) (*nodeArrays, error) {
	na := &nodeArrays{}
	create := func(name string, d npy.DType, tail []int64) (*storage.ArrayWriter, error) {
		w, err := g.b.CreateArray(name, d, tail)
		if err == nil {
			na.ws = append(na.ws, w)
		}
		return w, err
	}
	lw, err := create(storage.FileLabels, npy.Int32, nil)
	if err != nil {
		return na, err
	}
	var sw [3]*storage.ArrayWriter
	for i, name := range []string{storage.FileTrain, storage.FileValid, storage.FileTest} {
		if sw[i], err = create(name, npy.Int64, nil); err != nil {
			return na, err
		}
	}
	if err := g.writeLabelsSplits(ctx, lw, sw); err != nil {
		return na, err
	}
	fd, _ := npy.ParseDType(g.m.cfg.FeatDType)
	fw, err := create(storage.FileFeatures, fd, []int64{int64(g.m.cfg.FeatDim)})
	if err != nil {
		return na, err
	}
	return na, g.writeFeatures(ctx, fw)
}

// writeLabelsSplits streams labels.npy and the three split index arrays.
func (g *generator) writeLabelsSplits(ctx context.Context, lw *storage.ArrayWriter, sw [3]*storage.ArrayWriter) error {
	m := g.m
	const bufLen = 8192
	labels := make([]int32, 0, bufLen)
	var split [3][]int64
	for i := range split {
		split[i] = make([]int64, 0, bufLen)
	}
	c1 := m.cfg.TrainFrac
	c2 := c1 + m.cfg.ValidFrac
	c3 := c2 + m.cfg.TestFrac
	for v := int64(0); v < m.cfg.Nodes; v++ {
		labels = append(labels, m.label(uint64(v)))
		r := newRNG(m.seed, streamSplits, uint64(v))
		x, which := r.float64(), -1
		switch {
		case x < c1:
			which = 0
		case x < c2:
			which = 1
		case x < c3:
			which = 2
		}
		if which >= 0 {
			split[which] = append(split[which], v)
			if len(split[which]) == bufLen {
				if err := sw[which].WriteInt64s(split[which]); err != nil {
					return err
				}
				split[which] = split[which][:0]
			}
		}
		if len(labels) == bufLen {
			if err := lw.WriteInt32s(labels); err != nil {
				return err
			}
			labels = labels[:0]
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := lw.WriteInt32s(labels); err != nil {
		return err
	}
	for i := range split {
		if err := sw[i].WriteInt64s(split[i]); err != nil {
			return err
		}
	}
	return nil
}

// featChunk is one contiguous block of feature rows in flight.
type featChunk struct {
	lo, hi int64
	buf    []byte
	ready  chan struct{}
}

// writeFeatures produces feature rows in parallel chunks and writes them
// in order. Each row depends only on (Seed, v), so the bytes do not depend
// on Workers or scheduling. At most 2·Workers+2 chunks of about 1 MiB are
// alive.
func (g *generator) writeFeatures(ctx context.Context, fw *storage.ArrayWriter) error {
	m := g.m
	n := m.cfg.Nodes
	elem := 4
	if m.cfg.FeatDType == "float16" {
		elem = 2
	}
	rowBytes := int64(m.cfg.FeatDim * elem)
	rows := max(1, featChunkBytes/rowBytes)
	task := g.o.Progress.Start("features", n, progress.Items)
	defer task.Done()

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	W := g.o.Workers
	jobs := make(chan *featChunk)
	order := make(chan *featChunk, 2*W)
	free := make(chan []byte, 2*W+2)
	var wg sync.WaitGroup
	for range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, m.cfg.FeatDim)
			for ch := range jobs {
				if wctx.Err() == nil {
					g.genFeatures(ch, row, elem)
				}
				ch.ready <- struct{}{}
			}
		}()
	}
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		defer close(order)
		defer close(jobs)
		for lo := int64(0); lo < n; lo += rows {
			hi := min(lo+rows, n)
			var buf []byte
			select {
			case buf = <-free:
			default:
				buf = make([]byte, rows*rowBytes)
			}
			ch := &featChunk{lo: lo, hi: hi, buf: buf[:(hi-lo)*rowBytes], ready: make(chan struct{}, 1)}
			select {
			case jobs <- ch:
			case <-wctx.Done():
				return
			}
			order <- ch
		}
	}()
	var werr error
	for ch := range order {
		<-ch.ready
		if werr == nil {
			if werr = wctx.Err(); werr == nil {
				if _, werr = fw.Write(ch.buf); werr == nil {
					task.Add(ch.hi - ch.lo)
				}
			}
			if werr != nil {
				wcancel()
			}
		}
		select {
		case free <- ch.buf[:cap(ch.buf)]:
		default:
		}
	}
	wg.Wait()
	return werr
}

// genFeatures fills ch.buf with rows ch.lo..ch.hi: row v is
// signal·centroid(label(v)) + noise·ε, ε ~ approx N(0, I) from the row's
// own generator, in little-endian float32 or float16.
func (g *generator) genFeatures(ch *featChunk, row []float32, elem int) {
	m := g.m
	dim := len(row)
	words := (dim + 63) / 64
	signal, noise := m.signal, m.noise
	out := ch.buf
	for v := ch.lo; v < ch.hi; v++ {
		y := uint64(m.label(uint64(v)))
		r := newRNG(m.seed, streamFeatures, uint64(v))
		for w := 0; w < words; w++ {
			signs := hash3(m.seed, streamCentroid, y*uint64(words)+uint64(w))
			for j := w * 64; j < min(dim, w*64+64); j++ {
				s := signal
				if signs&(1<<(j&63)) != 0 {
					s = -signal
				}
				row[j] = s + noise*float32(normal(r.next()))
			}
		}
		if elem == 4 {
			copy(out, unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), 4*dim))
		} else {
			for j, x := range row {
				h := float16.Fromfloat32(x).Bits()
				out[2*j], out[2*j+1] = byte(h), byte(h>>8)
			}
		}
		out = out[elem*dim:]
	}
}

// Centroid returns the class centroid that Generate uses for label y
// under cfg: the expected feature row of a node of class y. It lets tests
// and benchmarks measure how much signal the features carry.
func Centroid(cfg Config, y int) ([]float32, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newModel(cfg.withDefaults())
	if y < 0 || y >= m.cfg.Classes {
		return nil, fmt.Errorf("%w: class %d out of range [0, %d)", ErrInvalidConfig, y, m.cfg.Classes)
	}
	dim := m.cfg.FeatDim
	words := (dim + 63) / 64
	out := make([]float32, dim)
	for j := range out {
		signs := hash3(m.seed, streamCentroid, uint64(y)*uint64(words)+uint64(j/64))
		out[j] = m.signal
		if signs&(1<<(j&63)) != 0 {
			out[j] = -m.signal
		}
	}
	return out, nil
}

// Planted exposes the hidden structure of a configuration: which
// community each node belongs to. It is cheap (O(1) memory, about 50 ns
// per query) and safe for concurrent use.
type Planted struct{ m *model }

// NewPlanted returns the planted structure Generate uses for cfg.
func NewPlanted(cfg Config) (*Planted, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Planted{newModel(cfg.withDefaults())}, nil
}

// Community returns the community of node v in [0, Nodes) and its rank
// within it (rank 0 has the largest expected degree).
func (p *Planted) Community(v int64) (community int, rank int64) {
	c, k := p.m.community(uint64(v))
	return int(c), int64(k)
}

// Label returns the label of node v: its community modulo Classes.
func (p *Planted) Label(v int64) int32 { return p.m.label(uint64(v)) }
