package histcache

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/topk"
)

// Errors returned by the package. Every error wraps one of them.
var (
	ErrInvalidConfig  = errors.New("histcache: invalid config")
	ErrInvalidOptions = errors.New("histcache: invalid options")
	// ErrBudget reports a budget too small for the slot table.
	ErrBudget = errors.New("histcache: budget too small")
	// ErrNodeRange reports a node id outside [0, N).
	ErrNodeRange = errors.New("histcache: node id out of range")
	// ErrShape reports slices whose lengths disagree.
	ErrShape = errors.New("histcache: slice lengths disagree")
	// ErrTransition reports an event the state table rejects.
	ErrTransition = errors.New("histcache: rejected state transition")
	// ErrNotPullable reports a Pull of a node without a usable entry at
	// the iteration (it also wraps ErrTransition).
	ErrNotPullable = fmt.Errorf("%w: not pullable", ErrTransition)
	// ErrIteration reports a push older than the entry it would replace.
	ErrIteration = errors.New("histcache: iteration goes backwards")
	// ErrMismatch reports a well-formed snapshot of a different cache.
	ErrMismatch = errors.New("histcache: snapshot does not match this cache")
	// ErrOtherSize reports a snapshot of a cache over the same nodes and
	// width with another number of slots (another budget sized it); it
	// also wraps ErrMismatch.
	ErrOtherSize = fmt.Errorf("%w: a cache of another size", ErrMismatch)
	// ErrCorrupt is wrapped by *CorruptError.
	ErrCorrupt = errors.New("histcache: corrupt snapshot")
)

// Defaults of Options.
const (
	// DefaultStaleness is Options.Staleness when it is 0 (OUTRE's bound),
	// and the most EpochStaleness gives.
	DefaultStaleness = 100
	DefaultPGrad     = 0.9
)

// EpochStaleness is the default staleness bound of the profile and of
// training (planner.ProfileOptions, train.Options), which know the epoch; a
// Cache does not. It is one epoch of batches, ⌈trainNodes/batchSize⌉,
// past the reuse depth: a batch's reuse is decided against the cache as it
// stood depth batches earlier, so the bound depth + one epoch makes the
// usable ages [depth, depth + epoch) a window of one epoch of batches
// (counted from the decision, so a batch at an epoch's start can reuse a
// push from the end of the epoch two back; and an epoch of partition
// batches need not have ⌈trainNodes/batchSize⌉ of them). The
// result is at most DefaultStaleness, unless depth leaves no window under
// it (then depth + 1).
//
// OUTRE's 100 is about a twelfth of an ogbn-papers100M epoch (~1,200
// batches of 1,000). On a graph with a few dozen batches an epoch the same
// 100 lets a batch reuse embeddings computed by the model of several
// epochs before, which costs accuracy per epoch while the model still
// moves (docs/ooc.md, "History on and off").
func EpochStaleness(trainNodes int64, batchSize int, depth int64) int64 {
	depth = max(depth, 0)
	return min(EpochBatches(trainNodes, batchSize)+depth, max(DefaultStaleness, depth+1))
}

// EpochBatches is the batches of an epoch as EpochStaleness counts them:
// ⌈trainNodes/batchSize⌉, at least 1 (partition batches may number a
// few more).
func EpochBatches(trainNodes int64, batchSize int) int64 {
	if batchSize < 1 || trainNodes < 1 {
		return 1
	}
	return (trainNodes + int64(batchSize) - 1) / int64(batchSize)
}

// Policy is the admission policy.
type Policy uint8

// Policies.
const (
	// PolicyStaleness admits every push; entries expire by staleness only.
	PolicyStaleness Policy = iota
	// PolicyGrad adds FreshGNN's gradient criterion (see the package doc).
	PolicyGrad
)

func (p Policy) String() string {
	switch p {
	case PolicyStaleness:
		return "staleness"
	case PolicyGrad:
		return "grad"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy parses "staleness" or "grad".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "staleness", "":
		return PolicyStaleness, nil
	case "grad":
		return PolicyGrad, nil
	}
	return 0, fmt.Errorf("%w: policy %q: want staleness or grad", ErrInvalidOptions, s)
}

// Config is what a cache must be told.
type Config struct {
	// Scores has one score per node (saved_I/O_hist); its length is the
	// number of nodes N. Candidates are the nodes of largest positive
	// score that fit the budget. Read only during New.
	Scores []float32
	// Hidden is the embedding width H, at least 1.
	Hidden int
	// BudgetBytes bounds BytesFor(N, candidates, H).
	BudgetBytes int64
	// Ties, when set (N entries, one to one), orders candidates of equal
	// score: the smaller Ties[v] first, else the smaller id. A relabelled
	// dataset passes its original ids, so that it caches the nodes the
	// original caches and trains as it does. Read only during New.
	Ties []int64
}

// Options tunes a cache. A nil *Options means the defaults.
type Options struct {
	// Staleness: an entry pushed at t is usable at i iff 0 ≤ i−t <
	// Staleness. Default DefaultStaleness; 1 disables reuse.
	Staleness int64
	// Policy is the admission policy. Default PolicyStaleness.
	Policy Policy
	// PGrad is the fraction of pushed candidates admitted under
	// PolicyGrad, in [0, 1]. 0 means DefaultPGrad; use a tiny positive
	// value to admit (almost) nothing.
	PGrad float64
	// Logger receives one Info line at New. Default: none.
	Logger *slog.Logger
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.Staleness < 0:
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want >= 1 (0: default)", opterr.Field("Staleness"), o.Staleness)
	case o.Policy > PolicyGrad:
		return fmt.Errorf("%w: Policy %d", ErrInvalidOptions, o.Policy)
	case math.IsNaN(o.PGrad) || o.PGrad < 0 || o.PGrad > 1:
		return fmt.Errorf("%w: PGrad %v, want in [0, 1]", ErrInvalidOptions, o.PGrad)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Staleness == 0 {
		r.Staleness = DefaultStaleness
	}
	if r.PGrad == 0 {
		r.PGrad = DefaultPGrad
	}
	return r
}

// Bytes per slot besides the embedding: its node id (8, the slot → node
// table), state (1) and iteration (8). New counts what it allocates in
// memacct; TestBytesForCounted checks this formula against that count.
const slotOverhead = 8 + 1 + 8

// BytesFor is the memory of a cache of capacity candidates of width hidden
// over numNodes nodes (see the package doc).
func BytesFor(numNodes, capacity int64, hidden int) int64 {
	return 4*numNodes + capacity*(4*int64(hidden)+slotOverhead)
}

// CapacityFor is the number of candidates that fit budget bytes (at most
// numNodes), or 0 when the slot table does not fit.
func CapacityFor(budget, numNodes int64, hidden int) int64 {
	if hidden < 1 || budget < 4*numNodes {
		return 0
	}
	return min((budget-4*numNodes)/(4*int64(hidden)+slotOverhead), numNodes)
}

// Stats are the cache's counts since New (or the last ReadFrom for Valid).
type Stats struct {
	Candidates int64 `json:"candidates"`
	Valid      int64 `json:"valid"` // entries in Valid or InBatchCompute now
	MemBytes   int64 `json:"mem_bytes"`
	// Lookup outcomes, per node asked.
	Lookups         int64 `json:"lookups"`
	Hits            int64 `json:"hits"`
	Misses          int64 `json:"misses"`           // candidates without a usable entry (Empty, MustRefresh, InBatchCompute, or pushed after the lookup's iteration)
	NotCandidate    int64 `json:"not_candidate"`    // lookups of non-candidates
	StaleRejections int64 `json:"stale_rejections"` // Valid entries found too old (they become MustRefresh; counted in Misses too)
	Pulls           int64 `json:"pulls"`            // rows pulled
	Pushes          int64 `json:"pushes"`           // rows admitted
	// AdmissionRejections counts pushed candidates the gradient policy
	// refused; Evictions counts entries moved to MustRefresh by it (from
	// a refused push or EvictUnstable).
	AdmissionRejections int64 `json:"admission_rejections"`
	Evictions           int64 `json:"evictions"`
}

// Cache is a historical embedding cache. See the package doc.
type Cache struct {
	numNodes int64
	hidden   int
	opts     Options
	slots    []int32 // node → slot, -1 not a candidate; immutable after New
	nodes    []int64 // slot → node, ascending; immutable after New
	counted  int64   // bytes added to memacct.HistoryCache (released by Close)

	mu struct {
		sync.Mutex
		state        []State // per slot
		iters        []int64 // per slot
		emb          []float32
		marked       []int32 // slots moved to InBatchCompute in this batch
		threshold    float32
		hasThreshold bool
		stats        Stats
	}
}

// Close releases the cache's memory (its memacct count); the cache must
// not be used afterwards. It is safe to call more than once.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	memacct.Add(memacct.HistoryCache, -c.counted)
	c.counted = 0
	c.slots, c.nodes, c.mu.state, c.mu.iters, c.mu.emb = nil, nil, nil, nil, nil
}

// New builds an empty cache: every candidate Empty.
func New(cfg Config, opts *Options) (*Cache, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	n := int64(len(cfg.Scores))
	switch {
	case cfg.Hidden < 1:
		return nil, opterr.Errorf(ErrInvalidConfig, "%s %d, want >= 1", opterr.Field("Hidden"), cfg.Hidden)
	case cfg.BudgetBytes < 4*n:
		return nil, fmt.Errorf("%w: %d bytes cannot hold the %d-byte slot table of %d nodes", ErrBudget, cfg.BudgetBytes, 4*n, n)
	}
	o := opts.withDefaults()
	capacity := CapacityFor(cfg.BudgetBytes, n, cfg.Hidden)
	capacity = min(capacity, math.MaxInt32) // slots are int32
	c := &Cache{numNodes: n, hidden: cfg.Hidden, opts: o}
	var tie func(int64) int64
	if cfg.Ties != nil {
		if int64(len(cfg.Ties)) != n {
			return nil, fmt.Errorf("%w: %d tie keys for %d nodes", ErrInvalidConfig, len(cfg.Ties), n)
		}
		tie = func(v int64) int64 { return cfg.Ties[v] }
	}
	c.nodes = topk.SelectTies(n, capacity, func(v int64) float32 { return cfg.Scores[v] }, tie)
	c.slots = make([]int32, n)
	for i := range c.slots {
		c.slots[i] = -1
	}
	for s, v := range c.nodes {
		c.slots[v] = int32(s)
	}
	k := len(c.nodes)
	c.mu.state = make([]State, k)
	for i := range c.mu.state {
		c.mu.state[i] = Empty
	}
	c.mu.iters = make([]int64, k)
	c.mu.emb = make([]float32, k*cfg.Hidden)
	c.mu.stats.Candidates = int64(k)
	c.mu.stats.MemBytes = BytesFor(n, int64(k), cfg.Hidden)
	c.counted = 4*int64(len(c.slots)) + 8*int64(len(c.nodes)) + int64(unsafe.Sizeof(State(0)))*int64(k) +
		8*int64(len(c.mu.iters)) + 4*int64(len(c.mu.emb))
	memacct.Add(memacct.HistoryCache, c.counted)
	if o.Logger != nil {
		o.Logger.Info("historical embedding cache ready", "candidates", k, "hidden", cfg.Hidden,
			"bytes", c.mu.stats.MemBytes, "staleness", o.Staleness, "policy", o.Policy.String())
	}
	return c, nil
}

// NumNodes is N.
func (c *Cache) NumNodes() int64 { return c.numNodes }

// Hidden is H.
func (c *Cache) Hidden() int { return c.hidden }

// Staleness is the effective staleness bound.
func (c *Cache) Staleness() int64 { return c.opts.Staleness }

// Candidates returns the candidate nodes in slot order (ascending ids).
// The slice is shared and read-only.
func (c *Cache) Candidates() []int64 { return c.nodes }

// IsCandidate reports whether v is a candidate. It takes no lock (the
// candidate set never changes), so a sampler may call it freely.
func (c *Cache) IsCandidate(v int64) bool {
	return v >= 0 && v < c.numNodes && c.slots[v] >= 0
}

// State returns v's state (NotCandidate for ids out of range).
func (c *Cache) State(v int64) State {
	if !c.IsCandidate(v) {
		return NotCandidate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.state[c.slots[v]]
}

// StateAt returns v's effective state at iteration iter: State(v), except
// that a Valid entry not usable at iter (too old, or pushed after iter)
// reads as MustRefresh (the Expire transition).
func (c *Cache) StateAt(iter, v int64) State {
	if !c.IsCandidate(v) {
		return NotCandidate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[v]
	st := c.mu.state[s]
	if st == Valid && !c.fresh(iter, c.mu.iters[s]) {
		return c.mustLocked(st, EventExpire)
	}
	return st
}

func (c *Cache) checkNodes(nodes []int64) error {
	for i, v := range nodes {
		if v < 0 || v >= c.numNodes {
			return fmt.Errorf("%w: nodes[%d] = %d, have %d nodes", ErrNodeRange, i, v, c.numNodes)
		}
	}
	return nil
}

// fresh reports whether an entry pushed at t is usable at iter.
func (c *Cache) fresh(iter, t int64) bool {
	return iter >= t && iter-t < c.opts.Staleness
}

// Lookup sets hits[i] to whether nodes[i] can be pulled at iteration iter
// (Valid and fresh) and returns the number of hits. hits must have
// len(nodes) entries. Lookup changes no state: a Valid entry too old at
// iter is a miss (and a stale rejection) for iter, its StateAt(iter) is
// MustRefresh, but it stays usable for an earlier iteration a pipelined
// compute stage may still be pulling for.
func (c *Cache) Lookup(iter int64, nodes []int64, hits []bool) (int, error) {
	if len(hits) != len(nodes) {
		return 0, fmt.Errorf("%w: %d hits for %d nodes", ErrShape, len(hits), len(nodes))
	}
	if err := c.checkNodes(nodes); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &c.mu.stats
	st.Lookups += int64(len(nodes))
	n := 0
	for i, v := range nodes {
		hits[i] = false
		s := c.slots[v]
		if s < 0 {
			st.NotCandidate++
			continue
		}
		if c.mu.state[s] != Valid {
			st.Misses++
			continue
		}
		t := c.mu.iters[s]
		switch {
		case c.fresh(iter, t):
			hits[i] = true
			n++
			st.Hits++
		case iter-t >= c.opts.Staleness:
			st.StaleRejections++
			st.Misses++
		default: // pushed after iter: not usable for this batch
			st.Misses++
		}
	}
	return n, nil
}

// mustLocked applies a transition the caller has checked is in the table.
func (c *Cache) mustLocked(s State, e Event) State {
	to, err := Transition(s, e)
	if err != nil {
		panic(fmt.Sprintf("histcache: internal error: %v", err)) // a bug in this package, never bad input
	}
	return to
}

// Pull copies the entries of nodes into dst (len(nodes)·H floats, in nodes
// order). Every node must be Valid and fresh at iter; otherwise Pull
// changes nothing and returns an error wrapping ErrNotPullable.
func (c *Cache) Pull(iter int64, nodes []int64, dst []float32) error {
	h := c.hidden
	if len(dst) < len(nodes)*h {
		return fmt.Errorf("%w: dst holds %d floats, need %d", ErrShape, len(dst), len(nodes)*h)
	}
	if err := c.checkNodes(nodes); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, v := range nodes {
		s := c.slots[v]
		st := NotCandidate
		if s >= 0 {
			st = c.mu.state[s]
		}
		if _, err := Transition(st, EventPull); err != nil {
			return fmt.Errorf("%w: nodes[%d] = %d is %v", ErrNotPullable, i, v, st)
		}
		if !c.fresh(iter, c.mu.iters[s]) {
			return fmt.Errorf("%w: nodes[%d] = %d was pushed at iteration %d, not usable at %d (staleness %d)",
				ErrNotPullable, i, v, c.mu.iters[s], iter, c.opts.Staleness)
		}
	}
	for i, v := range nodes {
		s := int(c.slots[v]) // always through the slot table
		copy(dst[i*h:(i+1)*h], c.mu.emb[s*h:(s+1)*h])
	}
	c.mu.stats.Pulls += int64(len(nodes))
	return nil
}

// Push offers the embeddings computed at iteration iter for nodes (emb
// holds len(nodes)·H floats in nodes order). Non-candidates are skipped.
// gradNorms (one per node) is required by PolicyGrad and ignored by
// PolicyStaleness. It returns the number of rows admitted. A push older
// than a candidate's current entry fails with ErrIteration before anything
// changes.
func (c *Cache) Push(iter int64, nodes []int64, emb []float32, gradNorms []float32) (int, error) {
	h := c.hidden
	if len(emb) != len(nodes)*h {
		return 0, fmt.Errorf("%w: %d floats for %d nodes of width %d", ErrShape, len(emb), len(nodes), h)
	}
	grad := c.opts.Policy == PolicyGrad
	if grad && len(gradNorms) != len(nodes) {
		return 0, fmt.Errorf("%w: PolicyGrad needs one gradient norm per node, have %d for %d", ErrShape, len(gradNorms), len(nodes))
	}
	if err := c.checkNodes(nodes); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var cand []int // indices into nodes of candidates
	for i, v := range nodes {
		s := c.slots[v]
		if s < 0 {
			continue
		}
		if st := c.mu.state[s]; st != Empty && iter < c.mu.iters[s] {
			return 0, fmt.Errorf("%w: nodes[%d] = %d: push of iteration %d over an entry of %d", ErrIteration, i, v, iter, c.mu.iters[s])
		}
		cand = append(cand, i)
	}
	admit := cand
	if grad {
		norm := func(i int) float32 {
			x := gradNorms[i]
			if x != x {
				return float32(math.Inf(1))
			}
			return x
		}
		slices.SortFunc(cand, func(a, b int) int {
			if c := cmp.Compare(norm(a), norm(b)); c != 0 {
				return c
			}
			return cmp.Compare(nodes[a], nodes[b])
		})
		k := int(math.Ceil(c.opts.PGrad*float64(len(cand)) - 1e-9))
		k = min(max(k, 0), len(cand))
		admit = cand[:k]
		if len(cand) > 0 {
			c.mu.hasThreshold = true
			c.mu.threshold = float32(math.Inf(-1))
			if k > 0 {
				c.mu.threshold = norm(cand[k-1])
			}
		}
		for _, i := range cand[k:] {
			c.evictLocked(c.slots[nodes[i]])
			c.mu.stats.AdmissionRejections++
		}
	}
	for _, i := range admit {
		s := int(c.slots[nodes[i]])
		from := c.mu.state[s]
		if from != Valid && from != InBatchCompute {
			c.mu.stats.Valid++
		}
		c.mu.state[s] = c.mustLocked(from, EventPush)
		c.mu.iters[s] = iter
		copy(c.mu.emb[s*h:(s+1)*h], emb[i*h:(i+1)*h])
	}
	c.mu.stats.Pushes += int64(len(admit))
	return len(admit), nil
}

// evictLocked applies Evict to slot s, counting real evictions.
func (c *Cache) evictLocked(s int32) {
	from := c.mu.state[s]
	c.mu.state[s] = c.mustLocked(from, EventEvict)
	if from == Valid || from == InBatchCompute {
		c.mu.stats.Evictions++
		c.mu.stats.Valid--
	}
}

// EvictUnstable evicts (to MustRefresh) the entries of nodes, typically
// those pulled this iteration, whose gradient norm exceeds the threshold
// set by the last Push under PolicyGrad. It returns the number evicted;
// it does nothing under PolicyStaleness or before the first such Push.
func (c *Cache) EvictUnstable(nodes []int64, gradNorms []float32) (int, error) {
	if len(gradNorms) != len(nodes) {
		return 0, fmt.Errorf("%w: %d gradient norms for %d nodes", ErrShape, len(gradNorms), len(nodes))
	}
	if err := c.checkNodes(nodes); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opts.Policy != PolicyGrad || !c.mu.hasThreshold {
		return 0, nil
	}
	n := 0
	for i, v := range nodes {
		s := c.slots[v]
		if s < 0 {
			continue
		}
		x := gradNorms[i]
		if x != x || x > c.mu.threshold {
			if st := c.mu.state[s]; st == Valid || st == InBatchCompute {
				n++
			}
			c.evictLocked(s)
		}
	}
	return n, nil
}

// Threshold returns the gradient-norm threshold of the last Push under
// PolicyGrad, and whether there is one.
func (c *Cache) Threshold() (float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.threshold, c.mu.hasThreshold
}

// MarkInBatch records that the current batch computes the exact
// embeddings of nodes (targets, or nodes at hop ≥ 2): their Valid entries
// become InBatchCompute and are not pulled until EndBatch.
func (c *Cache) MarkInBatch(nodes []int64) error {
	if err := c.checkNodes(nodes); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range nodes {
		s := c.slots[v]
		if s < 0 {
			continue
		}
		from := c.mu.state[s]
		c.mu.state[s] = c.mustLocked(from, EventMarkInBatch)
		if from == Valid {
			c.mu.marked = append(c.mu.marked, s)
		}
	}
	return nil
}

// EndBatch returns the nodes marked since the last EndBatch to Valid
// (those still InBatchCompute).
func (c *Cache) EndBatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.mu.marked {
		c.mu.state[s] = c.mustLocked(c.mu.state[s], EventEndBatch)
	}
	c.mu.marked = c.mu.marked[:0]
}

// Stats returns the counts.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.stats
}
