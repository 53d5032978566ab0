package train

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/f32"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/radix"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Values of Options.StreamInput.
const (
	// StreamInputAuto (the default, also "") streams the input layer when
	// the memory plan would otherwise cut batches into micro-batches and
	// the model and input path qualify (see Options.StreamInput).
	StreamInputAuto = "auto"
	// StreamInputOn streams it whenever it qualifies.
	StreamInputOn = "on"
	// StreamInputOff never streams it.
	StreamInputOff = "off"
)

// streamChunkRows is the most input rows the streamed input layer reads
// in one feature-cache gather: a slice of the batch's rows sorted by id,
// so the read planner coalesces within it as it would over the whole
// batch (only the chunk boundaries break runs). Small micro-batches get
// smaller chunks (streamChunk). It is the read session's chunk, and the
// most ids the feature cache keeps a gather's scratch for.
const streamChunkRows = storage.DefaultScatterChunk

// streamRowBytes is the streamed input layer's per-input-row scratch
// beyond the batch's ids and blocks: the id order (int32), the by-source
// offsets (int32) and the order's sort keys (uint64).
const streamRowBytes = 16

// streamEdgeBytes is its scratch per input-layer edge: the by-source
// destination list (int32).
const streamEdgeBytes = 4

// streamChunk is the chunk rows for (micro-)batches of at most rows input
// rows (0: unknown): streamChunkRows, or an eighth of rows (at least 64)
// when that is fewer, so that small batches are not dwarfed by their
// chunks.
func streamChunk(rows int64) int {
	if rows > 0 {
		return int(min(streamChunkRows, max(rows/8, 64)))
	}
	return streamChunkRows
}

// streamSlots is the chunks the streamed input layer holds: one being
// read while the previous one is folded in.
const streamSlots = 2

// streamChunkBytes is the streamed input layer's fixed scratch for
// features of dim columns and chunks of rows rows: streamSlots chunks of
// ids and float32 rows.
func streamChunkBytes(dim, rows int) int64 { return streamSlots * int64(rows) * (8 + 4*int64(dim)) }

// streamQualifies says whether a model of o can stream its input layer,
// and if not, why. o has its defaults.
func streamQualifies(o *Options) (bool, string) {
	switch {
	case o.Model == ModelGAT:
		return false, "GAT's attention needs every source row's projection"
	case len(o.Fanouts) == 0 || o.Fanouts[0] <= 0:
		return false, "the input layer takes every neighbour, so its edges have no bound"
	case o.ZeroCopy == ZeroCopyOn:
		return false, "zero-copy on uploads the input rows themselves"
	case o.ZeroCopy == ZeroCopyAuto && o.Backend != nil && o.Backend.Name() != "cpu":
		return false, "zero-copy auto on a " + o.Backend.Name() + " backend uploads the input rows themselves"
	}
	return true, ""
}

// streamOn says whether training with o (defaults applied) streams its
// input layer: StreamInputOn (auto resolved to on by the memory plan,
// MemPlan.Apply) and a model that qualifies.
func streamOn(o *Options) bool {
	ok, _ := streamQualifies(o)
	return o.StreamInput == StreamInputOn && ok
}

// streamer is the host half of the streamed input layer: it reads a
// batch's input rows in chunks, sorted by id, and folds each chunk into
// the input layer's aggregate and its destinations' own rows, so the
// batch's input rows never exist at once. The next chunk is read while
// one is folded in, so the device does not wait for the arithmetic. One
// gather uses it at a time (start's reader goroutine fills its slots).
type streamer struct {
	op    kernels.AggOp
	own   bool // the layer keeps its destinations' own rows (SAGE)
	dim   int
	chunk int // rows per gather
	// chunk scratch, counted under memacct.BatchBuffers for the trainer's
	// life
	slots [streamSlots]streamSlot
	cur   *streamRun // the started batch, nil between batches
	// per-batch scratch, grown as needed and counted while held
	order, tOff, tDst []int32
	keys              []uint64
	counted           int64
}

func newStreamer(op kernels.AggOp, own bool, dim, chunk int) *streamer {
	chunk = max(chunk, 1)
	s := &streamer{op: op, own: own, dim: dim, chunk: chunk}
	for i := range s.slots {
		s.slots[i] = streamSlot{ids: make([]int64, chunk), rows: make([]float32, chunk*dim)}
	}
	memacct.Add(memacct.BatchBuffers, streamChunkBytes(dim, chunk))
	return s
}

// close releases the counted scratch.
func (s *streamer) close() {
	memacct.Add(memacct.BatchBuffers, -streamChunkBytes(s.dim, s.chunk)-s.counted)
	s.counted = 0
	s.slots = [streamSlots]streamSlot{}
	s.order, s.tOff, s.tDst, s.keys = nil, nil, nil, nil
}

// streamSlot is one chunk: its ids and their rows as read.
type streamSlot struct {
	ids  []int64
	rows []float32
	lo   int   // the chunk's first position in the order
	err  error // the read's error
}

// outputs is the float32 values the streamed input of a batch whose
// input layer has nd destinations occupies: its aggregate and, with own
// rows, those rows.
func (s *streamer) outputs(nd int) int {
	if s.own {
		return 2 * nd * s.dim
	}
	return nd * s.dim
}

// grow returns v resized to n, reallocating when short and counting the
// new capacity in s.counted (memacct.BatchBuffers).
func grow[T int32 | uint64](s *streamer, v []T, n int) []T {
	if cap(v) >= n {
		return v[:n]
	}
	d := int64(unsafe.Sizeof(v[0])) * int64(n-cap(v))
	memacct.Add(memacct.BatchBuffers, d)
	s.counted += d
	return make([]T, n)
}

// sortByID sets order to 0 … len(nodes)−1 sorted by nodes[j], ties by j.
// Ids below 2³² are packed with their index into one key (id<<32 | j) and
// radix-sorted (internal/radix): 24 ms against 191 ms for a comparison
// sort through nodes on a 555 k-row batch (BenchmarkSortByID, one run on
// the 2-vCPU development VM); larger ids take slices.SortFunc. Both give the same
// order.
func (s *streamer) sortByID(order []int32, nodes []int64) {
	s.keys = grow(s, s.keys, len(nodes))
	for j, id := range nodes {
		if uint64(id) >= 1<<32 {
			for j := range order {
				order[j] = int32(j)
			}
			slices.SortFunc(order, func(a, b int32) int {
				return cmp.Or(cmp.Compare(nodes[a], nodes[b]), cmp.Compare(a, b))
			})
			return
		}
		s.keys[j] = uint64(id)<<32 | uint64(j)
	}
	radix.Sort(s.keys)
	for j, k := range s.keys {
		order[j] = int32(uint32(k))
	}
}

// streamRun is a started stream: the reader goroutine filling the slots
// ahead of fold, which owns it from then on.
type streamRun struct {
	b0         *kernels.Block
	free, full chan *streamSlot
	stop       chan struct{}
	wg         sync.WaitGroup
}

// start orders the sources of the batch (nodes, input block b0), lists
// the input layer's edges by source and starts the reader, which reads
// the first chunks into the free slots before fold is called: the
// gather stage starts a batch before it waits for an output buffer, so
// under one batch in flight these reads overlap the last batch's
// computation. fold or abort must follow.
func (s *streamer) start(nodes []int64, b0 *kernels.Block, gather func(ids []int64, dst []float32) error) error {
	if s.cur != nil {
		return fmt.Errorf("train: streamed input: a batch is already started")
	}
	ns, dim := b0.NumSrc, s.dim
	if len(nodes) < ns {
		return fmt.Errorf("train: streamed input: %d nodes for %d sources", len(nodes), ns)
	}
	// The input layer's edges by source: tDst[tOff[j]:tOff[j+1]] are the
	// destinations source j feeds.
	s.tOff = grow(s, s.tOff, ns+1)
	s.tDst = grow(s, s.tDst, len(b0.Indices))
	order := grow(s, s.order, ns) // BySource's fill cursor, then the order
	b0.BySource(s.tOff, s.tDst, nil, order)
	s.sortByID(order, nodes[:ns])
	s.order = order
	// The reader fills free slots in chunk order; fold folds them in as
	// they arrive and hands them back.
	r := &streamRun{b0: b0, free: make(chan *streamSlot, streamSlots),
		full: make(chan *streamSlot, streamSlots), stop: make(chan struct{})}
	for i := range s.slots {
		r.free <- &s.slots[i]
	}
	s.cur = r
	r.wg.Go(func() {
		defer close(r.full)
		for lo := 0; lo < ns; lo += s.chunk {
			var sl *streamSlot
			select {
			case <-r.stop: // checked first: abort reads no more chunks
				return
			default:
			}
			select {
			case sl = <-r.free:
			case <-r.stop:
				return
			}
			hi := min(lo+s.chunk, ns)
			sl.lo, sl.ids, sl.rows = lo, sl.ids[:hi-lo], sl.rows[:(hi-lo)*dim]
			for k, j := range order[lo:hi] {
				sl.ids[k] = nodes[j]
			}
			sl.err = gather(sl.ids, sl.rows)
			r.full <- sl // never blocks: at most streamSlots are out
			if sl.err != nil {
				return
			}
		}
	})
	return nil
}

// abort stops the started batch's reader and waits for it. A no-op when
// none is started.
func (s *streamer) abort() {
	r := s.cur
	if r == nil {
		return
	}
	close(r.stop)
	r.wg.Wait()
	s.cur = nil
}

// fold completes the started batch into out (outputs(nd) values) and
// stops its reader, on every return: out[:nd·dim] is Aggregate(b0, op, x)
// and, with own rows, out[nd·dim:] is x's first nd rows, where x is the
// batch's input rows as gather returns them (ids → rows), then prep
// (normalisation), then the input dropout with drop and seed
// (hostDropout's mask: element r·dim+c of x). The sums run in ascending
// id order of the sources, one chunk after another, so the result is
// deterministic; it equals the kernel's up to float summation order.
func (s *streamer) fold(out []float32, prep func([]float32), drop float32, seed uint64) error {
	r := s.cur
	if r == nil {
		return fmt.Errorf("train: streamed input: fold without start")
	}
	defer s.abort()
	b0, dim := r.b0, s.dim
	nd := b0.NumDst
	if len(out) != s.outputs(nd) {
		return fmt.Errorf("train: streamed input: %d outputs for %d destinations", len(out), nd)
	}
	agg := out[:nd*dim]
	var hd []float32
	if s.own {
		hd = out[nd*dim:]
	}
	clear(agg)
	order := s.order
	// GCN's normalisers (kernels.GCNNorm) without GCNNorms' per-batch
	// arrays: a source's out-degree is its by-source edge count unless
	// the block carries the whole batch's (micro-batches).
	gcn := s.op == kernels.AggGCN
	keep := kernels.NewDropoutKeep(drop)
	free, full := r.free, r.full
	for sl := range full {
		if sl.err != nil {
			return sl.err
		}
		buf := sl.rows
		if prep != nil {
			prep(buf)
		}
		for k, j := range order[sl.lo : sl.lo+len(sl.ids)] {
			row := buf[k*dim : (k+1)*dim]
			if drop > 0 {
				dropSpan(row, &keep, seed, uint64(j)*uint64(dim))
			}
			if hd != nil && int(j) < nd {
				copy(hd[int(j)*dim:], row)
			}
			w := float32(1)
			if gcn {
				deg := s.tOff[j+1] - s.tOff[j]
				if b0.SrcDegrees != nil {
					deg = b0.SrcDegrees[j]
				}
				w = kernels.GCNNorm(deg)
				if int(j) < nd { // GCN's implicit self loop
					f32.Axpy(agg[int(j)*dim:(int(j)+1)*dim], w, row)
				}
			}
			for _, i := range s.tDst[s.tOff[j]:s.tOff[j+1]] {
				f32.Axpy(agg[int(i)*dim:(int(i)+1)*dim], w, row)
			}
		}
		free <- sl // the reader re-slices it for its next chunk
	}
	for i := range nd {
		a := agg[i*dim : (i+1)*dim]
		var f float32
		switch {
		case gcn:
			f = kernels.GCNNorm(b0.Indptr[i+1] - b0.Indptr[i])
		case b0.Indptr[i+1] > b0.Indptr[i]:
			f = 1 / float32(b0.Indptr[i+1]-b0.Indptr[i])
		default:
			continue
		}
		for c := range a {
			a[c] *= f
		}
	}
	return nil
}
