package partition

import (
	"math"
	"math/bits"
	"runtime/debug"
	"sync"

	"github.com/ssdgnn/ssdgnn/storage"
)

// levelSpec describes one streaming partitioning problem: k parts over a
// scope of nodes (the whole graph, or one first-level part).
type levelSpec struct {
	k      int
	nodes  []int64 // scope, ascending; nil = every node 0..n-1
	n      int64   // |scope|
	m      float64 // undirected edges inside the scope (for α)
	t      int64   // training nodes in scope
	order  []int64 // stream order (ids); nil = nodes (or 0..n-1)
	out    []int32 // global output array; out[v] = base + local part
	base   int32
	filter bool // Bloom membership (Fennel) rather than exact (FennelExact)
	// capN and capT cap every part's nodes and training nodes
	// (balance.go); zero means partCap(n, k, Epsilon) and partCap(t, k,
	// Epsilon).
	capN, capT int64

	// Scope test for neighbours (level 2): u is in scope iff
	// scopeArr[u] == scopePart, for both methods: the level-1 assignment
	// is resident anyway, and one load answers exactly where a test of
	// the level-1 filters costs h row loads and admits false positives
	// (docs/benchmarks.md, "Partition: phase times"). Nil for the whole
	// graph.
	scopeArr  []int32
	scopePart int32

	// done is an N-bit scratch bitset (global ids) for Fennel restreaming:
	// bit v is set once v has been re-placed in the current pass. Every bit
	// of the scope is clear on entry and on return. Allocated if nil.
	// Several streams may share one (level2Sweep): a stream only tests
	// the bits of neighbours in its own scope.
	done []uint64
}

// streamer runs FENNEL over one levelSpec. It is used by one goroutine,
// which may fan out to helper goroutines for high-degree nodes.
type streamer struct {
	d     *storage.Dataset
	opts  *Options
	spec  levelSpec
	train func(v int64) bool

	alpha, gamma, lambda, avgT float64
	capN, capT                 int64
	size, trainLoad            []int64
	// sumRoom is Σ_P min(training room, node room); unplacedT counts the
	// training nodes not currently placed. A non-training node may not
	// take the last node slot a training node needs (see allowed).
	sumRoom, unplacedT int64
	all, trn           *tourney

	counts  []int32
	touched []int32
	mark    []bool

	// Bloom state.
	filters     *sliced
	prev        *sliced // previous pass (restreaming)
	hs          *hasher
	mask        []uint64
	filterBytes int64

	// Scratch.
	nbrs []int64
	locs []uint64
	rows []uint64 // countBatched: row offsets, then the rows' words

	// Statistics of the last pass.
	seen, internal int64   // neighbours already assigned / of them in v's part
	placed         int64   // nodes placed in this pass
	intra          []int64 // per part: edges to earlier nodes of the same part
	onProgress     func(done int64, seen, internal int64)
}

func newStreamer(d *storage.Dataset, o *Options, spec levelSpec, isTrain func(int64) bool) *streamer {
	s := &streamer{d: d, opts: o, spec: spec, train: isTrain, gamma: o.Gamma, lambda: o.Lambda}
	k := spec.k
	n := float64(max(spec.n, 1))
	s.alpha = o.AlphaScale * math.Pow(float64(k), o.Gamma-1) * max(spec.m, 1) / math.Pow(n, o.Gamma)
	if !(s.alpha > 0 && s.alpha <= math.MaxFloat64) {
		// k^(γ−1) or n^γ overflowed (a large Gamma): the same α from
		// logarithms, which at worst underflows to 0.
		s.alpha = o.AlphaScale * math.Exp((o.Gamma-1)*math.Log(float64(k))+math.Log(max(spec.m, 1))-o.Gamma*math.Log(n))
	}
	s.capN, s.capT = spec.capN, spec.capT
	if s.capN == 0 {
		s.capN = partCap(spec.n, k, o.Epsilon)
	}
	if s.capT == 0 {
		s.capT = partCap(spec.t, k, o.Epsilon)
	}
	s.avgT = max(float64(spec.t)/float64(k), 1)
	s.size = make([]int64, k)
	s.trainLoad = make([]int64, k)
	s.intra = make([]int64, k)
	s.all, s.trn = newTourney(k), newTourney(k)
	s.counts = make([]int32, k)
	s.mark = make([]bool, k)
	if spec.filter {
		s.filters = newSliced(k, s.capN, o.FalsePositive)
		s.filterBytes = s.filters.bytes()
		if o.Passes > 1 {
			s.filterBytes *= 2 // previous and current pass
		}
		s.hs = newHasher(s.filters.h)
		s.mask = make([]uint64, s.filters.words)
	}
	for p := range k {
		s.refresh(p)
		s.sumRoom += s.room(p)
	}
	s.unplacedT = spec.t
	return s
}

// partCap is a part's cap for n items over k parts: ceil((1+ε)·n/k) of
// the decimal ε the caller wrote. float64 cannot hold 0.1, so (1+ε)·n/k
// can land just above an integer the decimal product equals (1.1·50000/100
// is 550.0000000000001), and its ceiling was one more than promised; a
// product within a relative 1e-12 above an integer is that integer. The
// cap never falls below ceil(n/k), so k parts always hold n.
func partCap(n int64, k int, eps float64) int64 {
	x := (1 + eps) * float64(n) / float64(k)
	c := math.Ceil(x)
	if r := math.Round(x); r < c && x-r <= 1e-12*x {
		c = r
	}
	return min(n, max(int64(c), (n+int64(k)-1)/int64(k)))
}

// hashes is how many hash locations a neighbour carries: the filters' h
// (Fennel), or 0.
func (s *streamer) hashes() uint {
	if s.filters == nil {
		return 0
	}
	return s.filters.h
}

// room is how many more training nodes part p can take.
func (s *streamer) room(p int) int64 {
	if s.spec.t == 0 {
		return 0
	}
	return min(s.capT-s.trainLoad[p], s.capN-s.size[p])
}

// move adds dn nodes, of which dt training nodes, to part p.
func (s *streamer) move(p int, dn, dt int64) {
	s.sumRoom -= s.room(p)
	s.size[p] += dn
	s.trainLoad[p] += dt
	s.unplacedT -= dt
	s.sumRoom += s.room(p)
	s.refresh(p)
}

// allowed reports whether a non-training node may join p without leaving
// too few slots for the training nodes still to be placed.
func (s *streamer) allowed(p int) bool {
	if s.spec.t == 0 || s.capN-s.size[p] > s.capT-s.trainLoad[p] {
		return true
	}
	return s.sumRoom-1 >= s.unplacedT
}

func (s *streamer) penalty(p int) float64 {
	sz := float64(s.size[p])
	var g float64
	if s.gamma == 1.5 {
		g = math.Sqrt(sz)
	} else {
		g = math.Pow(sz, s.gamma-1)
	}
	pen := s.alpha*s.gamma*g + s.lambda*float64(s.trainLoad[p])/s.avgT
	if !(pen <= math.MaxFloat64) {
		// Overflowed (+Inf) or 0·Inf (NaN), from a large Gamma or Lambda:
		// the largest finite penalty, since the tournaments read +Inf as
		// "full" and NaN compares false (before, --lambda 1e308 ended in
		// ErrInfeasible and --gamma 1e10 left parts empty).
		pen = math.MaxFloat64
	}
	return pen
}

func (s *streamer) fullN(p int) bool { return s.size[p] >= s.capN }
func (s *streamer) fullT(p int) bool { return s.spec.t > 0 && s.trainLoad[p] >= s.capT }

// refresh recomputes part p's entries in both tournaments.
func (s *streamer) refresh(p int) {
	pen := s.penalty(p)
	if s.fullN(p) {
		s.all.set(p, math.Inf(1))
		s.trn.set(p, math.Inf(1))
		return
	}
	s.all.set(p, pen)
	if s.fullT(p) {
		s.trn.set(p, math.Inf(1))
	} else {
		s.trn.set(p, pen)
	}
}

func (s *streamer) touch(p int32) {
	if !s.mark[p] {
		s.mark[p] = true
		s.touched = append(s.touched, p)
	}
}

func (s *streamer) isDone(u int64) bool {
	return s.spec.done[u>>6]&(1<<(u&63)) != 0
}

// gather loads v's in-scope neighbours (not v itself) into s.nbrs and,
// for Bloom, their hash locations, h per neighbour, into s.locs.
func (s *streamer) gather(v int64) {
	s.nbrs, s.locs = s.gatherTo(v, s.nbrs[:0], s.locs[:0], s.hs)
}

// gatherTo appends v's in-scope neighbours (not v itself) to nbrs and,
// for Bloom, their hash locations from hs to locs. Neighbours out of
// scope are dropped before they are hashed. It reads only what no
// stream writes (the CSR and the level-1 assignment), so the read-ahead
// goroutine calls it too, with its own hasher.
func (s *streamer) gatherTo(v int64, nbrs []int64, locs []uint64, hs *hasher) ([]int64, []uint64) {
	start := len(nbrs)
	nbrs = s.d.Neighbors(v).AppendTo(nbrs)
	scope, sp := s.spec.scopeArr, s.spec.scopePart
	j := start
	for _, u := range nbrs[start:] {
		if u == v || scope != nil && scope[u] != sp {
			continue
		}
		if s.spec.filter {
			locs = append(locs, hs.locations(u)...)
		}
		nbrs[j] = u
		j++
	}
	return nbrs[:j], locs
}

// count fills s.counts/s.touched with |N(v) ∩ P| for every part P holding
// a neighbour.
func (s *streamer) count() {
	nb := s.nbrs
	if !s.spec.filter {
		ex := s.spec.out
		base := s.spec.base
		if s.parallel(len(nb)) {
			s.countParallel(func(lo, hi int, cnt []int32, touch func(int32)) {
				for _, u := range nb[lo:hi] {
					if q := ex[u]; q >= 0 {
						q -= base
						cnt[q]++
						touch(q)
					}
				}
			})
			return
		}
		for _, u := range nb {
			if q := ex[u]; q >= 0 {
				q -= base
				s.counts[q]++
				s.touch(q)
			}
		}
		return
	}
	// Bloom: one bit-sliced lookup per neighbour yields every part that
	// (probably) holds it. A neighbour re-placed earlier in this pass is
	// looked up in the current filters, any other in the previous pass's.
	if s.filters.words <= 2 && !s.parallel(len(nb)) {
		s.countBatched()
		return
	}
	if s.parallel(len(nb)) {
		s.countParallel(func(lo, hi int, cnt []int32, touch func(int32)) {
			mask := make([]uint64, s.filters.words)
			for j := lo; j < hi; j++ {
				if s.lookup(nb[j], j, mask) {
					for i, x := range mask {
						for x != 0 {
							q := int32(i<<6 + bits.TrailingZeros64(x))
							x &= x - 1
							cnt[q]++
							touch(q)
						}
					}
				}
			}
		})
		return
	}
	mask := s.mask
	for j, u := range nb {
		if !s.lookup(u, j, mask) {
			continue
		}
		for i, x := range mask {
			for x != 0 {
				q := int32(i<<6 + bits.TrailingZeros64(x))
				x &= x - 1
				s.counts[q]++
				s.touch(q)
			}
		}
	}
}

// countBatched is count's Bloom path for rows of one or two words, in
// three phases so that the rows' cache misses overlap: every neighbour's
// row offsets (arithmetic only), then every row's words loaded in one
// tight loop, then the AND and the count per neighbour. A per-neighbour
// lookup waits on its rows before the next neighbour's loads issue, and
// once the filters outgrow the processor's cache each row is a miss
// (docs/benchmarks.md, "The 20 M rung"); loaded together, many misses are
// in flight at once. It counts exactly what lookup does for each
// neighbour, without lookup's early exit (TestCountBatched).
func (s *streamer) countBatched() {
	nb := s.nbrs
	f := s.filters
	h, w := int(f.h), f.words
	need := len(nb) * h * w
	if cap(s.rows) < need {
		s.rows = make([]uint64, need)
	}
	rows := s.rows[:need]
	for j := range nb {
		l := s.locs[j*h : (j+1)*h]
		o := rows[j*h*w : (j+1)*h*w : (j+1)*h*w]
		for i, x := range l {
			o[i*w] = f.fm.mod(x) * uint64(w)
		}
	}
	for j, u := range nb {
		src := f.bits
		if s.prev != nil && !s.isDone(u) {
			src = s.prev.bits
		}
		o := rows[j*h*w : (j+1)*h*w : (j+1)*h*w]
		if w == 1 {
			for i := range o {
				o[i] = src[o[i]]
			}
			continue
		}
		for i := 0; i < len(o); i += 2 {
			r := o[i]
			o[i], o[i+1] = src[r], src[r+1]
		}
	}
	for j := range nb {
		o := rows[j*h*w : (j+1)*h*w : (j+1)*h*w]
		var x0, x1 uint64 = ^uint64(0), ^uint64(0)
		if w == 1 {
			x1 = 0
			for _, x := range o {
				x0 &= x
			}
		} else {
			for i := 0; i < len(o); i += 2 {
				x0 &= o[i]
				x1 &= o[i+1]
			}
		}
		for i, x := range [2]uint64{x0, x1} {
			for x != 0 {
				q := int32(i<<6 + bits.TrailingZeros64(x))
				x &= x - 1
				s.counts[q]++
				s.touch(q)
			}
		}
	}
}

// lookup ANDs the rows of neighbour j (id u) into mask.
func (s *streamer) lookup(u int64, j int, mask []uint64) bool {
	f := s.filters
	l := s.locs[j*int(f.h) : (j+1)*int(f.h)]
	if s.prev != nil && !s.isDone(u) {
		f = s.prev
	}
	return f.lookup(l, mask)
}

func (s *streamer) parallel(deg int) bool {
	return s.opts.Workers > 1 && s.opts.ParallelDegree > 0 && deg >= s.opts.ParallelDegree
}

// countParallel splits the neighbour list into Workers chunks, counts each
// into a private array and merges in chunk order (sums are order-free, so
// the result is deterministic).
func (s *streamer) countParallel(body func(lo, hi int, cnt []int32, touch func(int32))) {
	w := s.opts.Workers
	n := len(s.nbrs)
	type part struct {
		cnt     []int32
		touched []int32
	}
	parts := make([]part, w)
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
			defer wg.Done()
			cnt := make([]int32, s.spec.k)
			var touched []int32
			body(lo, hi, cnt, func(q int32) {
				if cnt[q] == 1 {
					touched = append(touched, q)
				}
			})
			parts[i] = part{cnt, touched}
		}()
	}
	wg.Wait()
	for _, pt := range parts {
		for _, q := range pt.touched {
			s.touch(q)
		}
		for _, q := range s.touched {
			s.counts[q] += pt.cnt[q]
		}
	}
}

// choose picks v's part from the counted candidates and the globally
// least-penalised non-full part.
func (s *streamer) choose(isTrain bool) (int, error) {
	best, bestScore := -1, math.Inf(-1)
	consider := func(p int) {
		if p < 0 || s.fullN(p) || (isTrain && s.fullT(p)) || (!isTrain && !s.allowed(p)) {
			return
		}
		sc := float64(s.counts[p]) - s.penalty(p)
		if best < 0 || sc > bestScore ||
			(sc == bestScore && (s.size[p] < s.size[best] || (s.size[p] == s.size[best] && p < best))) {
			best, bestScore = p, sc
		}
	}
	for _, p := range s.touched {
		consider(int(p))
	}
	if isTrain {
		consider(s.trn.min())
	} else if p := s.all.min(); p >= 0 && s.allowed(p) {
		consider(p)
	} else {
		// The least-loaded part must keep its slots for training nodes
		// (rare: only when the training slack is exhausted): scan.
		for p := range s.spec.k {
			if s.counts[p] == 0 {
				consider(p)
			}
		}
	}
	if best < 0 {
		return -1, ErrInfeasible
	}
	return best, nil
}

// run streams every pass.
func (s *streamer) run(passes int) error {
	if s.readsAhead() {
		return s.runAhead(passes)
	}
	for pass := range passes {
		s.beginPass(pass)
		for i := range s.streamLen() {
			if err := s.place(s.streamAt(i), pass); err != nil {
				return err
			}
		}
		s.endPass(pass)
	}
	s.prev = nil
	return nil
}

// beginPass starts pass number pass (0-based): from the second on, the
// filters of the previous pass become s.prev.
func (s *streamer) beginPass(pass int) {
	sp := &s.spec
	if pass > 0 && sp.filter {
		if s.prev == nil {
			s.prev = newSliced(sp.k, s.capN, s.opts.FalsePositive)
		} else {
			s.prev.reset()
		}
		s.prev, s.filters = s.filters, s.prev
		if sp.done == nil {
			sp.done = make([]uint64, (s.d.NumNodes()+63)/64)
		}
	}
	s.seen, s.internal, s.placed = 0, 0, 0
	clear(s.intra)
}

// place streams v, the next node of the scope's stream order, in pass.
func (s *streamer) place(v int64, pass int) error {
	s.gather(v)
	var own []uint64
	if s.spec.filter {
		own = s.hs.locations(v) // valid until the next hash: none before add
	}
	return s.placeGathered(v, pass, own)
}

// placeGathered is place once v's neighbours are in s.nbrs and s.locs;
// own holds v's hash locations (Bloom; nil otherwise).
func (s *streamer) placeGathered(v int64, pass int, own []uint64) error {
	sp := &s.spec
	isTrain := s.train(v)
	if pass > 0 {
		old := int(sp.out[v] - sp.base)
		if isTrain {
			s.move(old, -1, -1)
		} else {
			s.move(old, -1, 0)
		}
		if !sp.filter {
			sp.out[v] = -1
		}
	}
	s.count()
	p, err := s.choose(isTrain)
	if err != nil {
		return err
	}
	for _, q := range s.touched {
		s.seen += int64(s.counts[q])
	}
	s.internal += int64(s.counts[p])
	s.intra[p] += int64(s.counts[p])
	for _, q := range s.touched {
		s.counts[q] = 0
		s.mark[q] = false
	}
	s.touched = s.touched[:0]
	sp.out[v] = sp.base + int32(p)
	if sp.filter {
		s.filters.add(own, p)
		if pass > 0 {
			sp.done[v>>6] |= 1 << (v & 63)
		}
	}
	if isTrain {
		s.move(p, 1, 1)
	} else {
		s.move(p, 1, 0)
	}
	s.placed++
	if s.placed%4096 == 0 {
		if err := s.opts.ctx.Err(); err != nil {
			return err
		}
		if s.onProgress != nil {
			s.onProgress(4096, s.seen, s.internal)
		}
	}
	return nil
}

// endPass ends pass: it reports the pass's last nodes and clears the
// scope's done bits.
func (s *streamer) endPass(pass int) {
	if s.onProgress != nil {
		s.onProgress(s.placed%4096, s.seen, s.internal)
	}
	if pass > 0 && s.spec.filter {
		s.clearDone()
	}
}

// clearDone clears the scope's bits of spec.done.
func (s *streamer) clearDone() {
	if s.spec.nodes == nil {
		clear(s.spec.done)
		return
	}
	for _, v := range s.spec.nodes {
		s.spec.done[v>>6] = 0
	}
}

func (s *streamer) streamLen() int { return int(s.spec.n) }

func (s *streamer) streamAt(i int) int64 {
	switch {
	case s.spec.order != nil:
		return s.spec.order[i]
	case s.spec.nodes != nil:
		return s.spec.nodes[i]
	}
	return int64(i)
}
