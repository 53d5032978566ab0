package partition

import (
	"context"
	"log/slog"
	"math"
	"runtime"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Method names a partitioning algorithm.
type Method string

// Methods.
const (
	// Fennel is two-level streaming FENNEL whose neighbour-membership test
	// uses one Bloom filter per partition.
	Fennel Method = "fennel"
	// FennelExact is the same algorithm with exact membership (an int32
	// assignment array). Since Fennel keeps that array too (part.npy and
	// refinement read it), FennelExact is faster and smaller at every
	// size measured, for the same cut (docs/partition.md).
	FennelExact Method = "fennel-exact"
	// Random assigns nodes uniformly at random, balanced in nodes and in
	// training nodes.
	Random Method = "random"
	// Metis runs the external gpmetis binary (quality comparison only).
	Metis Method = "metis"
)

// Methods lists every method, in documentation order.
var Methods = []Method{Fennel, FennelExact, Random, Metis}

// Streams reports whether m is one of the streaming FENNEL methods, the
// only ones that read FirstLevel, Gamma, Epsilon, Lambda/NoLambda, Passes,
// Refine, Order and ParallelDegree (and, for Fennel alone,
// FalsePositive). Random and Metis read Parts, Seed and Workers (the
// latter for writing the files); Run records in Stats only what the
// method read.
func (m Method) Streams() bool { return m == Fennel || m == FennelExact }

// Stream orders.
const (
	OrderID     = "id"
	OrderRandom = "random"
	// OrderBFS streams breadth-first over the CSR from a seeded start node
	// (restarting at the next unvisited id); level 2 streams each part in
	// the order its nodes had in the level-1 stream.
	OrderBFS = "bfs"
	// OrderAuto (the default) is OrderBFS when the graph's CSR fits in
	// memory beside the partitioner's own state, else OrderID, whose
	// passes read the CSR in storage order (see AutoOrder).
	OrderAuto = "auto"
)

// Defaults.
const (
	// DefaultParts is the most parts a partitioning takes by default
	// (DefaultPartsFor), OUTRE's count for ogbn-papers100M.
	DefaultParts = 10000
	// TrainNodesPerPart is the training nodes a part holds by default
	// (DefaultPartsFor): a macro batch of sample.DefaultPartsPerBatch (20)
	// parts then holds train's default batch of 1,000 training nodes
	// (TestDefaultPartsHoldABatch in package train keeps them together).
	TrainNodesPerPart = 50
	DefaultGamma      = 1.5
	DefaultAlphaScale = 1.0
	DefaultEpsilon    = 0.1
	// MaxEpsilon bounds the balance slack: parts of up to twice the
	// average. The Bloom filters are sized for a part's cap, so a slack
	// of 1e5 took 14 GiB of filters for 2,708 nodes and 1e9 exhausted
	// memory; FENNEL's own slack is 0.1.
	MaxEpsilon            = 1
	DefaultLambda         = 1.0
	DefaultFalsePositive  = 0.01
	DefaultParallelDegree = 4096
	DefaultPasses         = 3
	DefaultOrder          = OrderAuto
	DefaultRefine         = 3
)

// Options configures Run. A nil *Options means the defaults; zero fields
// take their defaults.
type Options struct {
	// Parts is the requested number of partitions k (default:
	// DefaultPartsFor the dataset).
	Parts int
	// FirstLevel is k1, the number of first-level parts; each is split into
	// k2 = Parts/k1 second-level parts, so k1 must divide Parts and the
	// final count is exactly Parts. Default: the divisor of Parts closest to
	// sqrt(Parts) (100 for 10,000; 10 for 200). FirstLevel == Parts means
	// a single level.
	FirstLevel int
	// Method is the algorithm (default Fennel).
	Method Method
	// Name is the output directory name under DIR/partitions/ (default the
	// method name). It must be a plain name, no path separators.
	Name string
	// Gamma is FENNEL's size-penalty exponent γ > 1 (default 1.5).
	Gamma float64
	// Epsilon is the balance slack ε: every final part holds at most
	// ceil((1+ε)·n/k) nodes and ceil((1+ε)·t/k) training nodes (default
	// 0.1), for one level or two (level 1 gets sqrt(1+ε)−1, see
	// balance.go) and after refinement. Fennel and FennelExact only:
	// Random balances exactly, and Metis runs gpmetis with its default.
	Epsilon float64
	// Lambda weighs the training-load penalty λ·T(P)/(t/k), in units of
	// shared neighbours per average training load (default 1; negative
	// values are rejected; use NoLambda for 0).
	Lambda float64
	// AlphaScale multiplies FENNEL's α (default 1). The hard caps enforce
	// balance whatever α is, so α below FENNEL's value trades nothing but
	// slack usage for a lower cut; see docs/benchmarks.md.
	AlphaScale float64
	// NoLambda sets λ = 0 (Lambda's zero value means the default).
	NoLambda bool
	// FalsePositive is each Bloom filter's target false-positive rate
	// (default 0.01). Fennel only.
	FalsePositive float64
	// Passes is the number of streaming passes; passes after the first
	// restream every node using the previous pass's assignment (default 3).
	Passes int
	// Refine is the number of greedy refinement rounds run on the final
	// assignment after the streaming passes (Fennel and FennelExact only;
	// see the package doc): 0 means DefaultRefine (3), -1 none, at most
	// 100.
	Refine int
	// Order is the stream order: OrderAuto (default), OrderBFS (seeded
	// start), OrderID or OrderRandom (seeded). Run resolves OrderAuto
	// and records the order it used.
	Order string
	// Seed seeds every random choice (BFS start nodes, random order, random
	// method, gpmetis).
	Seed int64
	// Workers bounds the second-level worker pool and the parallel
	// frontier scoring (default GOMAXPROCS, at most MaxWorkers); above 1,
	// level 1 also gathers on a second goroutine (see the package doc,
	// Read-ahead). MinMemory counts each second-level worker's scratch.
	Workers int
	// ParallelDegree is the degree from which one node's neighbour list is
	// scored by Workers goroutines in parallel (default 4096; -1 disables).
	ParallelDegree int
	// Force overwrites an existing partitioning of the same name.
	Force bool
	// Progress receives progress (nil: none). The task description shows
	// nodes/s and the running edge cut.
	Progress progress.Reporter
	// Logger receives log records (nil: slog.Default()).
	Logger *slog.Logger

	ctx context.Context // set by RunContext; nil means context.Background()
	// autoWhy is why Run resolved OrderAuto as it did (Stats.OrderWhy).
	autoWhy string
	// perPart runs OrderID's second level part by part instead of in one
	// sweep (level2Sweep); tests compare the two.
	perPart bool
	// noReadAhead gathers level 1's neighbours on the stream's own
	// goroutine (see runAhead); tests compare the two.
	noReadAhead bool
}

// withDefaults returns a copy of o (or of the zero Options) with defaults
// filled in.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.ctx == nil {
		c.ctx = context.Background()
	}
	if c.Parts == 0 {
		c.Parts = DefaultParts
	}
	if c.FirstLevel == 0 && c.Parts > 0 {
		c.FirstLevel = defaultFirstLevel(c.Parts)
	}
	if c.Method == "" {
		c.Method = Fennel
	}
	if c.Name == "" {
		c.Name = string(c.Method)
	}
	if c.AlphaScale == 0 {
		c.AlphaScale = DefaultAlphaScale
	}
	if c.Gamma == 0 {
		c.Gamma = DefaultGamma
	}
	if c.Epsilon == 0 {
		c.Epsilon = DefaultEpsilon
	}
	if c.Lambda == 0 && !c.NoLambda {
		c.Lambda = DefaultLambda
	}
	if c.NoLambda {
		c.Lambda = 0
	}
	if c.FalsePositive == 0 {
		c.FalsePositive = DefaultFalsePositive
	}
	if c.Passes == 0 {
		c.Passes = DefaultPasses
	}
	if c.Refine == 0 {
		c.Refine = DefaultRefine
	}
	if c.Order == "" {
		c.Order = DefaultOrder
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.ParallelDegree == 0 {
		c.ParallelDegree = DefaultParallelDegree
	}
	c.Progress = progress.Or(c.Progress)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// DefaultPartsFor is the parts a partitioning of d takes by default: one
// per TrainNodesPerPart of its training nodes, rounded up (without a
// training split, one per ten times that of its nodes), at most
// DefaultParts and d's nodes, then rounded down to a multiple of its
// rounded square root (twoLevelParts). A fixed 10,000 made parts of 5
// nodes on a 50,000-node graph, whose partition batches then read as
// much as random ones (RR +0.1 %; 100 parts: −12.5 %), and refused Cora's
// 2,708 nodes.
func DefaultPartsFor(d *storage.Dataset) int {
	n := d.NumNodes()
	k := (int64(len(d.TrainIdx())) + TrainNodesPerPart - 1) / TrainNodesPerPart
	if k == 0 {
		k = (n + 10*TrainNodesPerPart - 1) / (10 * TrainNodesPerPart)
	}
	return int(twoLevelParts(max(min(k, DefaultParts, n), 1)))
}

// twoLevelParts is k rounded down to r·floor(k/r), r the rounded square
// root of k, which splits in two levels of about r parts each (the first
// level takes the divisor closest to the square root, defaultFirstLevel):
// a prime k made it 1 × k, one first-level part whose second level runs
// on one worker. The 200,000-node generated graph's 20,000-odd training
// nodes gave 401 parts, 1 × 401: 14.0 s and 123 MiB peak RSS against
// 8.3 s and 67 MiB for 400 = 20 × 20 (two runs each, alternated), and a
// worse cut (0.5159 against 0.5140). Down, not up: parts keep at least
// TrainNodesPerPart training nodes, so a macro batch still holds a batch.
func twoLevelParts(k int64) int64 {
	r := int64(math.Round(math.Sqrt(float64(k))))
	if r <= 1 {
		return k
	}
	return r * (k / r)
}

// withDataset is withDefaults with Parts 0 taken as DefaultPartsFor d.
func (o *Options) withDataset(d *storage.Dataset) Options {
	var w Options
	if o != nil {
		w = *o
	}
	if w.Parts == 0 {
		w.Parts = DefaultPartsFor(d)
	}
	return w.withDefaults()
}

// Validate reports the first invalid field, after filling defaults.
func (o *Options) Validate() error {
	c := o.withDefaults()
	return c.validate()
}

func (c *Options) validate() error {
	bad := func(field opterr.Field, format string, args ...any) error {
		return opterr.Errorf(ErrOptions, "%s: "+format, append([]any{field}, args...)...)
	}
	if c.Parts < 1 || c.Parts > math.MaxInt32 {
		return bad("Parts", "%d not in [1, 2^31)", c.Parts)
	}
	if c.FirstLevel < 1 || c.FirstLevel > c.Parts {
		return bad("FirstLevel", "%d not in [1, %s=%d]", c.FirstLevel, opterr.Field("Parts"), c.Parts)
	}
	if c.Parts%c.FirstLevel != 0 {
		return bad("FirstLevel", "%d does not divide %s=%d (the final count is %s x %s/%s)", c.FirstLevel, opterr.Field("Parts"), c.Parts, opterr.Field("FirstLevel"), opterr.Field("Parts"), opterr.Field("FirstLevel"))
	}
	switch c.Method {
	case Fennel, FennelExact, Random, Metis:
	default:
		return bad("Method", "unknown method %q (want one of %v)", c.Method, Methods)
	}
	if !plainName(c.Name) {
		return bad("Name", "%q is not a plain directory name of at most %d bytes not starting with '.'", c.Name, maxNameBytes)
	}
	if !(c.Gamma > 1) || math.IsInf(c.Gamma, 0) {
		return bad("Gamma", "%v must be > 1", c.Gamma)
	}
	if !(c.AlphaScale > 0) || math.IsInf(c.AlphaScale, 0) {
		return bad("AlphaScale", "%v must be > 0 and finite", c.AlphaScale)
	}
	if !(c.Epsilon > 0 && c.Epsilon <= MaxEpsilon) {
		return bad("Epsilon", "%v not in (0, %v] (the balance slack: parts hold at most (1+epsilon) x the average)", c.Epsilon, float64(MaxEpsilon))
	}
	if c.Lambda < 0 || math.IsNaN(c.Lambda) || math.IsInf(c.Lambda, 0) {
		return bad("Lambda", "%v must be finite and >= 0", c.Lambda)
	}
	if !(c.FalsePositive > 0 && c.FalsePositive < 1) {
		return bad("FalsePositive", "%v not in (0, 1)", c.FalsePositive)
	}
	if c.Passes < 1 || c.Passes > 100 {
		return bad("Passes", "%d not in [1, 100]", c.Passes)
	}
	if c.Refine < -1 || c.Refine > 100 {
		return bad("Refine", "%d not in [-1, 100]", c.Refine)
	}
	if c.Order != OrderID && c.Order != OrderRandom && c.Order != OrderBFS && c.Order != OrderAuto {
		return bad("Order", "%q (want %q, %q, %q or %q)", c.Order, OrderAuto, OrderID, OrderRandom, OrderBFS)
	}
	if c.Workers < 1 || c.Workers > MaxWorkers() {
		return bad("Workers", "%d, want 0 (one per core) to %d (four per core, at least 8): each second-level worker holds scratch of its own", c.Workers, MaxWorkers())
	}
	if c.ParallelDegree < -1 {
		return bad("ParallelDegree", "%d must be >= 1 or -1", c.ParallelDegree)
	}
	return nil
}

// k2 is the number of second-level parts per first-level part.
func (c *Options) k2() int { return c.Parts / c.FirstLevel }

// defaultFirstLevel is the divisor of k closest to sqrt(k), preferring the
// smaller on ties; for a prime k it is 1 (one level of k parts).
func defaultFirstLevel(k int) int {
	r := math.Sqrt(float64(k))
	best := 1
	for d := 1; d*d <= k; d++ {
		if k%d != 0 {
			continue
		}
		for _, c := range []int{d, k / d} {
			if math.Abs(float64(c)-r) < math.Abs(float64(best)-r) {
				best = c
			}
		}
	}
	return best
}

// MaxWorkers is the most workers Options accepts: four per core (at least
// 8), as sample.MaxWorkers. The work is CPU-bound, and every second-level worker
// holds its own scratch (workerBytes): before the bound, --workers 100000
// ran min(100000, k1) = 100 of them at once and was OOM-killed in a memory
// cgroup that MinMemory had passed (1M nodes, k 10,000, 100 MiB).
func MaxWorkers() int { return max(8, 4*runtime.GOMAXPROCS(0)) }
