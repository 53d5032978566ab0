package train

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/f32"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/pidstamp"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/storage"
	"golang.org/x/sys/unix"
)

// Evaluation modes (Options.EvalMode).
const (
	// EvalLayerwise is exact inference: every layer is computed for every
	// node it is needed for, from full neighbourhoods, one layer at a time
	// (see "Exact layer-wise inference" in the package doc).
	EvalLayerwise = "layerwise"
	// EvalSampled is sampled inference with Options.EvalFanouts, in
	// batches of BatchSize targets.
	EvalSampled = "sampled"
)

// DefaultEvalMemBytes bounds a layer-wise chunk when neither
// Options.EvalMemBytes nor a training working set gives a bound.
const DefaultEvalMemBytes = 64 << 20

// minEvalMemBytes is the smallest chunk bound layer-wise inference accepts.
const minEvalMemBytes = 64 << 10

// LayerStats describes one layer of a layer-wise pass.
type LayerStats struct {
	Layer int `json:"layer"`
	// Rows are the destinations computed; Chunks the pieces they were
	// computed in (each under the chunk bound).
	Rows   int64 `json:"rows"`
	Chunks int   `json:"chunks"`
	// InputRows and InputBytes are the full-width input rows read and
	// transformed: on layer 0 the feature rows (through the feature
	// cache) of every node whose input is needed, each once, in id
	// order. The layers above transform their input as the layer below
	// computes it, so theirs are 0.
	InputRows  int64 `json:"input_rows"`
	InputBytes int64 `json:"input_bytes"`
	// GatherRows sums the chunks' source rows of the transformed input
	// (output width: a source feeding two chunks counts twice), and
	// GatherBytes are those read from the temporary arrays (0 when
	// InMemory says the layer's transformed input was held in memory).
	// Edges are the chunks' edges. A pushed layer (Pushed, Passes) has
	// no per-chunk gathers: its GatherRows and GatherBytes are what its
	// passes read, 0 without passes.
	GatherRows  int64 `json:"gather_rows"`
	GatherBytes int64 `json:"gather_bytes"`
	InMemory    bool  `json:"in_memory"`
	// Pushed says the layer's input was aggregated as the layer below
	// produced it (lwAcc): its chunks read one summed row per
	// destination, and Edges are the pushed edges.
	Pushed bool  `json:"pushed"`
	Edges  int64 `json:"edges"`
	// Passes are the sequential passes over the temporary array that
	// pushed its rows to blocks of destinations (lwChunker.runPasses);
	// GatherRows and GatherBytes are then what those passes read.
	Passes int `json:"passes"`
	// AggregateFirst says the layer pushed its input rows and transformed
	// the destinations' sums (lwStage.raw).
	AggregateFirst bool `json:"aggregate_first,omitempty"`
	// BytesWritten is what the layer wrote to temporary arrays: the
	// next layer's transformed input (layer 0 also its own).
	BytesWritten int64   `json:"bytes_written"`
	Seconds      float64 `json:"seconds"`
	// InputSeconds is layer 0's pass over the feature rows (included in
	// Seconds), PassSeconds the push passes' reading and adding (also).
	InputSeconds float64 `json:"input_seconds,omitempty"`
	PassSeconds  float64 `json:"pass_seconds,omitempty"`
}

// LayerwiseStats describes one layer-wise pass.
type LayerwiseStats struct {
	Targets int64 `json:"targets"`
	// Restricted says layers below the last computed only the targets'
	// receptive field (the (L−l)-hop in-neighbourhood), because it was
	// smaller than the graph; Layers[l].Rows says how much.
	Restricted bool         `json:"restricted"`
	Layers     []LayerStats `json:"layers"`
	// NeighborBytes are the neighbour-list bytes read (the receptive
	// field's expansion and every chunk's lists).
	NeighborBytes int64 `json:"neighbor_bytes"`
	// ChunkBytes is the pass's memory bound (Trainer.evalChunkBytes):
	// transformed rows held in memory plus one chunk's working memory.
	// FixedBytes is the pass's per-node state (receptive-field bitsets;
	// GCN's degrees are the trainer's), HeldBytes the most transformed rows held in memory
	// at once.
	ChunkBytes int64   `json:"chunk_bytes"`
	FixedBytes int64   `json:"fixed_bytes"`
	HeldBytes  int64   `json:"held_bytes"`
	Seconds    float64 `json:"seconds"`
}

// BytesRead is the input, temporary-array and neighbour-list bytes of the
// pass.
func (s *LayerwiseStats) BytesRead() int64 {
	n := s.NeighborBytes
	for _, l := range s.Layers {
		n += l.InputBytes + l.GatherBytes
	}
	return n
}

// TempBytes is what the pass wrote to its temporary arrays.
func (s *LayerwiseStats) TempBytes() int64 {
	var n int64
	for _, l := range s.Layers {
		n += l.BytesWritten
	}
	return n
}

// bitset is a set of node ids.
type bitset []uint64

func newBitset(n int64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) has(v int64) bool { return b[v>>6]&(1<<(uint(v)&63)) != 0 }
func (b bitset) set(v int64)      { b[v>>6] |= 1 << (uint(v) & 63) }
func (b bitset) clear(v int64)    { b[v>>6] &^= 1 << (uint(v) & 63) }
func (b bitset) bytes() int64     { return int64(len(b)) * 8 }
func (b bitset) each(fn func(int64)) {
	for w, x := range b {
		for x != 0 {
			fn(int64(w)<<6 | int64(bits.TrailingZeros64(x)))
			x &= x - 1
		}
	}
}

// eachOf calls fn for every member of set in ascending order (nil: every
// node below n) until fn fails, and returns its error.
func eachOf(set bitset, n int64, fn func(int64) error) error {
	if set == nil {
		for v := range n {
			if err := fn(v); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	set.each(func(v int64) {
		if err == nil {
			err = fn(v)
		}
	})
	return err
}

func (b bitset) count() int64 {
	var n int
	for _, x := range b {
		n += bits.OnesCount64(x)
	}
	return int64(n)
}

// evalChunkBytes is the bound on a layer-wise chunk: Options.EvalMemBytes,
// else three quarters of the training working set (free while
// evaluating), else DefaultEvalMemBytes.
//
// Not the whole working set: evaluation's chunks are large and each is
// garbage once the next starts, and at the full working set the live heap
// plus the runtime's own memory reached the soft limit. At 3 GiB / 1 GiB
// (docs/ooc.md) the peak live heap was 925 MiB against a plan of 896 and
// the process was OOM-killed in one run of two; the quarter is the
// collector's and the page cache's room.
func (t *Trainer) evalChunkBytes() int64 {
	b := t.o.EvalMemBytes
	if b <= 0 {
		b = t.mem.WorkingSetBytes * 3 / 4
	}
	if b <= 0 {
		b = DefaultEvalMemBytes
	}
	return max(b, minEvalMemBytes)
}

// checkEvalMem refuses, under a budget (Options.MemBytes), an
// Options.EvalMemBytes above the chunk bound the budget gives evaluation
// (evalChunkBytes' default: three quarters of the training working set,
// free while evaluating): it was taken as given, and train --mem 160MiB
// --eval-mem 1GiB in a 160 MiB cgroup was OOM-killed (400k nodes).
func checkEvalMem(o *Options, m MemoryUse) error {
	if o.MemBytes <= 0 || o.EvalMemBytes <= 0 {
		return nil
	}
	if most := m.WorkingSetBytes * 3 / 4; o.EvalMemBytes > most {
		return budgetErrorf("train", "--eval-mem %s exceeds what --mem %s leaves for layer-wise evaluation chunks, %s (three quarters of the training working set %s, free while evaluating): give --eval-mem %s or less, or a larger --mem",
			ibytes(o.EvalMemBytes), ibytes(o.MemBytes), ibytes(most), ibytes(m.WorkingSetBytes), ibytesDown(most))
	}
	return nil
}

// lwLayer is what layer-wise inference needs to know about a layer's
// shapes (from ModelConfig.layerSpecs).
type lwLayer struct {
	in    int // input width
	z     int // width of the transformed rows aggregation combines
	self  int // width of the destination's own term (SAGE), 0 otherwise
	out   int // output width
	work  int // widest per-destination intermediate (GAT's H·F), 0 otherwise
	heads int
}

func (m *Model) lwShapes() []lwLayer {
	specs := m.cfg.layerSpecs()
	s := make([]lwLayer, len(specs))
	for l, ls := range specs {
		w := ls.params[0] // w_self (SAGE: w_neigh has its shape), w
		s[l] = lwLayer{in: ls.in, z: w.cols, out: ls.params[len(ls.params)-1].cols}
		switch m.cfg.Kind {
		case ModelSAGE:
			s[l].self = w.cols
		case ModelGAT:
			s[l].work, s[l].heads = w.cols, m.cfg.Heads
		}
	}
	return s
}

// transformBytes estimates the working memory of transforming one input
// row (host and backend copies of the row and of its transformed rows).
func (s lwLayer) transformBytes() int64 {
	return int64(8*s.in + 8*(s.z+s.self) + 8)
}

// chunkBytes estimates one chunk's working memory: the transformed rows of
// its sources and destinations on the host and on the backend, the
// layer's intermediates and output, the next layer's transformed rows
// (next wide, host copy included), the chunk's neighbour ids and the
// block (host CSR, the backend's copy and its transpose, GAT's per-edge
// scores).
func (s lwLayer) chunkBytes(dst, src, edges int64, next int) int64 {
	perSrc := int64(8*s.z + 8)
	perDst := int64(8*s.self + 12*max(s.out, s.work) + 8*next + 16)
	perEdge := int64(8 + 12 + 8*s.heads)
	return src*perSrc + dst*perDst + edges*perEdge
}

// layerwise runs exact layer-wise inference for targets (sorted, unique)
// and calls fn with each chunk of targets (ascending) and its logits.
//
// It transforms before it aggregates (Model's layer.transform): one
// id-order pass reads the feature rows of every node whose input is
// needed, once each, and applies layer 0's weights; each layer then
// computes its destinations in id-order chunks over full
// in-neighbourhoods from those transformed rows (output width, not input
// width), and applies the next layer's weights to what it computed. The
// transformed rows are held in memory when they fit half the bound that is
// left, else in temporary .npy arrays under the dataset directory
// (os.TempDir when it is not writable), removed before it returns,
// cancelled or not.
func (t *Trainer) layerwise(ctx context.Context, targets []int64, fn func(ids []int64, logits kernels.Tensor) error) (*LayerwiseStats, error) {
	t0 := time.Now()
	d, m := t.d, t.model
	n := d.NumNodes()
	L := len(m.layers)
	st := &LayerwiseStats{Targets: int64(len(targets)), ChunkBytes: t.evalChunkBytes(), Layers: make([]LayerStats, L)}
	if len(targets) == 0 {
		return st, nil
	}
	// The backend's pooled tensor storage (kernels/cpu's store keeps up
	// to its peak for reuse) is training's working set, which the chunks
	// below are given (evalChunkBytes): hand it back first. Kept, it sat
	// beside the chunks, and a 160 MiB cgroup OOM-killed the evaluation
	// (40 MB pooled, 48 MB of chunks and stages).
	if p, ok := t.be.(interface{ ReleasePooled() }); ok {
		p.ReleasePooled()
	}
	// Most neighbour lists are read in id order, several times.
	defer d.ScanGraph()()
	idxBytes := int64(4)
	if d.Indices32() == nil {
		idxBytes = 8
	}
	// need[l]: the nodes whose layer-l output is needed; src: those whose
	// input is (need[0] and its in-neighbours). nil: all.
	need := make([]bitset, L)
	need[L-1] = newBitset(n)
	for _, v := range targets {
		need[L-1].set(v)
	}
	var src bitset
	// dstEdges[l]: the in-edges of layer l's destinations.
	dstEdges := make([]int64, L)
	for l := range dstEdges {
		dstEdges[l] = d.NumEdges()
	}
	for l := L - 1; l >= 0; l-- {
		if need[l] == nil {
			break
		}
		nb := newBitset(n)
		copy(nb, need[l])
		var edges int64
		need[l].each(func(v int64) {
			nl := d.Neighbors(v)
			edges += int64(nl.Len())
			for i := range nl.Len() {
				nb.set(nl.At(i))
			}
		})
		st.NeighborBytes += edges * idxBytes
		dstEdges[l] = edges
		if nb.count() < n {
			st.Restricted = true
			if l > 0 {
				need[l-1] = nb
			} else {
				src = nb
			}
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
	for _, b := range append(need, src) {
		st.FixedBytes += b.bytes()
	}
	// GCN normalises by the whole graph's degrees, which the trainer
	// holds (graphDegrees): a chunk's block carries its sources'
	// (kernels.Block.SrcDegrees).
	var outDeg []int32
	if m.cfg.Kind == ModelGCN {
		if t.deg == nil { // New loads them for a GCN model
			g, err := loadDegrees(ctx, d)
			if err != nil {
				return st, err
			}
			t.deg = g
		}
		outDeg = t.deg.out
	}
	seen := newBitset(n)
	st.FixedBytes += seen.bytes()
	memacct.Add(memacct.Inference, st.FixedBytes)
	defer memacct.Add(memacct.Inference, -st.FixedBytes)
	removeStaleLW(d.Dir())
	dir, err := os.MkdirTemp(d.Dir(), lwDirPrefix())
	if err != nil {
		removeStaleLW(os.TempDir())
		if dir, err = os.MkdirTemp("", "ssdgnn"+lwDirPrefix()); err != nil {
			return st, fmt.Errorf("train: layer-wise temporary directory: %w", err)
		}
	}
	defer os.RemoveAll(dir)
	shapes := m.lwShapes()
	bound := st.ChunkBytes
	// pos: each chunk's block index of a node (−1 between chunks), when
	// it takes at most an eighth of the bound, which gives it up: a chunk's
	// block is then built in time linear in its edges (lwChunker.flush),
	// else by sorting its neighbour ids and searching them per edge (on
	// a 50,000-node graph that was as long as the chunk's compute).
	var pos []int32
	if 4*n <= bound/8 {
		pos = make([]int32, n)
		for i := range pos {
			pos[i] = -1
		}
		bound -= 4 * n
		memacct.Add(memacct.Inference, 4*n)
		defer memacct.Add(memacct.Inference, -4*n)
	}
	// cur is layer l's transformed input, next layer l+1's.
	var cur, next *lwStage
	defer func() {
		cur.close()
		next.close()
	}()
	lt := time.Now()
	stage := func(l int, set bitset, avail int64) (*lwStage, error) {
		return t.newLWStage(dir, l, set, need[l], shapes[l], avail, dstEdges[l], outDeg, st)
	}
	if cur, err = stage(0, src, bound); err != nil {
		return st, err
	}
	in, transform := src, true
	if _, ok := cur.z.(*lwFeatures); ok {
		// Only the destinations' own terms (SAGE; GCN has none): the
		// passes read the feature rows.
		in, transform = need[0], cur.self != nil
	}
	if transform {
		if err := t.lwTransformInput(ctx, in, cur, shapes[0], max(bound-cur.heldBytes(), minEvalMemBytes), &st.Layers[0]); err != nil {
			return st, err
		}
	}
	for l := range L {
		ls := &st.Layers[l]
		ls.Layer = l
		ls.InMemory = cur.held > 0
		if acc, ok := cur.z.(*lwAcc); ok {
			ls.Pushed, ls.Edges = true, int64(len(acc.edges))
		}
		ls.AggregateFirst = cur.raw
		nextW := 0
		if l < L-1 {
			if next, err = stage(l+1, need[l], bound-cur.heldBytes()); err != nil {
				return st, err
			}
			nextW = shapes[l+1].z + shapes[l+1].self
		}
		st.HeldBytes = max(st.HeldBytes, cur.heldBytes()+next.heldBytes())
		shape := shapes[l]
		if cur.raw {
			shape.z += shape.in // a chunk holds the sums and their transform
		}
		dsts := n
		if need[l] != nil {
			dsts = need[l].count()
		}
		bar := t.o.Progress.Start(fmt.Sprintf("layer %d/%d", l+1, L), dsts, progress.Items)
		c := &lwChunker{t: t, l: l, shape: shape, nextW: nextW, budget: max(bound-cur.heldBytes()-next.heldBytes(), minEvalMemBytes),
			seen: seen, pos: pos, in: cur, out: next, outDeg: outDeg, idxBytes: idxBytes, st: st, ls: ls, fn: fn, bar: bar}
		var err error
		if cur.held == 0 && !cur.gather {
			err = c.runPasses(ctx, need[l])
		} else {
			err = c.run(ctx, need[l])
		}
		bar.Done()
		ls.Seconds = time.Since(lt).Seconds()
		lt = time.Now()
		cur.close()
		cur, next = next, nil
		if err != nil {
			return st, err
		}
	}
	st.Seconds = time.Since(t0).Seconds()
	return st, nil
}

// lwDirPrefix names a layer-wise pass's temporary directory: the process
// id in it lets a later pass tell a killed process's leftovers (SIGKILL
// skips the deferred removal; a 300,000-node pass leaves 111 MiB) from a
// running pass's.
func lwDirPrefix() string { return ".layerwise-" + pidstamp.Stamp() + "-" }

// removeStaleLW removes the layer-wise temporary directories in dir whose
// process no longer runs (pidstamp.Gone: a pid reused by another process
// does not keep one alive).
func removeStaleLW(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), ".layerwise-")
		if !ok {
			rest, ok = strings.CutPrefix(e.Name(), "ssdgnn.layerwise-")
		}
		if ok && e.IsDir() && pidstamp.Gone(rest) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// maxTransformBatch bounds the rows lwTransformInput reads at once: larger
// batches save nothing, the reads being in id order anyway.
const maxTransformBatch = 1 << 16

// lwTransformInput reads the feature rows of the nodes of set (nil: all)
// in id order, each once, in batches whose working memory stays under
// budget, and stores layer 0's transform of them in stage. The next batch
// is read and normalised while the backend transforms the last
// (lwReadAhead): two batches of input rows (the second counted in the
// batch size's bound and under memacct.Inference).
func (t *Trainer) lwTransformInput(ctx context.Context, set bitset, stage *lwStage, sh lwLayer, budget int64, ls *LayerStats) error {
	t0 := time.Now()
	defer func() { ls.InputSeconds = time.Since(t0).Seconds() }()
	d := t.d
	rows := d.NumNodes()
	if set != nil {
		rows = set.count()
	}
	// Per row: its transform's working memory, the second buffer's copy
	// of the row and its id, and the feature cache's gather scratch (kept
	// by the cache, counted there).
	perRow := sh.transformBytes() + 4*int64(sh.in) + 8 + featurecache.GatherCallBytes(d, 1, t.o.featureOptions())
	batch := int(max(1, min(rows, maxTransformBatch, budget/perRow)))
	second := int64(batch) * (4*int64(sh.in) + 8)
	memacct.Add(memacct.Inference, second)
	defer memacct.Add(memacct.Inference, -second)
	return lwReadAhead(ctx, set, d.NumNodes(), int64(batch), sh.in, nil,
		func(_ int64, ids []int64, xs []float32) error {
			if err := t.fc.GatherF32(ids, xs); err != nil {
				return err
			}
			t.normalize(xs)
			ls.InputRows += int64(len(ids))
			ls.InputBytes += int64(len(ids)) * d.FeatRowBytes()
			return nil
		},
		func(_ int64, ids []int64, xs []float32) error {
			return t.lwTransformBatch(stage, sh, ids, xs, ls)
		})
}

// lwTransformBatch transforms the input rows xs of ids on the backend and
// stores the result in stage. xs is the backend's until it returns (the
// CPU backend computes from it in place, without a copy).
func (t *Trainer) lwTransformBatch(stage *lwStage, sh lwLayer, ids []int64, xs []float32, ls *LayerStats) error {
	t.beMu.Lock()
	defer t.beMu.Unlock()
	tp := &tape{be: t.be}
	defer tp.free()
	return tp.run(func() {
		t.lwStore(tp, 0, tp.uploadHost(len(ids), sh.in, xs[:len(ids)*sh.in]), ids, stage, ls)
	})
}

// lwStore applies layer l's transform to h, the layer-l inputs of ids
// (ascending) on the backend, and writes the result to stage. It runs
// inside tape.run.
func (t *Trainer) lwStore(tp *tape, l int, h kernels.Tensor, ids []int64, stage *lwStage, ls *LayerStats) {
	// Only the layer's destinations need their own term: transform
	// computes it for those rows alone.
	selfIDs := ids
	var selfRows kernels.IntTensor
	if stage.self != nil && stage.selfSet != nil {
		selfIDs = selfIDs[:0:0]
		var pos []int32
		for i, v := range ids {
			if stage.selfSet.has(v) {
				selfIDs = append(selfIDs, v)
				pos = append(pos, int32(i))
			}
		}
		if len(selfIDs) < len(ids) {
			selfRows = tp.ints(pos)
		}
	}
	var z, self kernels.Tensor
	if stage.raw {
		// Aggregated first: the input rows as they are, the own term
		// for the destinations.
		z = h
		if stage.self != nil && len(selfIDs) > 0 {
			self = t.model.layers[l].(aggregateFirst).selfTerm(tp, h, selfRows)
		}
	} else {
		z, self = t.model.layers[l].transform(tp, h, selfRows)
	}
	for _, p := range []struct {
		x   kernels.Tensor
		dst lwRows
		ids []int64
		gat *lwGAT // the z rows of a pushed GAT layer: record their scores
	}{{z, stage.z, ids, stage.gat}, {self, stage.self, selfIDs, nil}} {
		if _, features := p.dst.(*lwFeatures); p.x == nil || len(p.ids) == 0 || features {
			continue // the passes read the feature rows themselves
		}
		host := make([]float32, p.x.Rows()*p.x.Cols())
		if err := tp.be.Download(host, p.x); err != nil {
			panic(tapeError{err})
		}
		w, err := p.dst.writeRows(p.ids, host)
		ls.BytesWritten += w
		if err != nil {
			panic(tapeError{err})
		}
		if p.gat != nil {
			p.gat.record(p.ids, host)
		}
	}
}

// lwRows holds rows of one width for a set of nodes. readRows and
// writeRows take ids in ascending order, and return the bytes they read
// from or wrote to storage.
type lwRows interface {
	readRows(ids []int64, dst []float32) (int64, error)
	writeRows(ids []int64, src []float32) (int64, error)
	close()
}

// lwStage is one layer's transformed input: z of every node whose layer
// input is needed (the layer's sources), and for SAGE self of the
// layer's destinations only (selfSet; nil: every node). held is what it
// holds in memory (counted under memacct.Inference), 0 when its rows are
// in files. pushed says z is an lwAcc: one summed row per destination
// instead of one row per source.
type lwStage struct {
	z, self lwRows
	selfSet bitset
	held    int64
	pushed  bool
	// width is z's row width: the layer's transformed width, or its input
	// width when raw says the layer aggregates its input first
	// (aggregateFirst) and transforms the destinations' sums.
	width int
	raw   bool
	// gather says chunks gather their sources' rows from z (an lwArray)
	// rather than pushing them in sequential passes (lwChunker.runPasses).
	gather bool
	// gat is a pushed GAT layer's destination scores (files), aux the
	// memory they hold beside held (counted under memacct.Inference).
	gat *lwGAT
	aux int64
}

// lwGAT is what pushing a GAT layer's transformed rows in passes needs
// beside them: the layer's attention vectors, and the score al·z of each
// of the layer's destinations, recorded as the layer below writes their
// rows (lwStore), before any pass reads them. A pass weights the edge
// u → i by LeakyReLU(al·z_i + ar·z_u) per head (lwAccGAT); the source
// scores are computed from the rows as each pass reads them.
type lwGAT struct {
	heads, f int
	al, ar   []float32 // the layer's attention vectors (heads·f each)
	dst      *lwIndex  // the layer's destinations
	score    []float32 // al·z per destination rank and head
}

// newLWGAT makes layer l's scores for its dstRows destinations dst (nil:
// every node).
func (t *Trainer) newLWGAT(l int, dst bitset, dstRows int64) (*lwGAT, error) {
	gl := t.model.layers[l].(*gatLayer)
	g := &lwGAT{heads: gl.heads, f: gl.f, dst: newLWIndex(dst), score: make([]float32, dstRows*int64(gl.heads)),
		al: make([]float32, gl.heads*gl.f), ar: make([]float32, gl.heads*gl.f)}
	t.beMu.Lock()
	defer t.beMu.Unlock()
	for _, p := range []struct {
		host []float32
		w    kernels.Tensor
	}{{g.al, gl.al.W}, {g.ar, gl.ar.W}} {
		if err := t.be.Download(p.host, p.w); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// lwGATBytes is an lwGAT's memory for dstRows destinations of the set dst
// (nil: every node) and heads heads.
func lwGATBytes(dst bitset, dstRows int64, heads, z int) int64 {
	return 4*dstRows*int64(heads) + newLWIndexBytes(dst) + 8*int64(z)
}

func (g *lwGAT) numHeads() int {
	if g == nil {
		return 0
	}
	return g.heads
}

// scores sets out[r·heads+h] to a's head h dotted with row r's head h,
// for each row of rows, summed in the order of the kernels' headDots.
func (g *lwGAT) scores(out, rows, a []float32) {
	H, F := g.heads, g.f
	w := H * F
	for r := range len(rows) / w {
		row := rows[r*w : (r+1)*w]
		for h := range H {
			var s float32
			for f := h * F; f < (h+1)*F; f++ {
				s += a[f] * row[f]
			}
			out[r*H+h] = s
		}
	}
}

// record sets the scores of the destinations among ids, whose transformed
// rows are rows.
func (g *lwGAT) record(ids []int64, rows []float32) {
	H, w := int64(g.heads), int64(g.heads*g.f)
	for i, v := range ids {
		if g.dst.set != nil && !g.dst.set.has(v) {
			continue
		}
		k := g.dst.pos(v)
		g.scores(g.score[k*H:(k+1)*H], rows[int64(i)*w:int64(i+1)*w], g.al)
	}
}

// Stage kinds, in the order newLWStage prefers them.
const (
	lwAuto   = ""
	lwMemory = "memory" // every source's transformed row in memory
	lwPush   = "push"   // one summed row per destination in memory (lwAcc)
	lwFiles  = "files"  // every source's row in a temporary array, pushed to blocks of destinations in sequential passes
	lwGather = "gather" // every source's row in a temporary array, gathered by each chunk (GAT whose scores do not fit)
)

// newLWStage makes layer l's transformed input: z for the nodes of set
// (nil: all), self for the layer's destinations dst (nil: all). It takes
// the first that fits half of avail:
//   - memory: every source's transformed row (lwMem);
//   - push (SAGE and GCN, whose aggregation is a scaled sum): one
//     accumulator row per destination, and the destinations of each
//     source, dstEdges in all (lwAcc);
//   - files: every source's transformed row in a temporary array under
//     dir (lwArray), pushed to blocks of destinations in sequential
//     passes (GAT too, its destinations' scores in memory: lwGAT);
//   - gather: the same array, which each chunk gathers from.
//
// Trainer.lwStage forces one kind (tests); push is taken only where the
// model allows it.
func (t *Trainer) newLWStage(dir string, l int, set, dst bitset, sh lwLayer, avail, dstEdges int64, outDeg []int32, st *LayerwiseStats) (*lwStage, error) {
	n := t.d.NumNodes()
	count := func(b bitset) int64 {
		if b == nil {
			return n
		}
		return b.count()
	}
	rows, dstRows := count(set), count(dst)
	selfSet, selfRows := dst, dstRows
	if sh.self == 0 {
		selfSet, selfRows = nil, 0
	}
	ix, six := newLWIndex(set), newLWIndex(selfSet)
	selfBytes := 4*selfRows*int64(sh.self) + six.bytes()
	memBytes := 4*rows*int64(sh.z) + ix.bytes() + selfBytes
	// Push needs a sum (not GAT's softmax), and ranks that fit an
	// lwAcc's 32-bit halves. Passes over a temporary array push GAT too,
	// with the destinations' scores in memory (lwGAT): they are known
	// before the first pass, not while the layer below writes its rows.
	fits := rows < 1<<32 && dstRows < 1<<32
	isGAT := t.model.cfg.Kind == ModelGAT
	canPush := !isGAT && fits
	canPass := fits
	var gatBytes int64
	if isGAT {
		gatBytes = lwGATBytes(dst, dstRows, sh.heads, sh.z)
	}
	// Aggregating first pushes input-width rows and transforms only the
	// destinations' sums: no more pushing where the input is no wider,
	// and fewer rows to transform (a layer's sources outnumber its
	// destinations).
	_, af := t.model.layers[l].(aggregateFirst)
	raw := canPush && af && sh.in <= sh.z
	width := sh.z
	if raw {
		width = sh.in
	}
	bucket := lwBucket(width, avail/2)
	pushBytes := lwAccBytes(rows, dstRows, dstEdges, width, bucket, 0) + ix.bytes() + selfBytes
	if sh.self == 0 && dst != nil {
		pushBytes += dst.bytes() // the destinations' rank index; SAGE's shares the self rows'
	}
	kind := t.lwStage
	switch {
	case kind == lwPush && !canPush, kind == lwFiles && !canPass:
		kind = lwGather
	case kind != lwAuto:
	case memBytes <= avail/2:
		kind = lwMemory
	case canPush && pushBytes <= avail/2:
		kind = lwPush
	case canPass && lwPassFixedBytes(n, width, avail)+gatBytes <= avail/4:
		kind = lwFiles
	default:
		kind = lwGather
	}
	if kind == lwMemory || kind == lwGather {
		raw, width = false, sh.z
	}
	t.o.Logger.Debug("layer-wise stage", "layer", l, "kind", kind, "aggregate_first", raw, "sources", rows, "destinations", dstRows, "edges", dstEdges,
		"memory_bytes", memBytes, "push_bytes", pushBytes, "avail_bytes", avail)
	s := &lwStage{selfSet: selfSet, width: width, raw: raw}
	switch kind {
	case lwMemory:
		s.z = &lwMem{ix: ix, width: sh.z, rows: make([]float32, rows*int64(sh.z))}
		s.held = memBytes
	case lwPush:
		dix := six
		if sh.self == 0 {
			dix = newLWIndex(dst)
		}
		acc, nb := newLWAcc(t.d, ix, dix, dstRows, width, bucket, dstEdges, outDeg, nil)
		st.NeighborBytes += nb
		s.z, s.pushed, s.held = acc, true, pushBytes
	default:
		if raw && l == 0 {
			// Layer 0's input rows are the feature rows: the passes read
			// the feature file itself instead of a copy of it.
			s.z = &lwFeatures{t: t, ix: ix, width: width}
		} else {
			z, err := createLWArray(filepath.Join(dir, fmt.Sprintf("layer%d.z.npy", l)), ix, rows, width)
			if err != nil {
				return nil, err
			}
			s.z, s.gather = z, kind == lwGather
		}
		if kind == lwFiles && isGAT {
			g, err := t.newLWGAT(l, dst, dstRows)
			if err != nil {
				s.close()
				return nil, err
			}
			s.gat, s.aux = g, gatBytes
			memacct.Add(memacct.Inference, s.aux)
		}
		if sh.self > 0 {
			self, err := createLWArray(filepath.Join(dir, fmt.Sprintf("layer%d.self.npy", l)), six, selfRows, sh.self)
			if err != nil {
				s.close()
				return nil, err
			}
			s.self = self
		}
		return s, nil
	}
	if sh.self > 0 {
		s.self = &lwMem{ix: six, width: sh.self, rows: make([]float32, selfRows*int64(sh.self))}
	}
	memacct.Add(memacct.Inference, s.held)
	return s, nil
}

func (s *lwStage) heldBytes() int64 {
	if s == nil {
		return 0
	}
	return s.held + s.aux
}

// close releases the stage; a nil stage is a no-op.
func (s *lwStage) close() {
	if s == nil {
		return
	}
	for _, r := range []lwRows{s.z, s.self} {
		if r != nil {
			r.close()
		}
	}
	memacct.Add(memacct.Inference, -s.held-s.aux)
	s.z, s.self, s.held, s.aux, s.gat = nil, nil, 0, 0, nil
}

// lwIndex maps the nodes of a set to their ranks (nil set: the identity).
type lwIndex struct {
	set  bitset
	rank []int64 // rank[w]: the members below node 64·w
}

// newLWIndexBytes is the memory of newLWIndex(set).
func newLWIndexBytes(set bitset) int64 { return 8 * int64(len(set)) }

func newLWIndex(set bitset) *lwIndex {
	ix := &lwIndex{set: set}
	if set != nil {
		ix.rank = make([]int64, len(set))
		var r int64
		for w, x := range set {
			ix.rank[w] = r
			r += int64(bits.OnesCount64(x))
		}
	}
	return ix
}

func (ix *lwIndex) bytes() int64 { return newLWIndexBytes(ix.set) }

// pos is v's rank; v must be a member.
func (ix *lwIndex) pos(v int64) int64 {
	if ix.set == nil {
		return v
	}
	w := v >> 6
	return ix.rank[w] + int64(bits.OnesCount64(ix.set[w]&(1<<(uint(v)&63)-1)))
}

// lwMem holds the rows of a set's nodes in memory, in rank order.
type lwMem struct {
	ix    *lwIndex
	width int
	rows  []float32
}

func (a *lwMem) readRows(ids []int64, dst []float32) (int64, error) {
	w := int64(a.width)
	for i, v := range ids {
		p := a.ix.pos(v)
		copy(dst[int64(i)*w:int64(i+1)*w], a.rows[p*w:(p+1)*w])
	}
	return 0, nil
}

func (a *lwMem) writeRows(ids []int64, src []float32) (int64, error) {
	w := int64(a.width)
	for i, v := range ids {
		p := a.ix.pos(v)
		copy(a.rows[p*w:(p+1)*w], src[int64(i)*w:int64(i+1)*w])
	}
	return 0, nil
}

func (a *lwMem) close() { a.rows = nil }

// lwAcc is a pushed stage's z: for each destination of the layer, the
// scaled sum of its in-neighbours' transformed rows, added as the layer
// below writes its sources' rows (writeRows, in ascending id order over
// the calls), so that no source row is kept. It holds the destinations'
// in-edges sorted by source, and one accumulator row per destination.
//
// Aggregation is then a scaled sum, which covers SAGE's mean and GCN's
// normalised sum with its implicit self loop (kernels' package doc):
//
//	mean: acc_i = Σ_{u∈N(i)} z_u,                    read as acc_i / deg_i (0 if deg_i = 0)
//	GCN:  acc_i = z_i/√(out_i+1) + Σ_{u∈N(i)} z_u/√(out_u+1), read as acc_i / √(deg_i+1)
//
// with full-graph degrees. A chunk then aggregates one row per destination
// through an identity block (destination i's one edge is source i), on
// which AggMean and AggGCN both return their input, so the model's own
// aggregate adds the self term and the bias as it does for a gathered
// chunk. Edges with multiplicity and explicit self edges are pushed as
// they appear in the lists, as the kernels count them.
type lwAcc struct {
	src, dst *lwIndex
	width    int
	// edges are the destinations' in-edges as source rank << 32 |
	// destination rank, by bucket of lwBucketRows source ranks (bucket b
	// is edges[start[b]:start[b+1]]), in destination order within a
	// bucket, so that pushing a bucket walks the accumulators upwards.
	edges  []uint64
	start  []int64
	bucket int64 // source ranks per bucket (lwBucketRows, less under a small budget)
	acc    []float32
	scale  []float32 // per destination, applied by readRows
	// outDeg: GCN's full-graph out-degrees (sources scaled by
	// 1/√(out+1), self loop added); nil: mean.
	outDeg []int32
	// stage holds the rows of bucket staged (−1: none) until it is
	// complete (writeRows).
	stage  []float32
	staged int64
	// gat, for a GAT layer, holds the softmax's running state: pushes
	// are then weighted by attention (pushGAT), not summed.
	gat *lwAccGAT
}

// lwAccGAT is an lwAcc's state for a GAT layer, whose aggregation is a
// softmax-weighted sum over the in-edges and a self loop (withSelfLoops):
//
//	acc_i,h = Σ_u exp(e_ui,h − m_i,h) · z_u,h,  s_i,h = Σ_u exp(e_ui,h − m_i,h)
//	e_ui,h  = LeakyReLU(al_h·z_i,h + ar_h·z_u,h), m_i,h = max_u e_ui,h
//
// read as acc/s, the kernels' EdgeSoftmax and EdgeWeightedSum. Sources
// arrive in id order, not by destination, so m is the running maximum of
// the edges pushed so far, and acc and s are rescaled by exp(m_old −
// m_new) when it rises (the online softmax). A chunk then aggregates one
// row per destination through an identity block, on which the softmax
// over one edge is exactly 1 and the model's aggregate returns its input
// (plus bias, and the head mean of the last layer), as for SAGE and GCN.
type lwAccGAT struct {
	*lwGAT
	dst []float32 // al·z of each destination, per head (rank × heads)
	m   []float32 // running maximum (rank × heads)
	s   []float32 // running sum (rank × heads)
	src []float32 // ar·z of the pushed bucket's sources (bucket rank × heads)
}

// lwBucketRows is the most source ranks per bucket of an lwAcc: a
// bucket's rows (1 MiB at width 32) stay in the CPU's caches while its
// edges are pushed, and the counting sort's counters (one per bucket)
// too, where one counter per source (a CSR by source) missed on every
// edge.
const lwBucketRows = 1 << 13

// lwBucket is the bucket size for rows of width floats under budget: a
// bucket's rows take at most an eighth of it.
func lwBucket(width int, budget int64) int64 {
	b := int64(lwBucketRows)
	for b > 64 && 4*b*int64(width) > budget/8 {
		b /= 2
	}
	return b
}

// lwAccBytes is an lwAcc's memory for srcRows sources, dstRows
// destinations with edges in-edges, rows of width floats in buckets of
// bucket sources (a bucket's rows included), its indexes aside. heads > 0
// is a GAT layer's: each destination's self loop, and per head its score,
// running maximum and sum, and a bucket's source scores (lwAccGAT).
func lwAccBytes(srcRows, dstRows, edges int64, width int, bucket int64, heads int) int64 {
	n := 8*edges + 4*dstRows*int64(width+1) + 8*(srcRows/bucket+2)*(1+2*lwBuildParts) + 4*bucket*int64(width)
	if heads > 0 {
		n += 8*dstRows + 12*dstRows*int64(heads) + 4*bucket*int64(heads)
	}
	return n
}

// newLWAcc builds the accumulators of the destinations indexed by dix
// (dstRows of them, edges in-edges in all) over the sources indexed by
// src, which must hold every in-neighbour of the destinations. It returns
// the neighbour-list bytes it read (each list twice: count, then fill).
//
// The edges are sorted by bucket, destinations ascending, with a counting
// sort that lwBuildParts goroutines share: each counts, then fills, the
// in-edges of one range of destinations, and within every bucket range
// j's edges follow range j−1's, so the order is the one-goroutine sort's.
//
// With gat (a GAT layer's scores), every destination without an edge from
// itself gets one, after its list's edges (withSelfLoops), and the
// accumulators weight their pushes by attention (lwAccGAT); edges then
// need not count the self loops.
func newLWAcc(d *storage.Dataset, src, dix *lwIndex, dstRows int64, width int, bucket, edges int64, outDeg []int32, gat *lwGAT) (a *lwAcc, nbrBytes int64) {
	srcRows := d.NumNodes()
	if src.set != nil {
		srcRows = src.set.count()
	}
	a = &lwAcc{src: src, dst: dix, width: width, bucket: bucket, outDeg: outDeg, staged: -1,
		acc: make([]float32, dstRows*int64(width)), scale: make([]float32, dstRows)}
	if gat != nil {
		H := int64(gat.heads)
		a.gat = &lwAccGAT{lwGAT: gat, dst: make([]float32, dstRows*H), m: make([]float32, dstRows*H), s: make([]float32, dstRows*H),
			src: make([]float32, bucket*H)}
		for i := range a.gat.m {
			a.gat.m[i] = float32(math.Inf(-1))
		}
	}
	parts := lwDestRanges(d.NumNodes(), dix, edges)
	nb := srcRows/bucket + 1
	// Buckets are powers of two (lwBucket): a shift, not a division, per
	// edge.
	shift := uint(bits.TrailingZeros64(uint64(bucket)))
	if bucket != 1<<shift {
		panic(fmt.Sprintf("train: layer-wise bucket of %d sources is not a power of two", bucket))
	}
	// lists calls fn with the source rank of every id of nl.
	lists := func(nl storage.NodeList, fn func(r int64)) {
		if l := nl.Int32(); l != nil {
			for _, u := range l {
				fn(src.pos(int64(u)))
			}
			return
		}
		for _, u := range nl.Int64() {
			fn(src.pos(u))
		}
	}
	// selfLoop reports whether destination v, of source rank rv, gets a
	// self loop: a GAT layer's, when v's list does not name it.
	selfLoop := func(nl storage.NodeList, rv int64) bool {
		if gat == nil {
			return false
		}
		has := false
		lists(nl, func(r int64) { has = has || r == rv })
		return !has
	}
	counts := make([][]int64, len(parts)) // counts[j][b]: range j's edges in bucket b
	nbrs := make([]int64, len(parts))
	lwEachPart(parts, func(j int, r lwDestRange) {
		c := make([]int64, nb)
		r.each(dix, d.NumNodes(), func(k uint64, v int64) {
			nl := d.Neighbors(v)
			nbrs[j] += int64(nl.Len())
			lists(nl, func(r int64) { c[r>>shift]++ })
			if gat != nil {
				if rv := src.pos(v); selfLoop(nl, rv) {
					c[rv>>shift]++
				}
				H := int64(gat.heads)
				copy(a.gat.dst[int64(k)*H:int64(k+1)*H], gat.score[gat.dst.pos(v)*H:(gat.dst.pos(v)+1)*H])
			}
			deg := float64(nl.Len())
			switch {
			case outDeg != nil:
				a.scale[k] = float32(1 / math.Sqrt(deg+1))
			case deg > 0:
				a.scale[k] = float32(1 / deg)
			}
		})
		counts[j] = c
	})
	// Bucket b starts at start[b]; range j fills it from there, after the
	// ranges before it.
	a.start = make([]int64, nb+1)
	fills := make([][]int64, len(parts))
	for j := range parts {
		fills[j] = make([]int64, nb)
	}
	var off int64
	for b := range nb {
		a.start[b] = off
		for j := range parts {
			fills[j][b] = off
			off += counts[j][b]
		}
	}
	a.start[nb] = off
	a.edges = make([]uint64, off)
	lwEachPart(parts, func(j int, r lwDestRange) {
		fill := fills[j]
		add := func(r int64, k uint64) {
			b := r >> shift
			a.edges[fill[b]] = uint64(r)<<32 | k
			fill[b]++
		}
		r.each(dix, d.NumNodes(), func(k uint64, v int64) {
			nl := d.Neighbors(v)
			lists(nl, func(r int64) { add(r, k) })
			if gat != nil {
				if rv := src.pos(v); selfLoop(nl, rv) {
					add(rv, k)
				}
			}
		})
	})
	idx := int64(4)
	if d.Indices32() == nil {
		idx = 8
	}
	var n int64
	for _, x := range nbrs {
		n += x
	}
	return a, 2 * n * idx
}

// lwBuildParts is the most goroutines that build one lwAcc's edges
// (lwAccBytes counts each one's bucket counters twice).
const lwBuildParts = 8

// lwBuildMinEdges is the fewest edges per goroutine worth a second one.
const lwBuildMinEdges = 1 << 16

// lwDestRange is a range of destination words [w0, w1) of an lwAcc's
// destination set (of node ids [64·w0, 64·w1) when the set is nil),
// whose first member has rank k0.
type lwDestRange struct {
	w0, w1 int64
	k0     uint64
}

// lwDestRanges cuts the destinations of dix over n nodes into at most
// GOMAXPROCS (and lwBuildParts) ranges of whole bitset words, as many as
// edges in-edges make worth it, of about equal destination counts.
func lwDestRanges(n int64, dix *lwIndex, edges int64) []lwDestRange {
	words := (n + 63) / 64
	p := int64(max(1, min(runtime.GOMAXPROCS(0), lwBuildParts, int(edges/lwBuildMinEdges))))
	rank := func(w int64) uint64 { // the members below node 64·w
		switch {
		case dix.set == nil:
			return uint64(min(64*w, n))
		case w >= int64(len(dix.rank)):
			return uint64(dix.set.count())
		}
		return uint64(dix.rank[w])
	}
	total := rank(words)
	var rs []lwDestRange
	w0 := int64(0)
	for j := int64(1); j <= p; j++ {
		w1 := words
		if j < p {
			// The first word at which j/p of the destinations lie below.
			want := total * uint64(j) / uint64(p)
			w1 = max(w0, int64(sort.Search(int(words), func(w int) bool { return rank(int64(w)) >= want })))
		}
		if w1 > w0 {
			rs = append(rs, lwDestRange{w0: w0, w1: w1, k0: rank(w0)})
			w0 = w1
		}
	}
	return rs
}

// each calls fn(k, v) for the destinations v of the range in ascending
// order, k their ranks.
func (r lwDestRange) each(dix *lwIndex, n int64, fn func(k uint64, v int64)) {
	k := r.k0
	if dix.set == nil {
		for v := 64 * r.w0; v < min(64*r.w1, n); v++ {
			fn(k, v)
			k++
		}
		return
	}
	for w := r.w0; w < r.w1; w++ {
		for x := dix.set[w]; x != 0; x &= x - 1 {
			fn(k, w<<6|int64(bits.TrailingZeros64(x)))
			k++
		}
	}
}

// lwEachPart runs fn for every range, one goroutine each beyond the
// first, and waits for them.
func lwEachPart(parts []lwDestRange, fn func(j int, r lwDestRange)) {
	var wg sync.WaitGroup
	for j := 1; j < len(parts); j++ {
		wg.Add(1)
		go func() {
			defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
			defer wg.Done()
			fn(j, parts[j])
		}()
	}
	if len(parts) > 0 {
		fn(0, parts[0])
	}
	wg.Wait()
}

// feeds reports whether bucket b has an edge or, for GCN, a destination
// among ids (its sources: the self loop).
func (a *lwAcc) feeds(b int64, ids []int64) bool {
	if a.start[b] != a.start[b+1] {
		return true
	}
	if a.outDeg != nil {
		for _, u := range ids {
			if a.dst.set == nil || a.dst.set.has(u) {
				return true
			}
		}
	}
	return false
}

// pushBucket pushes bucket b whose sources ids (every one, ascending) have
// the rows rows, which it scales in place for GCN.
func (a *lwAcc) pushBucket(b int64, ids []int64, rows []float32) {
	w := int64(a.width)
	for i, u := range ids {
		a.source(u, rows[int64(i)*w:int64(i+1)*w])
	}
	if a.gat != nil {
		a.gat.scores(a.gat.src, rows[:int64(len(ids))*w], a.gat.ar)
	}
	a.pushEdges(b, rows)
}

// writeRows adds the rows of the sources ids to their destinations'
// accumulators (GCN: scaled by 1/√(out+1), and to their own when they
// are destinations). Sources come in ascending order over the calls, and
// every source is written: a bucket's rows are staged until the next
// bucket starts (or readRows), then pushed. It reads and writes no
// storage.
func (a *lwAcc) writeRows(ids []int64, src []float32) (int64, error) {
	w := int64(a.width)
	for i, u := range ids {
		r := a.src.pos(u)
		if b := r / a.bucket; b != a.staged {
			a.flush()
			if a.stage == nil {
				a.stage = make([]float32, a.bucket*w)
			}
			a.staged = b
		}
		row := a.stage[r%a.bucket*w : (r%a.bucket+1)*w]
		copy(row, src[int64(i)*w:int64(i+1)*w])
		a.source(u, row)
	}
	return 0, nil
}

// source prepares source u's row for pushing: GCN scales it by
// 1/√(out_u+1), in place, and adds it to u's own sum when u is a
// destination (the implicit self loop).
func (a *lwAcc) source(u int64, row []float32) {
	if a.outDeg == nil {
		return
	}
	s := float32(1 / math.Sqrt(float64(a.outDeg[u])+1))
	for j := range row {
		row[j] *= s
	}
	if a.dst.set == nil || a.dst.set.has(u) {
		w := int64(a.width)
		p := a.dst.pos(u)
		f32.Axpy(a.acc[p*w:(p+1)*w], 1, row)
	}
}

// lwPushParallelEdges is the fewest edges of a bucket that pushEdges
// splits among goroutines: below it a hand-off costs more than it saves.
const lwPushParallelEdges = 1 << 12

// pushEdges adds bucket b's rows (its sources' in rank order) to the
// sums of the destinations they feed, in ascending destination order.
// A large bucket's edges are cut, at destination boundaries, into one
// range per processor, pushed concurrently: each accumulator row is
// written by one goroutine, in the edges' order, so the sums are the
// serial loop's bit for bit.
func (a *lwAcc) pushEdges(b int64, rows []float32) {
	es := a.edges[a.start[b]:a.start[b+1]]
	p := runtime.GOMAXPROCS(0)
	if p < 2 || len(es) < lwPushParallelEdges {
		a.pushRange(b, rows, es)
		return
	}
	var wg sync.WaitGroup
	lo := 0
	for i := 1; i < p && lo < len(es); i++ {
		hi := max(lo, len(es)*i/p)
		for hi > lo && hi < len(es) && uint32(es[hi]) == uint32(es[hi-1]) {
			hi++ // the destination's edges stay in one range
		}
		if hi == lo {
			continue
		}
		wg.Add(1)
		go func(part []uint64) {
			defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
			defer wg.Done()
			a.pushRange(b, rows, part)
		}(es[lo:hi])
		lo = hi
	}
	a.pushRange(b, rows, es[lo:])
	wg.Wait()
}

// pushRange pushes es, edges of bucket b whose rows are rows.
func (a *lwAcc) pushRange(b int64, rows []float32, es []uint64) {
	if a.gat != nil {
		a.pushGAT(b, rows, es)
		return
	}
	f32.AddRows(a.acc, rows, es, b*a.bucket, a.width)
}

// pushGAT pushes es, edges of bucket b whose rows are rows (and whose
// source scores are in a.gat.src), weighted by attention with the online
// softmax of lwAccGAT.
func (a *lwAcc) pushGAT(b int64, rows []float32, es []uint64) {
	g := a.gat
	H, F := int64(g.heads), int64(g.f)
	w := H * F
	base := b * a.bucket
	for _, e := range es {
		i, k := int64(e>>32)-base, int64(uint32(e))
		for h := range H {
			x := g.dst[k*H+h] + g.src[i*H+h]
			if x < 0 {
				x *= gatSlope
			}
			acc := a.acc[k*w+h*F : k*w+(h+1)*F]
			m := &g.m[k*H+h]
			if x > *m {
				if !math.IsInf(float64(*m), -1) {
					sc := float32(math.Exp(float64(*m - x)))
					for j := range acc {
						acc[j] *= sc
					}
					g.s[k*H+h] *= sc
				}
				*m = x
			}
			p := float32(math.Exp(float64(x - *m)))
			f32.Axpy(acc, p, rows[i*w+h*F:i*w+(h+1)*F])
			g.s[k*H+h] += p
		}
	}
}

// flush pushes the staged bucket.
func (a *lwAcc) flush() {
	if a.staged < 0 {
		return
	}
	a.pushEdges(a.staged, a.stage)
	clear(a.stage)
	a.staged = -1
}

// readRows reads the destinations ids' aggregated rows.
func (a *lwAcc) readRows(ids []int64, dst []float32) (int64, error) {
	a.flush()
	w := int64(a.width)
	if g := a.gat; g != nil {
		H, F := int64(g.heads), int64(g.f)
		for i, v := range ids {
			p := a.dst.pos(v)
			for h := range H {
				inv := 1 / g.s[p*H+h] // every destination has its self loop
				row, out := a.acc[p*w+h*F:p*w+(h+1)*F], dst[int64(i)*w+h*F:int64(i)*w+(h+1)*F]
				for j := range row {
					out[j] = row[j] * inv
				}
			}
		}
		return 0, nil
	}
	for i, v := range ids {
		p := a.dst.pos(v)
		s, row, out := a.scale[p], a.acc[p*w:(p+1)*w], dst[int64(i)*w:int64(i+1)*w]
		for j := range row {
			out[j] = s * row[j]
		}
	}
	return 0, nil
}

func (a *lwAcc) close() { a.acc, a.edges, a.stage, a.gat = nil, nil, nil, nil }

// lwArray is a temporary [rows, width] float32 .npy holding one layer's
// rows for the members of a set, in rank order (lwIndex): no holes, so a
// chunk's rows are written as one contiguous run of whole pages, not one
// partial page per scattered node.
//
// What it writes is flushed to the disk and dropped from the page cache
// every lwFlushBytes (fdatasync, then POSIX_FADV_DONTNEED). Under a
// memory cgroup (v1), dirty pages are charged to the cgroup but written
// back only past the machine-wide dirty thresholds, which a small cgroup
// never reaches; reclaim cannot free them, and the 20 M-node evaluation
// of docs/benchmarks.md was OOM-killed with 15 GB written this way.
type lwArray struct {
	f       *os.File
	ix      *lwIndex
	off     int64
	width   int
	pending int64 // bytes written since the last flush
	pos     []int64
}

// lwCollectBytes is the chunk size from which lwChunker.flush collects the
// previous chunk's garbage before allocating.
const lwCollectBytes = 32 << 20

// lwFlushBytes is how much an lwArray writes between flushes.
const lwFlushBytes = 16 << 20

func createLWArray(path string, ix *lwIndex, rows int64, width int) (*lwArray, error) {
	hdr, err := npy.EncodeHeader(npy.Float32, []int64{rows, int64(width)})
	if err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("train: layer-wise: %w", err)
	}
	a := &lwArray{f: f, ix: ix, off: int64(len(hdr)), width: width}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		a.close()
		return nil, fmt.Errorf("train: layer-wise: %w", err)
	}
	if err := f.Truncate(a.off + rows*int64(width)*4); err != nil {
		a.close()
		return nil, fmt.Errorf("train: layer-wise: %w", err)
	}
	return a, nil
}

func (a *lwArray) close() { a.f.Close() }

// positions maps ids (ascending) to their ranks (ascending too).
func (a *lwArray) positions(ids []int64) []int64 {
	a.pos = a.pos[:0]
	for _, v := range ids {
		a.pos = append(a.pos, a.ix.pos(v))
	}
	return a.pos
}

// flush writes back what was written and drops it from the page cache.
func (a *lwArray) flush() error {
	a.pending = 0
	if err := unix.Fdatasync(int(a.f.Fd())); err != nil {
		return fmt.Errorf("train: layer-wise flush %s: %w", a.f.Name(), err)
	}
	_ = unix.Fadvise(int(a.f.Fd()), 0, 0, unix.FADV_DONTNEED) // a hint; failure costs only cache
	return nil
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// runs calls fn(i, j) for every maximal run ids[i:j] of consecutive ids.
func runs(ids []int64, fn func(i, j int) error) error {
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[j-1]+1 {
			j++
		}
		if err := fn(i, j); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// Reads of a temporary array: rows at most lwGapBytes apart are read by
// one pread, the gap included (copying a cached page costs less than a
// system call), in spans of at most lwSpanBytes. The chunks' sources are
// spread over the whole array, often densely, so this turns one pread per
// source into a few per MiB.
const (
	lwGapBytes  = 4 << 10
	lwSpanBytes = 1 << 20
)

// readRows reads the rows of ids (ascending) into dst and returns the bytes
// read (gaps included).
func (a *lwArray) readRows(ids []int64, dst []float32) (int64, error) {
	w := a.width
	rb := int64(w) * 4
	var nb int64
	var buf []byte
	pos := a.positions(ids)
	for i := 0; i < len(pos); {
		j := i + 1
		for j < len(pos) && (pos[j]-pos[j-1]-1)*rb <= lwGapBytes && (pos[j]-pos[i]+1)*rb <= lwSpanBytes {
			j++
		}
		span := (pos[j-1] - pos[i] + 1) * rb
		b := f32bytes(dst[i*w : j*w])
		if span != int64(len(b)) {
			if int64(cap(buf)) < span {
				buf = make([]byte, lwSpanBytes)
			}
			b = buf[:span]
		}
		k, err := a.f.ReadAt(b, a.off+pos[i]*rb)
		nb += int64(k)
		if err != nil {
			return nb, fmt.Errorf("train: layer-wise read %s: %w", a.f.Name(), err)
		}
		if span != int64(j-i)*rb {
			for r := i; r < j; r++ {
				o := (pos[r] - pos[i]) * rb
				copy(f32bytes(dst[r*w:(r+1)*w]), b[o:o+rb])
			}
		}
		i = j
	}
	return nb, nil
}

// writeRows writes src's rows at ids (ascending) and returns the bytes
// written.
func (a *lwArray) writeRows(ids []int64, src []float32) (int64, error) {
	w := a.width
	var nb int64
	pos := a.positions(ids)
	err := runs(pos, func(i, j int) error {
		k, err := a.f.WriteAt(f32bytes(src[i*w:j*w]), a.off+pos[i]*int64(w)*4)
		nb += int64(k)
		if err != nil {
			return fmt.Errorf("train: layer-wise write %s: %w", a.f.Name(), err)
		}
		return nil
	})
	if err != nil {
		return nb, err
	}
	if a.pending += nb; a.pending >= lwFlushBytes {
		err = a.flush()
	}
	return nb, err
}

// lwSource is what a push pass sweeps: the rows of a set's members (index)
// in rank order, width floats each.
type lwSource interface {
	index() *lwIndex
	rowWidth() int
	// readRun reads the rows of ids, the members of ranks r0, r0+1, …,
	// into dst, and counts what it read in ls.
	readRun(ids []int64, r0 int64, dst []float32, ls *LayerStats) error
}

func (a *lwArray) index() *lwIndex { return a.ix }
func (a *lwArray) rowWidth() int   { return a.width }

func (a *lwArray) readRun(ids []int64, r0 int64, dst []float32, ls *LayerStats) error {
	k, err := a.f.ReadAt(f32bytes(dst[:len(ids)*a.width]), a.off+r0*int64(a.width)*4)
	ls.GatherBytes += int64(k)
	ls.GatherRows += int64(len(ids))
	if err != nil {
		return fmt.Errorf("train: layer-wise read %s: %w", a.f.Name(), err)
	}
	return nil
}

// lwFeatures is layer 0's input when it aggregates first and its rows do
// not fit memory: the feature rows themselves, read (through the feature
// cache, normalised as training normalises them) by each push pass, where
// a temporary copy would be written once and read as often.
type lwFeatures struct {
	t     *Trainer
	ix    *lwIndex
	width int
}

func (f *lwFeatures) index() *lwIndex { return f.ix }
func (f *lwFeatures) rowWidth() int   { return f.width }

func (f *lwFeatures) readRun(ids []int64, _ int64, dst []float32, ls *LayerStats) error {
	x := dst[:len(ids)*f.width]
	if err := f.t.fc.GatherF32(ids, x); err != nil {
		return err
	}
	f.t.normalize(x)
	ls.InputRows += int64(len(ids))
	ls.InputBytes += int64(len(ids)) * f.t.d.FeatRowBytes()
	return nil
}

// readRows and writeRows: the transform pass writes no rows (the passes
// read the features), and chunks read the sums, not this.
func (f *lwFeatures) readRows([]int64, []float32) (int64, error) {
	return 0, fmt.Errorf("train: layer-wise: internal error: feature rows read by a chunk")
}
func (f *lwFeatures) writeRows([]int64, []float32) (int64, error) { return 0, nil }
func (f *lwFeatures) close()                                      {}

// lwChunker computes one layer over its destinations in id-order chunks.
type lwChunker struct {
	t        *Trainer
	l        int
	shape    lwLayer
	nextW    int // width of the next layer's transformed rows (0: last layer)
	budget   int64
	seen     bitset  // scratch: the current chunk's sources
	pos      []int32 // scratch: block index by node, −1 outside flush (nil: none)
	in, out  *lwStage
	outDeg   []int32
	idxBytes int64
	st       *LayerwiseStats
	ls       *LayerStats
	fn       func([]int64, kernels.Tensor) error
	bar      progress.Task // counts computed destinations

	dst   []int64
	src   int64 // distinct sources of dst so far (dst included)
	edges int64
}

// run computes the layer for the nodes of need (nil: every node).
func (c *lwChunker) run(ctx context.Context, need bitset) error {
	d := c.t.d
	add := func(v int64) error {
		if c.in.pushed {
			return c.addPushed(ctx, v)
		}
		nl := d.Neighbors(v)
		deg := int64(nl.Len())
		fresh := int64(0)
		if !c.seen.has(v) {
			fresh++
		}
		for i := range nl.Len() {
			if !c.seen.has(nl.At(i)) {
				fresh++ // an upper bound: a repeated neighbour counts twice
			}
		}
		if len(c.dst) > 0 && c.shape.chunkBytes(int64(len(c.dst))+1, c.src+fresh, c.edges+deg+1, c.nextW) > c.budget {
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
		c.dst = append(c.dst, v)
		c.edges += deg + 1
		if !c.seen.has(v) {
			c.seen.set(v)
			c.src++
		}
		for i := range nl.Len() {
			if u := nl.At(i); !c.seen.has(u) {
				c.seen.set(u)
				c.src++
			}
		}
		return nil
	}
	if err := eachOf(need, d.NumNodes(), add); err != nil {
		return err
	}
	return c.flush(ctx)
}

// addPushed adds destination v to the pending chunk of a pushed layer,
// whose one source is v's summed row.
func (c *lwChunker) addPushed(ctx context.Context, v int64) error {
	if len(c.dst) > 0 && c.shape.chunkBytes(int64(len(c.dst))+1, c.src+1, c.edges+1, c.nextW) > c.budget {
		if err := c.flush(ctx); err != nil {
			return err
		}
	}
	c.dst = append(c.dst, v)
	c.src++
	c.edges++
	return nil
}

// lwPassFixedBytes is a push pass's memory under budget that does not
// grow with its destinations: the destinations' rank index over n nodes,
// and the pass's two read buffers, each a bucket's rows of width floats
// (lwBucket) and their ids.
func lwPassFixedBytes(n int64, width int, budget int64) int64 {
	return n/8 + 16 + 2*lwBucket(width, budget)*(4*int64(width)+8)
}

// runPasses computes the layer for the nodes of need (nil: every node)
// from transformed source rows in a temporary array (lwArray) by pushing:
// the destinations, in id order, are cut into blocks whose accumulators
// (lwAcc) take at most half the chunk budget; for each block one
// sequential pass over the array adds every source's row to the block's
// destinations that it feeds, then the block is computed in pushed
// chunks. Each pass reads the array once in large sequential reads
// (spans without an edge into the block are skipped), where gathering
// chunks read it once per chunk, row by row: sources carry no locality,
// so a chunk's sources are spread over the whole array.
func (c *lwChunker) runPasses(ctx context.Context, need bitset) error {
	d := c.t.d
	arr := c.in.z.(lwSource)
	srcRows := d.NumNodes()
	if arr.index().set != nil {
		srcRows = arr.index().set.count()
	}
	bucket := lwBucket(arr.rowWidth(), c.budget)
	heads := c.in.gat.numHeads()
	room := max(c.budget*3/4-lwPassFixedBytes(d.NumNodes(), arr.rowWidth(), c.budget), 0)
	blk := newBitset(d.NumNodes())
	memacct.Add(memacct.Inference, blk.bytes())
	defer memacct.Add(memacct.Inference, -blk.bytes())
	var ids []int64
	var edges int64
	pass := func() error {
		if len(ids) == 0 {
			return nil
		}
		err := c.pushPass(ctx, arr, blk, bucket, ids, edges)
		for _, v := range ids {
			blk.clear(v)
		}
		ids, edges = ids[:0], 0
		return err
	}
	add := func(v int64) error {
		deg := int64(d.Neighbors(v).Len())
		// The pass's accumulators, edges and ids.
		if len(ids) > 0 && lwAccBytes(srcRows, int64(len(ids))+1, edges+deg, arr.rowWidth(), bucket, heads)+8*int64(len(ids)+1) > room {
			if err := pass(); err != nil {
				return err
			}
		}
		ids = append(ids, v)
		blk.set(v)
		edges += deg
		return nil
	}
	if err := eachOf(need, d.NumNodes(), add); err != nil {
		return err
	}
	return pass()
}

// pushPass pushes every source row of arr to the block's destinations ids
// (ascending; also the members of blk), in buckets of bucket sources,
// then computes them.
func (c *lwChunker) pushPass(ctx context.Context, arr lwSource, blk bitset, bucket int64, ids []int64, edges int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.ls.Passes > 0 {
		runtime.GC() // the previous pass's accumulators, before this pass's (see flush)
	}
	t0 := time.Now()
	d := c.t.d
	srcRows := d.NumNodes()
	if arr.index().set != nil {
		srcRows = arr.index().set.count()
	}
	acc, nb := newLWAcc(d, arr.index(), newLWIndex(blk), int64(len(ids)), arr.rowWidth(), bucket, edges, c.outDeg, c.in.gat)
	held := lwAccBytes(srcRows, int64(len(ids)), edges, arr.rowWidth(), bucket, c.in.gat.numHeads()) + 8*int64(len(acc.dst.rank))
	memacct.Add(memacct.Inference, held)
	defer memacct.Add(memacct.Inference, -held)
	defer acc.close()
	c.st.NeighborBytes += nb
	c.ls.Passes++
	c.ls.Edges += edges
	// One sequential sweep, a bucket of sources (in rank = id order) per
	// read, skipping buckets that feed no destination of the block (GCN:
	// nor hold one, for the self loop). A reader goroutine reads the next
	// bucket while this one pushes the last, through two buffers (the
	// first is the bucket's staging rows lwAccBytes counts, which the
	// pass does not otherwise use; the second and the ids are counted
	// here, and in lwPassFixedBytes).
	w := int64(arr.rowWidth())
	second := 4*bucket*w + 2*8*bucket
	memacct.Add(memacct.Inference, second)
	defer memacct.Add(memacct.Inference, -second)
	err := c.sweep(ctx, arr, acc, bucket)
	c.ls.PassSeconds += time.Since(t0).Seconds()
	if err != nil {
		return err
	}
	// The block's destinations, through identity blocks, in chunks
	// under what the pass leaves of the budget.
	in, budget := c.in, c.budget
	c.in = &lwStage{z: acc, self: in.self, selfSet: in.selfSet, pushed: true, width: in.width, raw: in.raw}
	c.budget = max(budget-held, minEvalMemBytes)
	defer func() { c.in, c.budget = in, budget }()
	for _, v := range ids {
		if err := c.addPushed(ctx, v); err != nil {
			return err
		}
	}
	return c.flush(ctx)
}

// sweep reads arr's rows a bucket at a time, in rank order, and pushes
// each bucket that feeds acc, the reading one bucket ahead of the pushing
// (lwReadAhead). Only the reader updates c.ls until it has finished.
func (c *lwChunker) sweep(ctx context.Context, arr lwSource, acc *lwAcc, bucket int64) error {
	return lwReadAhead(ctx, arr.index().set, c.t.d.NumNodes(), bucket, arr.rowWidth(), acc.feeds,
		func(b int64, ids []int64, rows []float32) error {
			return arr.readRun(ids, b*bucket, rows, c.ls)
		},
		func(b int64, ids []int64, rows []float32) error {
			acc.pushBucket(b, ids, rows)
			return nil
		})
}

// lwReadAhead cuts the members of set (nil: all n nodes), in id order,
// into runs of size nodes (the last may be shorter), numbered from 0. For
// each run that want accepts (nil: every run), read fills its rows
// (width floats each) on a goroutine that lwReadAhead owns and waits for,
// and use consumes them on the caller's, one run behind. Exactly two
// buffers of a run's ids and rows exist: the reader collects a run's ids
// straight into the one it holds and hands it over full, so neither side
// waits on the other longer than a run takes. An error from use stops
// the reading at its next run; the first error, or ctx's, is returned.
func lwReadAhead(ctx context.Context, set bitset, n, size int64, width int,
	want func(run int64, ids []int64) bool,
	read, use func(run int64, ids []int64, rows []float32) error) error {
	type buf struct {
		run  int64
		ids  []int64
		rows []float32
	}
	free, full, stop := make(chan buf, 2), make(chan buf, 2), make(chan struct{})
	for range 2 {
		free <- buf{ids: make([]int64, 0, size), rows: make([]float32, size*int64(width))}
	}
	done := make(chan error, 1)
	go func() {
		defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
		defer close(full)
		b := <-free
		var run int64
		// send reads the run collected in b and hands it over, then
		// takes the next free buffer.
		send := func() error {
			b.run, run = run, run+1
			if want != nil && !want(b.run, b.ids) {
				b.ids = b.ids[:0]
				return nil
			}
			select {
			case <-stop:
				return context.Canceled
			default:
			}
			if err := read(b.run, b.ids, b.rows[:int64(len(b.ids))*int64(width)]); err != nil {
				return err
			}
			full <- b
			select {
			case b = <-free:
			case <-stop:
				return context.Canceled
			}
			b.ids = b.ids[:0]
			return ctx.Err()
		}
		err := eachOf(set, n, func(v int64) error {
			b.ids = append(b.ids, v)
			if int64(len(b.ids)) == size {
				return send()
			}
			return nil
		})
		if err == nil && len(b.ids) > 0 {
			err = send()
		}
		done <- err
	}()
	var err error
	for b := range full {
		if err == nil {
			if err = use(b.run, b.ids, b.rows[:int64(len(b.ids))*int64(width)]); err != nil {
				close(stop) // the reader stops at its next run; full is drained
			}
		}
		free <- b
	}
	if rerr := <-done; err == nil {
		err = rerr
	}
	return err
}

// flush computes the pending chunk.
func (c *lwChunker) flush(ctx context.Context) error {
	if len(c.dst) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t, d := c.t, c.t.d
	dst := c.dst
	if c.shape.chunkBytes(int64(len(dst)), c.src, c.edges, c.nextW) >= lwCollectBytes {
		// The previous chunk's arrays and tensors are garbage, but the
		// collector runs only when the heap reaches its goal, which the
		// memory budget puts near the soft limit; a chunk allocated
		// before that collection finishes lands on top of them: at
		// 20 M nodes under 2 GiB gctrace showed a 2,084 MB heap against
		// a 1,678 MB goal, and the process was OOM-killed. The heap is
		// mostly pointer-free arrays, so a collection here took 3–4 ms.
		runtime.GC()
	}
	c.dst, c.src, c.edges = c.dst[:0], 0, 0
	if c.in.pushed {
		return c.flushPushed(dst)
	}
	// The chunk's block: destinations are sources 0..nd−1, the other
	// sources follow in ascending id order.
	nd := len(dst)
	var nbr []int64
	ip := make([]int32, nd+1)
	for i, v := range dst {
		c.seen.clear(v)
		nl := d.Neighbors(v)
		for k := range nl.Len() {
			u := nl.At(k)
			c.seen.clear(u)
			nbr = append(nbr, u)
		}
		ip[i+1] = int32(len(nbr))
	}
	c.st.NeighborBytes += int64(len(nbr)) * c.idxBytes
	idx := make([]int32, len(nbr))
	var others []int64
	if c.pos != nil {
		others = blockByPos(c.pos, dst, nbr, idx)
	} else {
		others = blockBySearch(dst, nbr, idx)
	}
	ns := nd + len(others)
	kb := &kernels.Block{NumDst: nd, NumSrc: ns, Indptr: ip, Indices: idx}
	if t.model.cfg.Kind == ModelGAT {
		kb = withSelfLoops(kb)
	}
	// Transformed rows: z of the sources in two ascending sweeps
	// (destinations, others), self of the destinations.
	zw, sw := c.in.width, c.shape.self
	z := make([]float32, ns*zw)
	k1, err := c.in.z.readRows(dst, z[:nd*zw])
	if err != nil {
		return err
	}
	k2, err := c.in.z.readRows(others, z[nd*zw:])
	if err != nil {
		return err
	}
	var self []float32
	if c.in.self != nil {
		self = make([]float32, nd*sw)
		k3, err := c.in.self.readRows(dst, self)
		if err != nil {
			return err
		}
		k2 += k3
	}
	c.ls.Rows += int64(nd)
	c.ls.Chunks++
	c.ls.GatherRows += int64(ns)
	c.ls.Edges += int64(len(kb.Indices))
	c.ls.GatherBytes += k1 + k2
	if c.outDeg != nil {
		// The chunk's block has every in-edge of its destinations, so
		// their in-degrees are the graph's; its sources' out-degrees
		// are the graph's through SrcDegrees.
		kb.SrcDegrees = make([]int32, ns)
		for j := range ns {
			if j < nd {
				kb.SrcDegrees[j] = c.outDeg[dst[j]]
			} else {
				kb.SrcDegrees[j] = c.outDeg[others[j-nd]]
			}
		}
	}
	return c.compute(dst, kb, z, self)
}

// blockBySearch fills idx with the block index of each of nbr, a chunk's
// neighbour ids, where the block's sources are dst (ascending) and then
// the other ids of nbr in ascending order, which it returns: by sorting
// nbr and searching it per edge.
func blockBySearch(dst, nbr []int64, idx []int32) []int64 {
	nd := len(dst)
	others := slices.Clone(nbr)
	slices.Sort(others)
	others = slices.Compact(others)
	others = slices.DeleteFunc(others, func(u int64) bool {
		_, in := slices.BinarySearch(dst, u)
		return in
	})
	for k, u := range nbr {
		if i, ok := slices.BinarySearch(dst, u); ok {
			idx[k] = int32(i)
		} else {
			j := sort.Search(len(others), func(j int) bool { return others[j] >= u })
			idx[k] = int32(nd + j)
		}
	}
	return others
}

// blockByPos is blockBySearch through pos, a block index per node that is
// −1 for every node on entry and is left so: it sorts only the distinct
// other ids, and looks each edge up in one load.
func blockByPos(pos []int32, dst, nbr []int64, idx []int32) []int64 {
	for i, v := range dst {
		pos[v] = int32(i)
	}
	var others []int64
	for _, u := range nbr {
		if pos[u] == -1 {
			pos[u] = -2 // seen, not a destination
			others = append(others, u)
		}
	}
	slices.Sort(others)
	for j, u := range others {
		pos[u] = int32(len(dst) + j)
	}
	for k, u := range nbr {
		idx[k] = pos[u]
	}
	for _, v := range dst {
		pos[v] = -1
	}
	for _, u := range others {
		pos[u] = -1
	}
	return others
}

// flushPushed computes a chunk of a pushed layer (lwAcc): each
// destination's one source is its summed row, through an identity block.
func (c *lwChunker) flushPushed(dst []int64) error {
	nd := len(dst)
	ip, idx := make([]int32, nd+1), make([]int32, nd)
	for i := range nd {
		ip[i+1], idx[i] = int32(i+1), int32(i)
	}
	z := make([]float32, nd*c.in.width)
	if _, err := c.in.z.readRows(dst, z); err != nil {
		return err
	}
	var self []float32
	if c.in.self != nil {
		self = make([]float32, nd*c.shape.self)
		k, err := c.in.self.readRows(dst, self)
		c.ls.GatherBytes += k
		if err != nil {
			return err
		}
	}
	c.ls.Rows += int64(nd)
	c.ls.Chunks++
	return c.compute(dst, &kernels.Block{NumDst: nd, NumSrc: nd, Indptr: ip, Indices: idx}, z, self)
}

// compute aggregates a chunk's block over its sources' transformed rows z
// (and SAGE's self rows of its destinations), then hands the logits to fn
// (last layer) or stores the next layer's transform of the output.
func (c *lwChunker) compute(dst []int64, kb *kernels.Block, z, self []float32) error {
	t := c.t
	nd, ns, zw, sw := kb.NumDst, kb.NumSrc, c.in.width, c.shape.self
	t.beMu.Lock()
	defer t.beMu.Unlock()
	be := t.be
	db, err := be.UploadBlock(kb)
	if err != nil {
		return err
	}
	defer be.FreeBlock(db)
	tp := &tape{be: be}
	defer tp.free()
	defer c.bar.Add(int64(nd))
	return tp.run(func() {
		var selfT kernels.Tensor
		if self != nil {
			selfT = tp.upload(nd, sw, self)
		}
		zt := tp.upload(ns, zw, z)
		if c.in.raw {
			zt = t.model.layers[c.l].(aggregateFirst).zOnly(tp, zt)
		}
		y := t.model.layers[c.l].aggregate(tp, &devBlock{blk: db}, zt, selfT)
		if c.out == nil {
			if e := c.fn(dst, y); e != nil {
				panic(tapeError{e})
			}
			return
		}
		be.ReLU(y, y)
		t.lwStore(tp, c.l+1, y, dst, c.out, c.ls)
	})
}

// perLayer lists f of every layer's stats.
func perLayer[T any](s *LayerwiseStats, f func(*LayerStats) T) []T {
	r := make([]T, len(s.Layers))
	for i := range s.Layers {
		r[i] = f(&s.Layers[i])
	}
	return r
}

// rows lists the rows computed per layer.
func (s *LayerwiseStats) rows() []int64 {
	return perLayer(s, func(l *LayerStats) int64 { return l.Rows })
}

// chunks lists the chunks per layer.
func (s *LayerwiseStats) chunks() []int {
	return perLayer(s, func(l *LayerStats) int { return l.Chunks })
}

// gatherRows lists the transformed rows the chunks gathered (or the
// passes read) per layer.
func (s *LayerwiseStats) gatherRows() []int64 {
	return perLayer(s, func(l *LayerStats) int64 { return l.GatherRows })
}

// passes lists the push passes per layer.
func (s *LayerwiseStats) passes() []int {
	return perLayer(s, func(l *LayerStats) int { return l.Passes })
}

// stages lists where each layer's transformed input was held: lwMemory,
// lwPush, lwFiles or lwGather.
func (s *LayerwiseStats) stages() []string {
	return perLayer(s, func(l *LayerStats) string {
		switch {
		case l.Pushed:
			return lwPush
		case l.InMemory:
			return lwMemory
		case l.Passes > 0:
			return lwFiles
		}
		return lwGather
	})
}

// tenths rounds seconds to 0.1 s.
func tenths(sec float64) float64 { return math.Round(10*sec) / 10 }

// phaseSeconds lists, rounded to 0.1 s, layer 0's pass over the feature
// rows and each layer's push passes.
func (s *LayerwiseStats) phaseSeconds() (input float64, passes []float64) {
	return tenths(s.Layers[0].InputSeconds), perLayer(s, func(l *LayerStats) float64 { return tenths(l.PassSeconds) })
}

// layerSeconds lists the seconds per layer, rounded to 0.1 s (layer 0's
// include the pass over the feature rows).
func (s *LayerwiseStats) layerSeconds() []float64 {
	return perLayer(s, func(l *LayerStats) float64 { return tenths(l.Seconds) })
}
