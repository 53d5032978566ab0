package train

import (
	"cmp"
	"fmt"
	"runtime/debug"
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
// offsets (int32), the order's sort keys (uint64) and the row's place in
// a shared scan's union of ids (int64; at most one per member row).
const streamRowBytes = 24

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

// streamOnGraph refuses StreamInputOn where o (given, read against d by
// withFanoutsOf) cannot stream, as Validate does for -1: a fanout at
// least d's longest list is -1 there.
func streamOnGraph(o, given *Options, d *storage.Dataset) error {
	if ok, why := streamQualifies(o); o.StreamInput == StreamInputOn && !ok {
		return fmt.Errorf("%w: stream-input on: %s (fanouts %v on a graph whose longest list has %d entries)", ErrInvalidOptions, why, given.Fanouts, d.MaxDegree())
	}
	return nil
}

// streamOn says whether training with o (defaults applied) streams its
// input layer: StreamInputOn (auto resolved to on by the memory plan,
// MemPlan.Apply) and a model that qualifies.
func streamOn(o *Options) bool {
	ok, _ := streamQualifies(o)
	return o.StreamInput == StreamInputOn && ok
}

// streamer is the host half of the streamed input layer: it reads the
// input rows of a scan, one batch or a group of batches in flight, in
// chunks sorted by id, and folds each chunk into every member batch's
// input-layer aggregate and its destinations' own rows, so no batch's
// input rows exist at once. A row that several members need is read once
// per scan (the group's union of ids is what the read planner merges),
// which is what makes a group cheaper than its batches one by one: the
// denser the ids of a scan, the more of them fall within the merge gap.
// The next chunk is read while one is folded in, so the device does not
// wait for the arithmetic. One scan uses it at a time (start's reader
// goroutine fills its slots).
type streamer struct {
	op    kernels.AggOp
	own   bool // the layer keeps its destinations' own rows (SAGE)
	dim   int
	chunk int // rows per gather
	// chunk scratch, counted under memacct.BatchBuffers for the trainer's
	// life
	slots [streamSlots]streamSlot
	cur   *streamRun // the started scan, nil between scans
	// per-scan scratch, grown as needed and counted while held: one
	// streamMember per batch of the largest scan, the sort keys, the
	// group's union of ids and a row for dropout copies
	members []*streamMember
	keys    []uint64
	union   []int64
	tmp     []float32
	counted int64
}

// streamMember is one batch of a scan: its sources in ascending id order
// and its input layer's edges by source.
type streamMember struct {
	nodes []int64
	b0    *kernels.Block
	// tDst[tOff[j]:tOff[j+1]] are the destinations source j feeds; order
	// lists the sources by ascending id (ties by index).
	order, tOff, tDst []int32
}

// streamInput is what start needs of one batch: its input ids (the first
// b0.NumSrc are the input block's sources) and its input block.
type streamInput struct {
	nodes []int64
	b0    *kernels.Block
}

// streamOutput is where fold puts one batch's result: out of
// outputs(NumDst) values, and the input dropout's probability and seed.
type streamOutput struct {
	out  []float32
	drop float32
	seed uint64
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
	s.members, s.keys, s.union, s.tmp = nil, nil, nil, nil
}

// streamSlot is one chunk: its ids and their rows as read.
type streamSlot struct {
	ids  []int64
	rows []float32
	lo   int   // the chunk's first position in the scan's id order
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
func grow[T int32 | int64 | uint64 | float32](s *streamer, v []T, n int) []T {
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

// streamRun is a started scan: the reader goroutine filling the slots
// ahead of fold, which owns it from then on.
type streamRun struct {
	members    []*streamMember
	free, full chan *streamSlot
	stop       chan struct{}
	wg         sync.WaitGroup
}

// start orders the sources of one batch (nodes, input block b0), lists
// the input layer's edges by source and starts the reader: startGroup
// with one member.
func (s *streamer) start(nodes []int64, b0 *kernels.Block, gather func(ids []int64, dst []float32) error) error {
	return s.startGroup([]streamInput{{nodes, b0}}, gather)
}

// startGroup orders the sources of each batch of in, lists each input
// layer's edges by source, and starts the reader over the scan's ids: one
// batch's sources in ascending id order, or, for a group, the ascending
// union of its batches' sources, each id once. The reader reads the
// first chunks into the free slots before fold is called: the gather
// stage starts a scan before it waits for output buffers, so these reads
// overlap the computation of the batches before. fold or abort must
// follow.
func (s *streamer) startGroup(in []streamInput, gather func(ids []int64, dst []float32) error) error {
	if s.cur != nil {
		return fmt.Errorf("train: streamed input: a scan is already started")
	}
	if len(in) == 0 {
		return fmt.Errorf("train: streamed input: a scan of no batches")
	}
	for len(s.members) < len(in) {
		s.members = append(s.members, &streamMember{})
	}
	members := s.members[:len(in)]
	for m, x := range in {
		ns := x.b0.NumSrc
		if len(x.nodes) < ns {
			return fmt.Errorf("train: streamed input: %d nodes for %d sources", len(x.nodes), ns)
		}
		sm := members[m]
		sm.nodes, sm.b0 = x.nodes[:ns], x.b0
		sm.tOff = grow(s, sm.tOff, ns+1)
		sm.tDst = grow(s, sm.tDst, len(x.b0.Indices))
		order := grow(s, sm.order, ns) // BySource's fill cursor, then the order
		x.b0.BySource(sm.tOff, sm.tDst, nil, order)
		s.sortByID(order, sm.nodes)
		sm.order = order
	}
	// The scan's ids: idAt(k) for k < n, ascending.
	var n int
	var idAt func(k int) int64
	if len(members) == 1 {
		sm := members[0]
		n, idAt = len(sm.order), func(k int) int64 { return sm.nodes[sm.order[k]] }
	} else {
		s.unionOf(members)
		u := s.union
		n, idAt = len(u), func(k int) int64 { return u[k] }
	}
	// The reader fills free slots in chunk order; fold folds them in as
	// they arrive and hands them back.
	r := &streamRun{members: members, free: make(chan *streamSlot, streamSlots),
		full: make(chan *streamSlot, streamSlots), stop: make(chan struct{})}
	for i := range s.slots {
		r.free <- &s.slots[i]
	}
	s.cur = r
	dim := s.dim
	r.wg.Go(func() {
		defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
		defer close(r.full)
		for lo := 0; lo < n; lo += s.chunk {
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
			hi := min(lo+s.chunk, n)
			sl.lo, sl.ids, sl.rows = lo, sl.ids[:hi-lo], sl.rows[:(hi-lo)*dim]
			for k := range sl.ids {
				sl.ids[k] = idAt(lo + k)
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

// unionOf sets s.union to the ascending union of the members' sources,
// each id once: a merge of their sorted orders (a scan holds a few
// members, so the least head is found by a linear pass), into one counted
// buffer of 8 bytes per member row at most.
func (s *streamer) unionOf(members []*streamMember) {
	total := 0
	for _, sm := range members {
		total += len(sm.order)
	}
	u := grow(s, s.union[:cap(s.union)], total)[:0]
	pos := make([]int, len(members))
	for {
		best, least := -1, int64(0)
		for m, sm := range members {
			if p := pos[m]; p < len(sm.order) {
				if id := sm.nodes[sm.order[p]]; best < 0 || id < least {
					best, least = m, id
				}
			}
		}
		if best < 0 {
			break
		}
		if len(u) == 0 || u[len(u)-1] != least {
			u = append(u, least)
		}
		pos[best]++
	}
	s.union = u
}

// abort stops the started scan's reader and waits for it. A no-op when
// none is started.
func (s *streamer) abort() {
	r := s.cur
	if r == nil {
		return
	}
	close(r.stop)
	r.wg.Wait()
	// Drop the batches' arrays: they are freed with their jobs, not kept
	// alive here until the next scan.
	for _, sm := range r.members {
		sm.nodes, sm.b0 = nil, nil
	}
	s.cur = nil
}

// fold completes the started one-batch scan into out: foldGroup with one
// output.
func (s *streamer) fold(out []float32, prep func([]float32), drop float32, seed uint64) error {
	return s.foldGroup([]streamOutput{{out, drop, seed}}, prep)
}

// foldGroup completes the started scan and stops its reader, on every
// return. For member m, outs[m].out (outputs(nd) values) receives
// out[:nd·dim] = Aggregate(b0, op, x) and, with own rows, out[nd·dim:] =
// x's first nd rows, where x is the batch's input rows as gather returns
// them (ids → rows), then prep (normalisation, once per row read), then
// the input dropout with outs[m]'s drop and seed (hostDropout's mask:
// element r·dim+c of x). Each batch's sums run in ascending id order of
// its sources, one chunk after another, whatever the group, so the result
// is deterministic and the same alone or in any group; it equals the
// kernel's up to float summation order.
func (s *streamer) foldGroup(outs []streamOutput, prep func([]float32)) error {
	r := s.cur
	if r == nil {
		return fmt.Errorf("train: streamed input: fold without start")
	}
	defer s.abort()
	if len(outs) != len(r.members) {
		return fmt.Errorf("train: streamed input: %d outputs for a scan of %d batches", len(outs), len(r.members))
	}
	dim := s.dim
	for m, sm := range r.members {
		nd := sm.b0.NumDst
		if len(outs[m].out) != s.outputs(nd) {
			return fmt.Errorf("train: streamed input: %d outputs for %d destinations", len(outs[m].out), nd)
		}
		clear(outs[m].out[:nd*dim])
	}
	single := len(r.members) == 1
	if !single {
		s.tmp = grow(s, s.tmp, dim)
	}
	keeps := make([]kernels.DropoutKeep, len(outs))
	for m := range outs {
		keeps[m] = kernels.NewDropoutKeep(outs[m].drop)
	}
	next := make([]int, len(r.members)) // each member's position in its order
	free, full := r.free, r.full
	for sl := range full {
		if sl.err != nil {
			return sl.err
		}
		buf := sl.rows
		if prep != nil {
			prep(buf)
		}
		last := sl.ids[len(sl.ids)-1]
		for m, sm := range r.members {
			p, c := next[m], 0
			for ; p < len(sm.order); p++ {
				j := sm.order[p]
				var k int
				if single {
					// The chunk is this member's order[lo:lo+len].
					if p >= sl.lo+len(sl.ids) {
						break
					}
					k = p - sl.lo
				} else {
					id := sm.nodes[j]
					if id > last {
						break
					}
					for c < len(sl.ids) && sl.ids[c] < id {
						c++
					}
					if c == len(sl.ids) || sl.ids[c] != id {
						return fmt.Errorf("train: streamed input: internal error: id %d not in its chunk", id)
					}
					k = c
				}
				row := buf[k*dim : (k+1)*dim]
				if o := &outs[m]; o.drop > 0 {
					if !single {
						// Other members need the row as read.
						row = append(s.tmp[:0], row...)
					}
					dropSpan(row, &keeps[m], o.seed, uint64(j)*uint64(dim))
				}
				s.foldRow(sm, outs[m].out, j, row)
			}
			next[m] = p
		}
		free <- sl // the reader re-slices it for its next chunk
	}
	for m, sm := range r.members {
		if next[m] != len(sm.order) {
			return fmt.Errorf("train: streamed input: %d of %d sources folded: the scan ended early", next[m], len(sm.order))
		}
		s.finish(sm, outs[m].out)
	}
	return nil
}

// foldRow adds source j's row (read, normalised, dropped) to member sm's
// aggregate and, when j is a destination, to its own rows.
func (s *streamer) foldRow(sm *streamMember, out []float32, j int32, row []float32) {
	b0, dim := sm.b0, s.dim
	nd := b0.NumDst
	agg := out[:nd*dim]
	if s.own && int(j) < nd {
		copy(out[nd*dim+int(j)*dim:], row)
	}
	w := float32(1)
	if s.op == kernels.AggGCN {
		// GCN's normalisers (kernels.GCNNorm) without GCNNorms'
		// per-batch arrays: a source's out-degree is its by-source edge
		// count unless the block carries the whole batch's
		// (micro-batches).
		deg := sm.tOff[j+1] - sm.tOff[j]
		if b0.SrcDegrees != nil {
			deg = b0.SrcDegrees[j]
		}
		w = kernels.GCNNorm(deg)
		if int(j) < nd { // GCN's implicit self loop
			_, ratio := gcnDst(b0, int(j))
			f32.Axpy(agg[int(j)*dim:(int(j)+1)*dim], w*ratio, row)
		}
	}
	for _, i := range sm.tDst[sm.tOff[j]:sm.tOff[j+1]] {
		f32.Axpy(agg[int(i)*dim:(int(i)+1)*dim], w, row)
	}
}

// gcnDst is destination i's factors in a streamed GCN aggregate (the
// kernels' AggGCN): finish scales its sum by fin, into which foldRow
// folded its self term at weight selfRatio, so that the neighbours come
// out scaled by the neighbour factor and the self term by the self
// factor (kernels.GCNDstNorms, the same without DstDegrees).
func gcnDst(b0 *kernels.Block, i int) (fin, selfRatio float32) {
	deg := b0.Indptr[i+1] - b0.Indptr[i]
	if b0.DstDegrees == nil {
		return kernels.GCNNorm(deg), 1
	}
	nbr, self := kernels.GCNDstNorms(deg, b0.DstDegrees[i])
	if nbr == 0 { // no sampled neighbours: the sum is the self term alone
		return self, 1
	}
	return nbr, self / nbr
}

// finish scales member sm's sums into its aggregate: the mean, or GCN's
// destination normaliser.
func (s *streamer) finish(sm *streamMember, out []float32) {
	b0, dim := sm.b0, s.dim
	gcn := s.op == kernels.AggGCN
	for i := range b0.NumDst {
		a := out[i*dim : (i+1)*dim]
		var f float32
		switch {
		case gcn:
			f, _ = gcnDst(b0, i)
		case b0.Indptr[i+1] > b0.Indptr[i]:
			f = 1 / float32(b0.Indptr[i+1]-b0.Indptr[i])
		default:
			continue
		}
		for c := range a {
			a[c] *= f
		}
	}
}
