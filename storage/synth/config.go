package synth

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"

	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// Defaults of Config. A zero field of Config selects its default.
const (
	DefaultAvgDegree = 20.0
	DefaultFeatDim   = 128
	DefaultClasses   = 16
	DefaultTrainFrac = 0.10
	DefaultValidFrac = 0.05
	DefaultTestFrac  = 0.05
	DefaultHomophily = 0.8
	DefaultDegreeExp = 2.5
	// DefaultCommunitySize is the average community size the default
	// Communities aims at.
	DefaultCommunitySize = 1000
	// DefaultNoisePerSqrtDim sets the default FeatNoise to
	// DefaultNoisePerSqrtDim·sqrt(FeatDim), which keeps the difficulty of
	// classifying a node from its own features independent of FeatDim.
	DefaultNoisePerSqrtDim = 0.75
	// DefaultMemBytes is the default Options.MemBytes.
	DefaultMemBytes = 256 << 20
)

// The parts of Options.MemBytes, the budget of the whole generation.
const (
	// ReserveBytes is the part that is neither the edge sorter's buffer
	// nor the generator's chunks: the whole process's reserve
	// (membudget.ReserveBytes: the runtime and the page cache) and
	// fixedBytes.
	ReserveBytes = membudget.ReserveBytes + fixedBytes
	// fixedBytes is what generation allocates beside the sorter's buffer
	// and the workers' chunks whatever the graph: the merge's run blocks
	// ((MaxFanIn+1) × 64 KiB) and the writers' buffers.
	fixedBytes = 8 << 20
	// WorkerBytes is what each generator worker adds: two edge batches
	// (about 1 MiB each, edgeBatchBytes) and two feature chunks (about
	// 1 MiB each, featChunkBytes) in flight.
	WorkerBytes = 2*edgeBatchBytes + 2*featChunkBytes
	// pipelineFixedBytes is the pipeline's part that does not grow with
	// the workers: the batch the sorter is taking and the two feature
	// chunks the writer holds.
	pipelineFixedBytes = edgeBatchBytes + 2*featChunkBytes
	// MinMemBytes is the smallest Options.MemBytes accepted: the reserve,
	// one worker's pipeline and the sorter's smallest buffer.
	MinMemBytes = ReserveBytes + pipelineFixedBytes + WorkerBytes + extsort.MinMemBytes
)

// MinMemHolds says what MinMemBytes holds, for messages that name it.
func MinMemHolds() string {
	ib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf("%s for the runtime and writers, %s for one generator worker's chunks, plus the sorter's smallest buffer of %d KiB",
		ib(ReserveBytes), ib(pipelineBytes(1)), extsort.MinMemBytes>>10)
}

// pipelineBytes is the generator's chunks in flight with w workers.
func pipelineBytes(w int) int64 { return pipelineFixedBytes + int64(w)*WorkerBytes }

// fitWorkers is the number of generator workers run under a budget of mem
// bytes when want were asked for: all of them while their chunks take at
// most half of what the reserve leaves (the sorter's buffer gets the
// rest), fewer under a tighter budget, at least one. The output does not
// depend on the workers.
func fitWorkers(mem int64, want int) int {
	room := max((mem-ReserveBytes)/2, pipelineBytes(1))
	w := want
	for w > 1 && pipelineBytes(w) > room {
		w--
	}
	return w
}

// sortBytes is the edge sorter's buffer under a budget of mem bytes with
// w workers.
func sortBytes(mem int64, w int) int64 { return mem - ReserveBytes - pipelineBytes(w) }

// Limits accepted by Validate.
const (
	MaxNodes    = 1 << 40
	MaxFeatDim  = 1 << 16
	MaxClasses  = 1 << 20
	MaxDegreeEx = 1e6
)

var (
	// ErrInvalidConfig is wrapped by every error of Config.Validate.
	ErrInvalidConfig = errors.New("synth: invalid config")
	// ErrInvalidOptions is wrapped by every error of Options.Validate.
	ErrInvalidOptions = errors.New("synth: invalid options")
)

// Config describes the graph to generate. Only Nodes is required; every
// other zero field selects its default (see the constants above and the
// field comments). The zero Seed is an ordinary seed.
type Config struct {
	// Nodes is the number of nodes, at least Communities.
	Nodes int64
	// AvgDegree is the expected average number of neighbours per node of
	// the symmetric graph before duplicate pairs and self loops are
	// dropped (the realised average is a few percent lower; see the
	// package doc). Default 20.
	AvgDegree float64
	// Communities is the number of planted communities. Default
	// Classes·max(1, round(Nodes/(1000·Classes))): communities of about
	// 1000 nodes, a multiple of Classes so that classes are balanced. It
	// must be at least Classes and at most Nodes.
	Communities int
	// FeatDim is the feature width. Default 128.
	FeatDim int
	// Classes is the number of labels, at least 2. Default 16.
	Classes int
	// TrainFrac, ValidFrac and TestFrac are the expected fractions of
	// nodes in each split; the splits are disjoint and their sum is at most
	// 1. When all three are zero the defaults 0.1, 0.05, 0.05 apply;
	// otherwise they are used as given (so a zero ValidFrac is possible).
	TrainFrac, ValidFrac, TestFrac float64
	// Homophily is the expected fraction of edge stubs whose endpoint lies
	// in the source's own community, in (0, 1]. The other stubs go to
	// other communities. Default 0.8. A value of 1/Communities gives a
	// graph without community structure.
	Homophily float64
	// DegreeExp is the power-law exponent γ of the expected degrees,
	// P(deg = d) ∝ d^-γ, greater than 2. Default 2.5.
	DegreeExp float64
	// FeatNoise is the standard deviation of the per-dimension noise
	// relative to the per-dimension class signal (centroid entries are
	// ±1). Default DefaultNoisePerSqrtDim·sqrt(FeatDim), about 8.5 at 128
	// dimensions: a nearest-class-mean classifier of the features alone
	// reaches roughly 25-35 % accuracy with 16 classes, the same classifier
	// on neighbourhood-averaged features over 90 %.
	FeatNoise float64
	// FeatDType is "float32" (default) or "float16".
	FeatDType string
	// Seed selects the graph. Same Config, same Seed: byte-identical files.
	Seed int64
	// Name goes to the manifest. Default "synth-<Nodes>".
	Name string
}

// Validate reports whether c is usable, with zero fields meaning their
// defaults. Errors wrap ErrInvalidConfig.
func (c *Config) Validate() error {
	d := c.withDefaults()
	bad := func(field opterr.Field, format string, args ...any) error {
		return opterr.Errorf(ErrInvalidConfig, "%s: "+format, append([]any{field}, args...)...)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Nodes <= 0:
		return bad("Nodes", "%d, want > 0", c.Nodes)
	case c.Nodes > MaxNodes:
		return bad("Nodes", "%d, want <= %d", c.Nodes, int64(MaxNodes))
	case !finite(c.AvgDegree) || c.AvgDegree < 0:
		return bad("AvgDegree", "%v, want > 0", c.AvgDegree)
	case d.AvgDegree >= float64(c.Nodes):
		return bad("AvgDegree", "%v, want < %s (%d)", d.AvgDegree, opterr.Field("Nodes"), c.Nodes)
	case c.Classes < 0 || c.Classes == 1 || c.Classes > MaxClasses:
		return bad("Classes", "%d, want 0 (default) or in [2, %d]", c.Classes, MaxClasses)
	case c.Communities < 0:
		return bad("Communities", "%d, want >= 0", c.Communities)
	case d.Communities < d.Classes:
		return bad("Communities", "%d, want >= %s (%d)", d.Communities, opterr.Field("Classes"), d.Classes)
	case int64(d.Communities) > c.Nodes:
		return bad("Communities", "%d communities for %d nodes; lower %s or %s", d.Communities, c.Nodes, opterr.Field("Classes"), opterr.Field("Communities"))
	case c.FeatDim < 0 || c.FeatDim > MaxFeatDim:
		return bad("FeatDim", "%d, want 0 (default) or in [1, %d]", c.FeatDim, MaxFeatDim)
	case !finite(c.Homophily) || c.Homophily < 0 || c.Homophily > 1:
		return bad("Homophily", "%v, want in (0, 1]", c.Homophily)
	case !finite(c.DegreeExp) || c.DegreeExp < 0 || (c.DegreeExp != 0 && c.DegreeExp <= 2) || c.DegreeExp > MaxDegreeEx:
		return bad("DegreeExp", "%v, want in (2, %g]", c.DegreeExp, float64(MaxDegreeEx))
	case !finite(c.FeatNoise) || c.FeatNoise < 0:
		return bad("FeatNoise", "%v, want >= 0", c.FeatNoise)
	case d.FeatDType != "float32" && d.FeatDType != "float16":
		return bad("FeatDType", "%q, want \"float32\" or \"float16\"", c.FeatDType)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"TrainFrac", c.TrainFrac}, {"ValidFrac", c.ValidFrac}, {"TestFrac", c.TestFrac}} {
		if !finite(f.v) || f.v < 0 || f.v > 1 {
			return bad(opterr.Field(f.name), "%v, want in [0, 1]", f.v)
		}
	}
	if s := d.TrainFrac + d.ValidFrac + d.TestFrac; s > 1+1e-12 {
		return opterr.Errorf(ErrInvalidConfig, "%s+%s+%s: %v, want <= 1", opterr.Field("TrainFrac"), opterr.Field("ValidFrac"), opterr.Field("TestFrac"), s)
	}
	return nil
}

// WithDefaults returns c with every zero field replaced by its default:
// the configuration Generate actually uses. It does not validate.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c *Config) withDefaults() Config {
	d := *c
	if d.AvgDegree == 0 {
		d.AvgDegree = DefaultAvgDegree
	}
	if d.Classes == 0 {
		d.Classes = DefaultClasses
	}
	if d.Communities == 0 && d.Classes > 0 {
		k := math.Round(float64(d.Nodes) / float64(DefaultCommunitySize*int64(d.Classes)))
		d.Communities = d.Classes * int(max(1, min(k, float64(math.MaxInt32/d.Classes))))
	}
	if d.FeatDim == 0 {
		d.FeatDim = DefaultFeatDim
	}
	if d.TrainFrac == 0 && d.ValidFrac == 0 && d.TestFrac == 0 {
		d.TrainFrac, d.ValidFrac, d.TestFrac = DefaultTrainFrac, DefaultValidFrac, DefaultTestFrac
	}
	if d.Homophily == 0 {
		d.Homophily = DefaultHomophily
	}
	if d.DegreeExp == 0 {
		d.DegreeExp = DefaultDegreeExp
	}
	if d.FeatNoise == 0 && d.FeatDim > 0 {
		d.FeatNoise = DefaultNoisePerSqrtDim * math.Sqrt(float64(d.FeatDim))
	}
	if d.FeatDType == "" {
		d.FeatDType = "float32"
	}
	if d.Name == "" {
		d.Name = fmt.Sprintf("synth-%d", d.Nodes)
	}
	return d
}

// Options tunes how Generate runs; none of it changes the output. A nil
// *Options means the defaults.
type Options struct {
	// Force replaces an existing dataset in the output directory, which
	// stays whole until the new one is complete
	// (storage.CreateOptions.Force).
	Force bool
	// MemBytes is the memory budget of the whole generation: peak RSS
	// stays within it. ReserveBytes of it go to the runtime and the
	// writers, WorkerBytes to each generator worker (fewer workers than
	// Workers run when their chunks would take more than half of what
	// the reserve leaves: Report.Workers), and the rest to the external
	// sorter's edge buffer (Report.SortBytes; its peak, growth steps
	// included). The Go runtime's soft memory limit is membudget's
	// (MemBytes less membudget.PageCacheBytes) while Generate runs. Default DefaultMemBytes (256 MiB);
	// 0 means the default, otherwise at least MinMemBytes.
	MemBytes int64
	// TempDir holds the sorter's run files. Default: the output directory
	// (so they land on the same disk as the dataset, not in a RAM-backed
	// /tmp). It must exist.
	TempDir string
	// Progress receives the "edges" and "features" tasks. nil: none.
	Progress progress.Reporter
	// Workers is the number of generator goroutines per stage. Default
	// runtime.GOMAXPROCS(0).
	Workers int
}

// Validate reports whether o is usable. A nil receiver is valid. Errors
// wrap ErrInvalidOptions.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.MemBytes < 0 || (o.MemBytes > 0 && o.MemBytes < MinMemBytes) {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want 0 (default) or at least %d (%s)", opterr.Field("MemBytes"), o.MemBytes, MinMemBytes, MinMemHolds())
	}
	if o.Workers < 0 {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want >= 0", opterr.Field("Workers"), o.Workers)
	}
	if o.TempDir != "" {
		fi, err := os.Stat(o.TempDir)
		if err != nil {
			return opterr.Errorf(ErrInvalidOptions, "%s: %w", opterr.Field("TempDir"), err)
		}
		if !fi.IsDir() {
			return opterr.Errorf(ErrInvalidOptions, "%s %s is not a directory", opterr.Field("TempDir"), o.TempDir)
		}
	}
	return nil
}

func (o *Options) withDefaults(outDir string) Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MemBytes == 0 {
		r.MemBytes = DefaultMemBytes
	}
	if r.TempDir == "" {
		r.TempDir = outDir
	}
	r.Progress = progress.Or(r.Progress)
	if r.Workers == 0 {
		r.Workers = runtime.GOMAXPROCS(0)
	}
	return r
}
