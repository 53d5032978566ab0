package train

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/kernels"
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
	// InputRows sums the chunks' input rows (a source feeding two chunks
	// is read twice); Edges the chunks' edges.
	InputRows int64 `json:"input_rows"`
	Edges     int64 `json:"edges"`
	// InputBytes are the input rows' bytes: feature rows through the
	// feature cache on layer 0, the previous layer's temporary array on
	// the others. BytesWritten is what the layer wrote to its own
	// temporary array (0 for the last layer).
	InputBytes   int64   `json:"input_bytes"`
	BytesWritten int64   `json:"bytes_written"`
	Seconds      float64 `json:"seconds"`
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
	// field's expansion, the GCN out-degree pass and every chunk's lists).
	NeighborBytes int64 `json:"neighbor_bytes"`
	// ChunkBytes is the bound on one chunk's working memory; FixedBytes
	// the pass's per-node state (receptive-field bitsets, GCN degrees).
	ChunkBytes int64   `json:"chunk_bytes"`
	FixedBytes int64   `json:"fixed_bytes"`
	Seconds    float64 `json:"seconds"`
}

// BytesRead is the input and neighbour-list bytes of the pass.
func (s *LayerwiseStats) BytesRead() int64 {
	n := s.NeighborBytes
	for _, l := range s.Layers {
		n += l.InputBytes
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

func (b bitset) count() int64 {
	var n int
	for _, x := range b {
		n += bits.OnesCount64(x)
	}
	return int64(n)
}

// evalChunkBytes is the bound on a layer-wise chunk: Options.EvalMemBytes,
// else the training working set (free while evaluating), else
// DefaultEvalMemBytes.
func (t *Trainer) evalChunkBytes() int64 {
	b := t.o.EvalMemBytes
	if b <= 0 {
		b = t.mem.WorkingSetBytes
	}
	if b <= 0 {
		b = DefaultEvalMemBytes
	}
	return max(b, minEvalMemBytes)
}

// lwLayer is what a chunk of layer l needs to know about its shapes.
type lwLayer struct {
	in, out int // input and output widths
	work    int // widest per-source intermediate (GAT's H·F), 0 otherwise
	heads   int
}

func (m *Model) lwShapes() []lwLayer {
	c := m.cfg
	s := make([]lwLayer, c.Layers)
	in := c.InDim
	for l := range s {
		out := c.Hidden
		if l == c.Layers-1 {
			out = c.Classes
		}
		s[l] = lwLayer{in: in, out: out}
		if c.Kind == ModelGAT {
			s[l].work, s[l].heads = c.Heads*out, c.Heads
			if l < c.Layers-1 {
				out *= c.Heads
				s[l].out = out
			}
		}
		in = out
	}
	return s
}

// chunkBytes estimates one chunk's working memory: the input rows on the
// host and on the backend, the layer's intermediates and output (host
// copy included), the chunk's neighbour ids and the block (host CSR, the
// backend's copy and its transpose, GAT's per-edge scores).
func (s lwLayer) chunkBytes(dst, src, edges int64) int64 {
	perSrc := int64(8*s.in + 4*s.work + 8)
	perDst := int64(8*s.in + 12*max(s.out, s.work) + 16)
	perEdge := int64(8 + 12 + 8*s.heads)
	return src*perSrc + dst*perDst + edges*perEdge
}

// forwardLayer runs layer l of the model in evaluation mode (no dropout),
// followed by ReLU below the last layer: what forward does to that layer.
func (m *Model) forwardLayer(t *tape, l int, blk *devBlock, x kernels.Tensor) kernels.Tensor {
	h := m.layers[l].forward(t, blk, x)
	if l < len(m.layers)-1 {
		t.be.ReLU(h, h)
	}
	return h
}

// layerwise runs exact layer-wise inference for targets (sorted, unique)
// and calls fn with each chunk of targets (ascending) and its logits. The
// layers below the last write their outputs to temporary .npy arrays under
// the dataset directory (os.TempDir when it is not writable), removed
// before it returns, cancelled or not.
func (t *Trainer) layerwise(ctx context.Context, targets []int64, fn func(ids []int64, logits kernels.Tensor) error) (*LayerwiseStats, error) {
	t0 := time.Now()
	d, m := t.d, t.model
	n := d.NumNodes()
	L := len(m.layers)
	st := &LayerwiseStats{Targets: int64(len(targets)), ChunkBytes: t.evalChunkBytes(), Layers: make([]LayerStats, L)}
	if len(targets) == 0 {
		return st, nil
	}
	idxBytes := int64(4)
	if d.Indices32() == nil {
		idxBytes = 8
	}
	// need[l]: the nodes whose layer-l output is needed (nil: all).
	need := make([]bitset, L)
	need[L-1] = newBitset(n)
	for _, v := range targets {
		need[L-1].set(v)
	}
	for l := L - 1; l > 0; l-- {
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
		if nb.count() < n {
			need[l-1] = nb
			st.Restricted = true
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
	for _, b := range need {
		st.FixedBytes += b.bytes()
	}
	// GCN normalises by full-graph out-degrees; a chunk's block only
	// knows its own, so its input rows are rescaled (see gcnRescale).
	var outDeg []int32
	if m.cfg.Kind == ModelGCN {
		outDeg = make([]int32, n)
		if ix := d.Indices32(); ix != nil {
			for _, u := range ix {
				outDeg[u]++
			}
		} else {
			for _, u := range d.Indices64() {
				outDeg[u]++
			}
		}
		st.NeighborBytes += d.NumEdges() * idxBytes
		st.FixedBytes += 4 * n
	}
	dir, err := os.MkdirTemp(d.Dir(), ".layerwise-")
	if err != nil {
		if dir, err = os.MkdirTemp("", "ssdgnn-layerwise-"); err != nil {
			return st, fmt.Errorf("train: layer-wise temporary directory: %w", err)
		}
	}
	defer os.RemoveAll(dir)
	shapes := m.lwShapes()
	seen := newBitset(n)
	st.FixedBytes += seen.bytes()
	var prev *lwArray
	defer func() {
		if prev != nil {
			prev.close()
		}
	}()
	for l := range L {
		lt := time.Now()
		ls := &st.Layers[l]
		ls.Layer = l
		var out *lwArray
		if l < L-1 {
			if out, err = createLWArray(filepath.Join(dir, fmt.Sprintf("layer%d.npy", l)), n, shapes[l].out); err != nil {
				return st, err
			}
		}
		c := &lwChunker{t: t, l: l, shape: shapes[l], budget: st.ChunkBytes, seen: seen, in: prev, out: out, outDeg: outDeg, idxBytes: idxBytes, st: st, ls: ls, fn: fn}
		err := c.run(ctx, need[l])
		ls.Seconds = time.Since(lt).Seconds()
		if prev != nil {
			prev.close()
			prev = nil
		}
		if err != nil {
			if out != nil {
				out.close()
			}
			return st, err
		}
		prev = out
	}
	st.Seconds = time.Since(t0).Seconds()
	return st, nil
}

// lwArray is a temporary [n, width] float32 .npy holding one layer's
// outputs, row v at node v.
type lwArray struct {
	f     *os.File
	off   int64
	width int
}

func createLWArray(path string, n int64, width int) (*lwArray, error) {
	hdr, err := npy.EncodeHeader(npy.Float32, []int64{n, int64(width)})
	if err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("train: layer-wise: %w", err)
	}
	a := &lwArray{f: f, off: int64(len(hdr)), width: width}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		a.close()
		return nil, fmt.Errorf("train: layer-wise: %w", err)
	}
	// Rows nobody needs stay holes.
	if err := f.Truncate(a.off + n*int64(width)*4); err != nil {
		a.close()
		return nil, fmt.Errorf("train: layer-wise: %w", err)
	}
	return a, nil
}

func (a *lwArray) close() { a.f.Close() }

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

// readRows reads the rows of ids (ascending) into dst, one pread per run of
// consecutive ids, and returns the bytes read.
func (a *lwArray) readRows(ids []int64, dst []float32) (int64, error) {
	w := a.width
	var nb int64
	err := runs(ids, func(i, j int) error {
		b := f32bytes(dst[i*w : j*w])
		k, err := a.f.ReadAt(b, a.off+ids[i]*int64(w)*4)
		nb += int64(k)
		if err != nil {
			return fmt.Errorf("train: layer-wise read %s: %w", a.f.Name(), err)
		}
		return nil
	})
	return nb, err
}

// writeRows writes src's rows at ids (ascending) and returns the bytes
// written.
func (a *lwArray) writeRows(ids []int64, src []float32) (int64, error) {
	w := a.width
	var nb int64
	err := runs(ids, func(i, j int) error {
		k, err := a.f.WriteAt(f32bytes(src[i*w:j*w]), a.off+ids[i]*int64(w)*4)
		nb += int64(k)
		if err != nil {
			return fmt.Errorf("train: layer-wise write %s: %w", a.f.Name(), err)
		}
		return nil
	})
	return nb, err
}

// lwChunker computes one layer over its destinations in id-order chunks.
type lwChunker struct {
	t        *Trainer
	l        int
	shape    lwLayer
	budget   int64
	seen     bitset // scratch: the current chunk's sources
	in, out  *lwArray
	outDeg   []int32
	idxBytes int64
	st       *LayerwiseStats
	ls       *LayerStats
	fn       func([]int64, kernels.Tensor) error

	dst   []int64
	src   int64 // distinct sources of dst so far (dst included)
	edges int64
}

// run computes the layer for the nodes of need (nil: every node).
func (c *lwChunker) run(ctx context.Context, need bitset) error {
	d := c.t.d
	add := func(v int64) error {
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
		if len(c.dst) > 0 && c.shape.chunkBytes(int64(len(c.dst))+1, c.src+fresh, c.edges+deg+1) > c.budget {
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
	var err error
	if need == nil {
		for v := range d.NumNodes() {
			if err = add(v); err != nil {
				return err
			}
		}
	} else {
		need.each(func(v int64) {
			if err == nil {
				err = add(v)
			}
		})
		if err != nil {
			return err
		}
	}
	return c.flush(ctx)
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
	c.dst, c.src, c.edges = c.dst[:0], 0, 0
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
	others := slices.Clone(nbr)
	slices.Sort(others)
	others = slices.Compact(others)
	others = slices.DeleteFunc(others, func(u int64) bool {
		_, in := slices.BinarySearch(dst, u)
		return in
	})
	ns := nd + len(others)
	idx := make([]int32, len(nbr))
	for k, u := range nbr {
		if i, ok := slices.BinarySearch(dst, u); ok {
			idx[k] = int32(i)
		} else {
			j := sort.Search(len(others), func(j int) bool { return others[j] >= u })
			idx[k] = int32(nd + j)
		}
	}
	kb := &kernels.Block{NumDst: nd, NumSrc: ns, Indptr: ip, Indices: idx}
	if t.model.cfg.Kind == ModelGAT {
		kb = withSelfLoops(kb)
	}
	// Input rows, read in two ascending sweeps (destinations, others).
	in := c.shape.in
	x := make([]float32, ns*in)
	var nb int64
	if c.in == nil {
		if err := t.fc.GatherF32(dst, x[:nd*in]); err != nil {
			return err
		}
		if err := t.fc.GatherF32(others, x[nd*in:]); err != nil {
			return err
		}
		t.normalize(x)
		nb = int64(ns) * d.FeatRowBytes()
	} else {
		k1, err := c.in.readRows(dst, x[:nd*in])
		if err != nil {
			return err
		}
		k2, err := c.in.readRows(others, x[nd*in:])
		if err != nil {
			return err
		}
		nb = k1 + k2
	}
	c.ls.Rows += int64(nd)
	c.ls.Chunks++
	c.ls.InputRows += int64(ns)
	c.ls.Edges += int64(len(kb.Indices))
	c.ls.InputBytes += nb
	if c.outDeg != nil {
		gcnRescale(kb, x, in, func(j int) int32 {
			if j < nd {
				return c.outDeg[dst[j]]
			}
			return c.outDeg[others[j-nd]]
		})
	}
	var host []float32
	if c.out != nil {
		host = make([]float32, nd*c.shape.out)
	}
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
	err = tp.run(func() {
		xt := tp.upload(ns, in, x)
		y := t.model.forwardLayer(tp, c.l, &devBlock{blk: db}, xt)
		if c.out == nil {
			if e := c.fn(dst, y); e != nil {
				panic(tapeError{e})
			}
			return
		}
		if e := be.Download(host, y); e != nil {
			panic(tapeError{e})
		}
	})
	if err != nil || c.out == nil {
		return err
	}
	w, err := c.out.writeRows(dst, host)
	c.ls.BytesWritten += w
	return err
}

// gcnRescale scales x's row j by sqrt(out_j+1)/sqrt(full_j+1), out_j being
// source j's out-degree in kb and full_j its out-degree in the graph, so
// that AggGCN's block-local normaliser 1/sqrt(out_j+1) (see kernels'
// package doc) becomes the full graph's.
func gcnRescale(kb *kernels.Block, x []float32, width int, full func(j int) int32) {
	out := make([]int32, kb.NumSrc)
	for _, j := range kb.Indices {
		out[j]++
	}
	for j := range kb.NumSrc {
		f := full(j)
		if f == out[j] {
			continue
		}
		s := float32(math.Sqrt(float64(out[j]+1) / float64(f+1)))
		for i := j * width; i < (j+1)*width; i++ {
			x[i] *= s
		}
	}
}

// rows lists the rows computed per layer.
func (s *LayerwiseStats) rows() []int64 {
	r := make([]int64, len(s.Layers))
	for i, l := range s.Layers {
		r[i] = l.Rows
	}
	return r
}
