package partition

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/internal/bytefmt"
	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// DirName is the subdirectory of a dataset that holds partitionings.
const DirName = "partitions"

// Dir is the directory of partitioning name inside datasetDir.
func Dir(datasetDir, name string) string { return filepath.Join(datasetDir, DirName, name) }

// result is what a method hands to the writer.
type result struct {
	part        []int32
	k, k1, k2   int
	filterBytes int64
	extSeconds  float64
	extRSS      int64
	refine      int   // refinement rounds requested
	refineMoves int64 // nodes moved by refinement
	refineSecs  float64
	// Phase times in seconds: the stream order (BFS), each level's
	// streams, and for level 2 the per-part setup included.
	orderSecs, level1Secs, level2Secs float64
}

// Run partitions d and writes DIR/partitions/<name>/ (see docs/format.md).
// The manifest is written last: an interrupted Run leaves no partitioning
// that Open accepts.
func Run(d *storage.Dataset, opts *Options) (Stats, error) {
	return RunContext(context.Background(), d, opts)
}

// RunContext is Run, stopped by ctx: within about a second of its
// cancellation it removes DIR/partitions/<name>/ (which then holds no
// manifest, so nothing of an older partitioning) and returns an error
// wrapping ctx.Err().
func RunContext(ctx context.Context, d *storage.Dataset, opts *Options) (Stats, error) {
	o := opts.withDataset(d)
	o.ctx = ctx
	if err := o.validate(); err != nil {
		if opts == nil || opts.Parts == 0 {
			// The part count was not given: say where it came from
			// (before, "--first-level: 4 not in [1, --parts=2]" named a
			// --parts no one gave; the review's R5).
			return Stats{}, fmt.Errorf("%w (no part count was given: %d is the default for this dataset's %d training nodes, about one part per %d)",
				err, o.Parts, len(d.TrainIdx()), TrainNodesPerPart)
		}
		return Stats{}, err
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	if n := d.NumNodes(); int64(o.Parts) > n {
		return Stats{}, fmt.Errorf("%w: %d parts for %d nodes: at least %d parts would be empty; use at most %d",
			ErrOptions, o.Parts, n, int64(o.Parts)-n, n)
	}
	if lim, ok := cgroup.SelfMemoryLimit(); ok {
		if opts == nil || opts.Workers == 0 {
			if w := fitWorkers(d, &o, lim); w < o.Workers {
				o.Logger.Info("partition: fewer workers to fit the memory cgroup's limit", "workers", w, "default", o.Workers, "limit", lim)
				o.Workers = w
			}
		}
		if need := MinMemory(d, &o); need > lim {
			terms := fmt.Sprintf("%d bytes a node for the assignment, filters and stream state, the read-ahead", stateBytesPerNode)
			if x := extraWorkersBytes(d.NumNodes(), &o); x > 0 && o.Method != Random {
				terms += fmt.Sprintf(", %s for --workers %d (second-level scratch beyond %d workers; fewer workers need less)", bytefmt.Up(x), o.Workers, measuredWorkers)
			}
			if o.Method == Random {
				terms = "12 bytes a node for the order and the assignment"
			}
			return Stats{}, fmt.Errorf("%w: %s nodes need about %s (%s and %s for the runtime), more than the memory cgroup's limit of %s: raise the limit to at least %s",
				ErrMemory, humanize.Comma(d.NumNodes()), bytefmt.Up(need), terms, humanize.IBytes(runtimeBytes), bytefmt.Down(lim), bytefmt.Up(need))
		}
	}
	if o.Order == OrderAuto {
		o.Order, o.autoWhy = AutoOrder(d, &o)
		o.Logger.Info("partition: stream order "+o.Order, "why", o.autoWhy)
	}
	// The phases hint the CSR mappings for how they read them
	// (adviseCSR); afterwards they are back at the dataset's default.
	defer adviseCSR(d, "")
	start := time.Now()
	memstat.ResetPeak()
	dir := Dir(d.Dir(), o.Name)
	if r := d.Manifest().RelabelledFrom; r != nil && r.Partitioning == o.Name {
		// Even with Force: the dataset's ids are this partitioning's parts
		// in order, and another would break that (validate then fails).
		return Stats{}, fmt.Errorf("%w: partitioning %q defines the id ranges of the relabelled dataset %s (dataset.json relabelled_from); --name gives a new partitioning another name",
			ErrOptions, o.Name, d.Dir())
	}
	out, err := prepareDir(dir, o.Force)
	if err != nil {
		return Stats{}, err
	}
	st, err := run(d, &o, out, start)
	if err != nil {
		// No manifest: the directory is not a partitioning. Remove what
		// was written so that nothing half-done is left behind (a
		// partitioning being replaced stays as it was).
		_ = os.RemoveAll(out)
		return Stats{}, err
	}
	if out != dir {
		if err := replaceDir(dir, out, o.Logger); err != nil {
			return Stats{}, err
		}
	}
	return st, nil
}

// fitWorkers is the most workers, at most o.Workers and at least
// measuredWorkers (or o.Workers when fewer), whose MinMemory fits lim.
// Workers left at the default (one per core) shrink to it: the partition
// does not depend on them, and each second-level worker holds its own
// scratch (workerBytes).
func fitWorkers(d *storage.Dataset, o *Options, lim int64) int {
	c := *o
	for c.Workers > measuredWorkers && MinMemory(d, &c) > lim {
		c.Workers--
	}
	return c.Workers
}

// run computes the assignment and writes it into dir, prepared.
func run(d *storage.Dataset, o *Options, dir string, start time.Time) (Stats, error) {
	o.Logger.Info("partition: start", "dataset", d.Dir(), "name", o.Name, "method", o.Method,
		"k", o.Parts, "k1", o.FirstLevel, "nodes", d.NumNodes(), "edges", d.NumEdges())
	isTrain := trainTest(d.TrainIdx(), d.NumNodes())
	var (
		res result
		err error
	)
	switch o.Method {
	case Fennel, FennelExact:
		res, err = runFennel(d, o, isTrain)
		if err == nil {
			err = adviseCSR(d, OrderID) // refinement and the cut count sweep in id order
		}
		if err == nil && o.Refine > 0 {
			t := time.Now()
			res.refine = o.Refine
			res.refineMoves = refineContext(o.ctx, d, res.part, d.TrainIdx(), res.k, o.Epsilon, o.Refine, o.Progress)
			res.refineSecs = time.Since(t).Seconds()
			o.Logger.Info("partition: refined", "rounds", o.Refine, "moves", res.refineMoves,
				"seconds", res.refineSecs)
		}
	case Random:
		res = runRandom(d, o, isTrain)
	case Metis:
		res, err = runMetis(d, o)
	}
	if err == nil {
		err = o.ctx.Err()
	}
	if err != nil {
		return Stats{}, err
	}
	assignSecs := time.Since(start).Seconds()
	st, err := write(d, dir, o, res, start, assignSecs)
	if err != nil {
		return Stats{}, err
	}
	if st.EmptyParts > 0 && st.EmptyParts*10 >= st.K {
		o.Logger.Warn("partition: many parts are empty; consider fewer --parts", "empty", st.EmptyParts, "parts", st.K,
			"nodes", st.NumNodes)
	}
	o.Logger.Info("partition: done", "name", o.Name, "edge_cut", st.EdgeCut, "max_nodes", st.MaxNodes,
		"seconds", st.WallSeconds, "order_seconds", st.OrderSeconds, "level1_seconds", st.Level1Seconds,
		"level2_seconds", st.Level2Seconds, "refine_seconds", st.RefineSeconds, "write_seconds", st.WriteSeconds,
		"peak_rss_mib", st.PeakRSSBytes>>20)
	return st, nil
}

// adviseCSR hints the CSR mappings of d for streaming in order: sequential
// for OrderID, random otherwise.
func adviseCSR(d *storage.Dataset, order string) error {
	adv := storage.AdviceRandom
	if order == OrderID {
		adv = storage.AdviceSequential
	}
	for _, name := range []string{storage.FileIndptr, storage.FileIndices} {
		if err := d.Advise(name, adv); err != nil {
			return err
		}
	}
	return nil
}

// trainTest returns a membership test over the training ids (each in
// 0..n-1, as storage.Open checks): a bitset of n bits, so a test costs one
// load, where the binary search over the sorted ids that it replaced
// cost log2(len(train)) dependent loads for every node of every pass.
// Measured, the whole partition ran 1–7 % faster, within the run-to-run
// noise (docs/benchmarks.md, "Partition: phase times").
func trainTest(train []int64, n int64) func(int64) bool {
	set := make([]uint64, (n+63)/64)
	for _, v := range train {
		set[v>>6] |= 1 << (v & 63)
	}
	return func(v int64) bool { return set[v>>6]&(1<<(v&63)) != 0 }
}

func newRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream^0x9e3779b97f4a7c15))
}

// shuffled returns a seeded permutation of ids (or of 0..n-1 when ids is
// nil).
func shuffled(ids []int64, n int64, seed int64, stream uint64) []int64 {
	out := make([]int64, n)
	for i := range out {
		if ids != nil {
			out[i] = ids[i]
		} else {
			out[i] = int64(i)
		}
	}
	r := newRand(seed, stream)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// runFennel runs both levels.
func runFennel(d *storage.Dataset, o *Options, isTrain func(int64) bool) (result, error) {
	// OrderID's passes sweep the CSR in storage order: let the kernel
	// read ahead. The other orders visit it at random.
	if err := adviseCSR(d, o.Order); err != nil {
		return result{}, err
	}
	n := d.NumNodes()
	k1, k2 := o.FirstLevel, o.k2()
	useBloom := o.Method == Fennel
	part1 := make([]int32, n)
	for i := range part1 {
		part1[i] = -1
	}
	var order []int64
	tOrder := time.Now()
	switch o.Order {
	case OrderRandom:
		order = shuffled(nil, n, o.Seed, 0)
	case OrderBFS:
		order = bfsOrder(o.ctx, d, o.Seed)
		if err := o.ctx.Err(); err != nil {
			return result{}, err
		}
	}
	orderSecs := time.Since(tOrder).Seconds()
	nt := int64(len(d.TrainIdx()))
	spec := levelSpec{k: k1, n: n, m: float64(d.NumEdges()) / 2, t: nt,
		order: order, out: part1, filter: useBloom}
	spec.capN, spec.capT = level1Caps(n, nt, o.Parts, k2, o.Epsilon)
	s1 := newStreamer(d, o, spec, isTrain)
	task := o.Progress.Start(fmt.Sprintf("partition level 1 (k1=%d)", k1), n*int64(o.Passes), progress.Items)
	t0 := time.Now()
	var done int64
	s1.onProgress = func(add, seen, internal int64) {
		task.Add(add)
		done += add
		if done%(1<<16) < add || add < 4096 {
			task.Describe(describe("partition level 1", done, t0, seen, internal))
		}
	}
	err := s1.run(o.Passes)
	task.Done()
	if err != nil {
		return result{}, err
	}
	res := result{part: part1, k: k1 * k2, k1: k1, k2: k2, filterBytes: s1.filterBytes,
		orderSecs: orderSecs, level1Secs: time.Since(t0).Seconds()}
	o.Logger.Info("partition: level 1 done", "order_seconds", res.orderSecs, "seconds", res.level1Secs)
	if k2 == 1 {
		return res, nil
	}

	// Group the nodes by first-level part (ascending ids within a part).
	order = nil
	off1, mem1 := group(part1, k1)
	final := make([]int32, n)
	for i := range final {
		final[i] = -1
	}
	task = o.Progress.Start(fmt.Sprintf("partition level 2 (k2=%d)", k2), n*int64(o.Passes), progress.Items)
	defer task.Done()
	t0 = time.Now()
	var (
		next        atomic.Int64
		doneNodes   atomic.Int64
		seenAll     atomic.Int64
		internalAll atomic.Int64
		maxFilter   atomic.Int64
		mu          sync.Mutex
		firstErr    error
		errPart     = k1
		wg          sync.WaitGroup
	)
	workers := min(o.Workers, k1)
	intra := intraEdges(d, part1, k1, workers)
	trainPer := make([]int64, k1)
	for _, v := range d.TrainIdx() {
		trainPer[part1[v]]++
	}
	// Level-2 streamers run on the pool; a high-degree node inside one
	// must not fan out again.
	o2 := *o
	o2.Workers = 1
	onProgress := func() func(add, seen, internal int64) {
		var lastSeen, lastIn int64
		return func(add, seen, internal int64) {
			if seen < lastSeen {
				lastSeen, lastIn = 0, 0 // a new pass restarted the counters
			}
			task.Add(add)
			dn := doneNodes.Add(add)
			se := seenAll.Add(seen - lastSeen)
			in := internalAll.Add(internal - lastIn)
			lastSeen, lastIn = seen, internal
			if dn%(1<<16) < add {
				task.Describe(describe("partition level 2", dn, t0, se, in))
			}
		}
	}
	spec2 := func(p int, ord []int64) levelSpec {
		nodes := mem1[off1[p]:off1[p+1]]
		sp := levelSpec{k: k2, nodes: nodes, n: int64(len(nodes)), m: intra[p], t: trainPer[p], order: ord,
			out: final, base: int32(p * k2), filter: useBloom, scopeArr: part1, scopePart: int32(p)}
		sp.capN, sp.capT = level2Caps(sp.n, sp.t, n, nt, o.Parts, o.Epsilon)
		return sp
	}
	if o.Order == OrderID && !o.perPart {
		// Every part streams its members in id order: run all of them
		// at once in one ascending sweep per pass, so the CSR is read in
		// storage order (see level2Sweep).
		fb, err := level2Sweep(d, &o2, part1, k1, workers, spec2, isTrain, onProgress)
		if err != nil {
			return result{}, err
		}
		res.part = final
		res.filterBytes += fb
		res.level2Secs = time.Since(t0).Seconds()
		return res, nil
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer storage.HandleFault(debug.SetPanicOnFault(true)) // a truncated mapped file: a named error, not SIGBUS
			defer wg.Done()
			var done, seen []uint64 // N-bit scratch, reused across parts
			for {
				p := int(next.Add(1) - 1)
				if p >= k1 {
					return
				}
				if err := o.ctx.Err(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr, errPart = err, p
					}
					mu.Unlock()
					return
				}
				nodes := mem1[off1[p]:off1[p+1]]
				if len(nodes) == 0 {
					continue
				}
				var ord []int64
				switch o.Order {
				case OrderRandom:
					ord = shuffled(nodes, int64(len(nodes)), o.Seed, uint64(p)+1)
				case OrderBFS:
					if seen == nil {
						seen = make([]uint64, (n+63)/64)
					}
					ord = bfsScope(d, nodes, part1, int32(p), seen, o.Seed)
				}
				sp := spec2(p, ord)
				if useBloom && o.Passes > 1 {
					if done == nil {
						done = make([]uint64, (n+63)/64)
					}
					sp.done = done
				}
				s2 := newStreamer(d, &o2, sp, isTrain)
				if s2.filterBytes > maxFilter.Load() {
					maxFilter.Store(s2.filterBytes) // racy max is fine: a statistic
				}
				s2.onProgress = onProgress()
				if err := s2.run(o.Passes); err != nil {
					mu.Lock()
					if p < errPart {
						firstErr, errPart = err, p
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	res.part = final
	res.filterBytes += int64(workers) * maxFilter.Load()
	res.level2Secs = time.Since(t0).Seconds()
	return res, nil
}

// intraEdges counts, for every first-level part p of part1 (k1 parts), the
// undirected edges (self loops excluded) with both ends in p: the m of α
// for p's second-level stream. It sweeps the CSR once in id order, split
// into workers contiguous ranges.
func intraEdges(d *storage.Dataset, part1 []int32, k1, workers int) []float64 {
	counts := make([][]int64, max(workers, 1))
	sweepRanges(int64(len(part1)), workers, func(w int, lo, hi int64) {
		e := make([]int64, k1)
		for v := lo; v < hi; v++ {
			same, loops := sameNeighbors(d.Neighbors(v), part1, v)
			e[part1[v]] += int64(same - loops)
		}
		counts[w] = e
	})
	m := make([]float64, k1)
	for p := range m {
		var e int64
		for _, c := range counts {
			e += c[p]
		}
		m[p] = float64(e) / 2
	}
	return m
}

// bfsScope is a breadth-first order over the subgraph induced by nodes
// (ascending; the members of first-level part p), from a seeded start
// node and restarting at the next unvisited member. seen is an N-bit
// scratch set, all clear on entry and on return. Inside one first-level
// part, whose induced subgraph is far sparser across communities than the
// whole graph, this streams communities nearly one at a time.
func bfsScope(d *storage.Dataset, nodes []int64, part1 []int32, p int32, seen []uint64, seed int64) []int64 {
	order := make([]int64, 0, len(nodes))
	start := newRand(seed, uint64(p)+7).IntN(len(nodes))
	var buf []int64
	head := 0
	for i := range nodes {
		r := nodes[(start+i)%len(nodes)]
		if seen[r>>6]&(1<<(r&63)) != 0 {
			continue
		}
		seen[r>>6] |= 1 << (r & 63)
		order = append(order, r)
		for ; head < len(order); head++ {
			buf = d.Neighbors(order[head]).AppendTo(buf[:0])
			for _, u := range buf {
				if part1[u] == p && seen[u>>6]&(1<<(u&63)) == 0 {
					seen[u>>6] |= 1 << (u & 63)
					order = append(order, u)
				}
			}
		}
	}
	for _, v := range nodes {
		seen[v>>6] = 0
	}
	return order
}

// bfsOrder is a breadth-first order over the whole graph from a seeded
// start node, restarting at the next unvisited id (cyclically) whenever the
// queue runs dry. The returned order doubles as the queue, so the memory
// is 8 bytes per node plus an N-bit visited set.
func bfsOrder(ctx context.Context, d *storage.Dataset, seed int64) []int64 {
	n := d.NumNodes()
	order := make([]int64, 0, n)
	if n == 0 {
		return order
	}
	seen := make([]uint64, (n+63)/64)
	start := newRand(seed, 7).Int64N(n)
	var buf []int64
	head := 0
	for i := range n {
		r := start + i
		if r >= n {
			r -= n
		}
		if seen[r>>6]&(1<<(r&63)) != 0 {
			continue
		}
		seen[r>>6] |= 1 << (r & 63)
		order = append(order, r)
		for ; head < len(order); head++ {
			if head&(1<<16-1) == 0 && ctx.Err() != nil {
				return order // the caller checks ctx
			}
			buf = d.Neighbors(order[head]).AppendTo(buf[:0])
			for _, u := range buf {
				if seen[u>>6]&(1<<(u&63)) == 0 {
					seen[u>>6] |= 1 << (u & 63)
					order = append(order, u)
				}
			}
		}
	}
	return order
}

func describe(what string, done int64, t0 time.Time, seen, internal int64) string {
	rate := float64(done) / max(time.Since(t0).Seconds(), 1e-9)
	cut := 0.0
	if seen > 0 {
		cut = 1 - float64(internal)/float64(seen)
	}
	return fmt.Sprintf("%s: %.0f nodes/s, cut≈%.3f", what, rate, cut)
}

// group returns CSR-style membership: ids of part p are
// members[off[p]:off[p+1]], ascending.
func group(part []int32, k int) (off []int64, members []int64) {
	off = make([]int64, k+1)
	for _, p := range part {
		off[p+1]++
	}
	for p := range k {
		off[p+1] += off[p]
	}
	members = make([]int64, len(part))
	fill := make([]int64, k)
	copy(fill, off[:k])
	for v, p := range part {
		members[fill[p]] = int64(v)
		fill[p]++
	}
	return off, members
}

// groupIDs groups the sorted ids by part.
func groupIDs(part []int32, ids []int64, k int) (off []int64, members []int64) {
	off = make([]int64, k+1)
	for _, v := range ids {
		off[part[v]+1]++
	}
	for p := range k {
		off[p+1] += off[p]
	}
	members = make([]int64, len(ids))
	fill := make([]int64, k)
	copy(fill, off[:k])
	for _, v := range ids {
		p := part[v]
		members[fill[p]] = v
		fill[p]++
	}
	return off, members
}

// runRandom assigns a seeded random permutation round-robin, training
// nodes first, so parts differ by at most one node and one training node.
func runRandom(d *storage.Dataset, o *Options, isTrain func(int64) bool) result {
	n := d.NumNodes()
	k := o.Parts
	perm := shuffled(nil, n, o.Seed, 0)
	part := make([]int32, n)
	var ti, oi int64
	nt := int64(len(d.TrainIdx()))
	for _, v := range perm {
		if isTrain(v) {
			part[v] = int32(ti % int64(k))
			ti++
		} else {
			part[v] = int32((nt + oi) % int64(k))
			oi++
		}
	}
	return result{part: part, k: k, k1: k, k2: 1}
}
