package importer

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/csvnum"
	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// Sentinel errors. Returned errors wrap them; test with errors.Is.
var (
	// ErrInvalidOptions is wrapped by every error of Options.Validate, and
	// when the options do not fit the source (an unknown split name, a
	// headerless file without a RawSpec).
	ErrInvalidOptions = errors.New("importer: invalid options")
	// ErrLayout is wrapped when a required source file is missing or the
	// source directory is not in the expected layout.
	ErrLayout = errors.New("importer: unexpected source layout")
	// ErrFormat is wrapped by every error about the content of a source
	// file: syntax, ranges, widths, sizes, truncation. Such errors are a
	// *FormatError or wrap a *csvnum.ParseError; both name the file and
	// the line or element.
	ErrFormat = errors.New("importer: bad input")
	// ErrLabelConflict is wrapped (with ErrFormat) when a GraphBolt
	// task's set labels disagree with the "label" node feature: the same
	// dataset would train on other targets in DGL than in ssdgnn.
	ErrLabelConflict = errors.New("importer: set labels disagree with the label feature")
)

// FormatError locates a problem in a source file. Line is the 1-based line
// of a text file, or 0; Index is the 0-based element index of a binary
// (.npy) array, or -1. With neither, the problem concerns the whole file.
type FormatError struct {
	File  string
	Line  int64
	Index int64
	Msg   string
	// Kind, when set, is a sentinel the error also matches (such as
	// ErrLabelConflict).
	Kind error
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString(ErrFormat.Error())
	b.WriteString(": ")
	b.WriteString(e.File)
	switch {
	case e.Line > 0:
		fmt.Fprintf(&b, ": line %d", e.Line)
	case e.Index >= 0:
		fmt.Fprintf(&b, ": element %d", e.Index)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Is makes errors.Is(err, ErrFormat) true, and errors.Is(err, e.Kind).
func (e *FormatError) Is(target error) bool {
	return target == ErrFormat || (e.Kind != nil && target == e.Kind)
}

func lineErr(file string, line int64, format string, args ...any) error {
	return &FormatError{File: file, Line: line, Index: -1, Msg: fmt.Sprintf(format, args...)}
}

func elemErr(file string, index int64, format string, args ...any) error {
	return &FormatError{File: file, Index: index, Msg: fmt.Sprintf(format, args...)}
}

func fileErr(file string, format string, args ...any) error {
	return &FormatError{File: file, Index: -1, Msg: fmt.Sprintf(format, args...)}
}

// badInput wraps a csvnum error (which names file, line and column) so that
// it also matches ErrFormat.
func badInput(err error) error {
	var pe *csvnum.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return err
}

// Roles of the files of a source, the keys of Options.Raw.
const (
	RoleFeat  = "feat"
	RoleLabel = "label"
	RoleEdges = "edges"
)

// RawSpec describes a headerless array file (IGB large/full ship raw
// little-endian arrays named .npy): its dtype and shape, both required.
type RawSpec struct {
	DType npy.DType
	Shape []int64
}

// Defaults of Options.
const (
	// DefaultMemBytes is the default Options.MemBytes.
	DefaultMemBytes = 512 << 20
	// ReserveBytes is the part of Options.MemBytes that is not the edge
	// sorter's buffer: the whole process's reserve (membudget.ReserveBytes,
	// the runtime and the page cache) and fixedBytes.
	ReserveBytes = membudget.ReserveBytes + fixedBytes
	// fixedBytes is what the import allocates beside the sorter's buffer
	// whatever the input: the merge's run blocks ((MaxFanIn+1) × 64 KiB),
	// a text line of up to MaxTextLine bytes (1.5× that while its buffer
	// grows), and the fixed chunk buffers of the edge, feature and label
	// readers.
	fixedBytes = 16 << 20
	// MinMemBytes is the smallest Options.MemBytes accepted: the reserve
	// plus the sorter's smallest buffer.
	MinMemBytes = ReserveBytes + extsort.MinMemBytes
	// MaxTextLine is the longest line accepted in a text source (edge
	// list, CSV features, labels, splits). A longer line is an error
	// naming the file and line; it would otherwise cost memory outside
	// the budget.
	MaxTextLine     = 4 << 20
	DefaultFeatType = "float32"
	// DefaultLabelFileIGB is the label file ImportNPY reads when
	// Options.LabelFile is empty and it exists.
	DefaultLabelFileIGB = "node_label_19.npy"
)

// DefaultSplitFrac is the train/valid/test fraction of labelled nodes of a
// random split, used when the source has no split.
var DefaultSplitFrac = [3]float64{0.6, 0.2, 0.2}

// Options configures an import. The zero value of every field selects its
// default; a nil *Options means all defaults.
type Options struct {
	// Name of the dataset. Default: the base name of the source.
	Name string
	// Directed stores edges as given. The default symmetrises: every
	// edge (u, v) is stored as (u, v) and (v, u).
	Directed bool
	// KeepSelfLoops keeps edges (v, v); by default they are dropped and
	// counted in Report.SelfLoopsDropped.
	KeepSelfLoops bool
	// KeepDuplicates keeps repeated edges; by default every directed pair
	// is stored once and the extra copies are counted in
	// Report.DuplicatesDropped.
	KeepDuplicates bool
	// FeatDType is the stored feature dtype, "float32" (default) or
	// "float16".
	FeatDType string
	// NumClasses, when positive, is the number of classes: every label
	// must lie in [0, NumClasses). When 0 it is inferred as the largest
	// label + 1.
	NumClasses int64
	// SplitFrac is the train/valid/test fraction of labelled nodes of the
	// random split made when the source has none. Default
	// DefaultSplitFrac. Fractions are in [0, 1] and sum to at most 1.
	SplitFrac [3]float64
	// Seed seeds the random split. The split is a deterministic function
	// of Seed and the set of labelled nodes.
	Seed int64
	// MemBytes is the memory budget of the whole import. The edge
	// sorter's buffer gets MemBytes − ReserveBytes (its peak, growth
	// steps included: package extsort); the Go runtime's soft memory
	// limit is membudget's (MemBytes less membudget.PageCacheBytes) for
	// the import, so that garbage does not take RSS past the budget. After the sort the
	// buffer is gone, and the per-node tables (3 bits per node; refused
	// when they exceed the sorter's share) and the ids of one source
	// split while it is sorted (8 bytes each) take its place. Default
	// DefaultMemBytes; at least MinMemBytes.
	MemBytes int64
	// TempDir is where sort runs are spilled, in a fresh subdirectory
	// removed when the import ends. Default: the output directory.
	TempDir string
	// Force replaces an existing dataset in the output directory, which
	// stays whole until the new one is complete
	// (storage.CreateOptions.Force).
	Force bool
	// AllowNonFinite stores NaN and ±Inf features as they are, counted in
	// Report.NonFiniteFeatures, and finite values beyond the stored
	// dtype's range (float64 sources beyond float32's ±3.4e38; with
	// FeatDType float16, beyond ±65504) as the ±Inf they overflow to,
	// counted in Report.OverflowFeatures; both are logged as warnings. By
	// default the first such value is an error naming the file, the node
	// (row), the column and the value as the source has it. validate
	// reports such a dataset as bad (it sees only the stored ±Inf).
	AllowNonFinite bool
	// Progress receives progress reports; nil reports nothing.
	Progress progress.Reporter
	// Logger receives stage logs; nil discards them.
	Logger *slog.Logger

	// Split names the OGB split directory split/<Split>. Default: the only
	// one present; when there are several, Split is required.
	Split string

	// LabelFile is, for ImportNPY, the label file name under paper/
	// (default DefaultLabelFileIGB, else node_label_2K.npy, whichever
	// exists), and for ImportEdgeList the path of a label file: one
	// integer per line (gzip if it ends in .gz), or a .npy array (a name
	// ending in .npy, in any case, or a file starting with the .npy magic;
	// a zip archive, such as an .npz, is refused).
	LabelFile string
	// Raw gives dtype and shape of headerless array files, by role
	// (RoleFeat, RoleLabel, RoleEdges). Used only for files that lack the
	// .npy magic; a file that lacks it with no spec is an error.
	Raw map[string]RawSpec

	// Delim separates the two ids of an edge-list line. Default ' ', which
	// means any run of spaces and tabs.
	Delim byte
	// Comment starts comment lines of an edge list. Default "#".
	Comment string
	// FeatFile is the path of the features of an edge-list import: a .npy
	// array [N, D] (told as LabelFile's is), or comma-separated rows, one
	// per node (gzip if it ends in .gz).
	FeatFile string
	// NumNodes is the number of nodes of an edge-list import (ImportNPY
	// checks it against the arrays). Default: the largest id in the edge
	// list + 1, or the row count of a .npy feature file.
	NumNodes int64
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return opterr.Errorf(ErrInvalidOptions, format, args...)
	}
	switch o.FeatDType {
	case "", "float32", "float16":
	default:
		return bad("FeatDType %q, want float32 or float16", o.FeatDType)
	}
	if o.NumClasses < 0 || o.NumClasses > math.MaxInt32 {
		return bad("%s %d, want 0 (infer) or in [1, 2^31)", opterr.Field("NumClasses"), o.NumClasses)
	}
	sum := 0.0
	for i, f := range o.SplitFrac {
		if !(f >= 0 && f <= 1) {
			return bad("%s[%d] = %v, want a fraction in [0, 1]", opterr.Field("SplitFrac"), i, f)
		}
		sum += f
	}
	if sum > 1+1e-9 {
		return bad("%s %v sums to %v, want at most 1", opterr.Field("SplitFrac"), o.SplitFrac, sum)
	}
	if o.MemBytes < 0 || (o.MemBytes > 0 && o.MemBytes < MinMemBytes) {
		return bad("%s %d, want 0 (default) or at least %d (ReserveBytes %d for the runtime and fixed buffers, plus %d of sort buffer)", opterr.Field("MemBytes"), o.MemBytes, MinMemBytes, ReserveBytes, extsort.MinMemBytes)
	}
	if o.NumNodes < 0 {
		return bad("%s %d is negative", opterr.Field("NumNodes"), o.NumNodes)
	}
	for role, s := range o.Raw {
		switch role {
		case RoleFeat, RoleLabel, RoleEdges:
		default:
			return bad("%s: unknown role %q, want %s, %s or %s", opterr.Field("Raw"), role, RoleFeat, RoleLabel, RoleEdges)
		}
		if s.DType == npy.Invalid || s.DType.Size() == 0 {
			return bad("%s[%q]: no dtype", opterr.Field("Raw"), role)
		}
		if len(s.Shape) == 0 {
			return bad("%s[%q]: no shape", opterr.Field("Raw"), role)
		}
		h := npy.Header{DType: s.DType, Shape: s.Shape}
		for _, d := range s.Shape {
			if d < 0 {
				return bad("%s[%q]: negative dimension in shape %v", opterr.Field("Raw"), role, s.Shape)
			}
		}
		if h.DataBytes() < 0 {
			return bad("%s[%q]: shape %v overflows", opterr.Field("Raw"), role, s.Shape)
		}
	}
	if err := (&csvnum.Options{Delim: o.Delim, Comment: o.Comment}).Validate(); err != nil {
		return bad("%w", err)
	}
	if comment := cmp.Or(o.Comment, "#"); o.Delim != 0 && o.Delim != ' ' && comment[0] == o.Delim {
		return bad("%s %q starts %s %q: a line that starts with a delimiter would be a comment; choose another %s", opterr.Field("Delim"), o.Delim, opterr.Field("Comment"), comment, opterr.Field("Comment"))
	}
	return nil
}

// withDefaults returns a copy of o with zero fields set to their defaults.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.FeatDType == "" {
		r.FeatDType = DefaultFeatType
	}
	if r.SplitFrac == ([3]float64{}) {
		r.SplitFrac = DefaultSplitFrac
	}
	if r.MemBytes == 0 {
		r.MemBytes = DefaultMemBytes
	}
	if r.Delim == 0 {
		r.Delim = ' '
	}
	if r.Comment == "" {
		r.Comment = "#"
	}
	r.Progress = progress.Or(r.Progress)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// Report describes a finished import.
type Report struct {
	Name   string `json:"name"`
	Source string `json:"source"` // as recorded in the manifest
	OutDir string `json:"out_dir"`

	Nodes             int64 `json:"nodes"`
	EdgesRead         int64 `json:"edges_read"`   // edges in the source, as listed
	EdgesStored       int64 `json:"edges_stored"` // directed edges in the CSR (num_edges)
	SelfLoopsDropped  int64 `json:"self_loops_dropped"`
	DuplicatesDropped int64 `json:"duplicates_dropped"` // directed copies dropped after symmetrising
	Symmetrized       bool  `json:"symmetrized"`

	FeatDim   int64  `json:"feat_dim"`
	FeatDType string `json:"feat_dtype"`
	FeatRows  int64  `json:"feat_rows"`
	// NonFiniteFeatures counts NaN/Inf feature values of the source
	// stored under Options.AllowNonFinite (always 0 otherwise).
	NonFiniteFeatures int64 `json:"non_finite_features"`
	// OverflowFeatures counts finite source values beyond the stored
	// dtype's range (float32's ±3.4e38, float16's ±65504), stored as
	// ±Inf under Options.AllowNonFinite (always 0 otherwise).
	OverflowFeatures int64 `json:"overflow_features"`

	Labelled   int64 `json:"labelled"` // nodes with a label
	NumClasses int64 `json:"num_classes"`

	Split       string `json:"split"` // split name, "random" for a generated split, "" for none
	Train       int64  `json:"train"`
	Valid       int64  `json:"valid"`
	Test        int64  `json:"test"`
	RandomSplit bool   `json:"random_split"`
	// SplitUnlabelled counts, per split (train, valid, test), the nodes
	// of a source split that have no label; FirstSplitUnlabelled is the
	// smallest of them (meaningful when any is counted). Training skips
	// such nodes.
	SplitUnlabelled      [3]int64 `json:"split_unlabelled"`
	FirstSplitUnlabelled int64    `json:"first_split_unlabelled"`

	SortRuns         int64 `json:"sort_runs"` // runs the edge sorter spilled
	SortSpilledBytes int64 `json:"sort_spilled_bytes"`

	BytesIn  int64         `json:"bytes_in"`  // size of the source files read
	BytesOut int64         `json:"bytes_out"` // size of the dataset's array files
	Wall     time.Duration `json:"wall_ns"`
}

// String is a multi-line human summary.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dataset %s in %s (from %s)\n", r.Name, r.OutDir, r.Source)
	fmt.Fprintf(&b, "  nodes %d, edges read %d, stored %d (symmetrised %v), self loops dropped %d, duplicates dropped %d\n",
		r.Nodes, r.EdgesRead, r.EdgesStored, r.Symmetrized, r.SelfLoopsDropped, r.DuplicatesDropped)
	if r.FeatDim > 0 {
		fmt.Fprintf(&b, "  features %d × %d %s\n", r.FeatRows, r.FeatDim, r.FeatDType)
		if r.NonFiniteFeatures > 0 {
			fmt.Fprintf(&b, "  warning: %d NaN/Inf feature values stored (--allow-nonfinite)\n", r.NonFiniteFeatures)
		}
		if r.OverflowFeatures > 0 {
			fmt.Fprintf(&b, "  warning: %d finite feature values beyond %s's range overflowed to ±Inf on conversion (--allow-nonfinite)\n", r.OverflowFeatures, r.FeatDType)
		}
	}
	if r.Labelled > 0 || r.NumClasses > 0 {
		fmt.Fprintf(&b, "  labels: %d labelled, %d classes\n", r.Labelled, r.NumClasses)
	}
	if r.Split != "" {
		fmt.Fprintf(&b, "  split %s: train %d, valid %d, test %d\n", r.Split, r.Train, r.Valid, r.Test)
	}
	if u := r.SplitUnlabelled; u != [3]int64{} {
		fmt.Fprintf(&b, "  warning: split nodes without a label (training skips them): train %d, valid %d, test %d; first node %d\n",
			u[0], u[1], u[2], r.FirstSplitUnlabelled)
	}
	fmt.Fprintf(&b, "  sort: %d runs spilled, %d bytes\n", r.SortRuns, r.SortSpilledBytes)
	secs := r.Wall.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(r.BytesIn) / secs / 1e6
	}
	fmt.Fprintf(&b, "  %d bytes in, %d bytes out, %v (%.1f MB/s in)", r.BytesIn, r.BytesOut, r.Wall.Round(time.Millisecond), rate)
	return b.String()
}
