package graphbolt

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// Sentinel errors; returned errors wrap them.
var (
	// ErrInvalidOptions is wrapped by every error of Options.Validate.
	ErrInvalidOptions = errors.New("graphbolt: invalid options")
	// ErrMetadata is wrapped by every problem of a metadata.yaml
	// (*MetadataError names the file, the field and the line).
	ErrMetadata = errors.New("graphbolt: bad metadata.yaml")
)

// Defaults of Options.
const (
	DefaultMemBytes = 64 << 20
	// MinMemBytes is the smallest accepted MemBytes: the whole
	// process's reserve (internal/membudget: the runtime and the page
	// cache of the files written) beside 8 MiB, the smallest chunks (a
	// quarter of the budget) and the writers' 1 MiB buffers. Measured on a
	// 1M-node, 670 MiB dataset (--copy) in a memory cgroup of MemBytes,
	// cold cache: 32 MiB 3.9 s, 64 MiB 2.3 s.
	MinMemBytes = membudget.ReserveBytes + 8<<20
)

// Options configures Export. The zero value of every field selects its
// default; a nil *Options means all defaults.
type Options struct {
	// IDDType is the dtype of the exported node ids (the edge array and
	// the seeds): npy.Int32 or npy.Int64 (default). Int32 needs N < 2^31.
	IDDType npy.DType
	// NoLink copies features.npy instead of hard linking it.
	NoLink bool
	// MemBytes is the memory budget of the whole export: its chunks take
	// a quarter of it, and the Go runtime's soft memory limit is
	// membudget's (MemBytes less membudget.PageCacheBytes) while the
	// export runs. Default DefaultMemBytes; at
	// least MinMemBytes.
	MemBytes int64
	// Force overwrites an existing export.
	Force bool
	// Progress receives progress reports; nil reports nothing.
	Progress progress.Reporter
	// Logger receives stage logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch o.IDDType {
	case npy.Invalid, npy.Int32, npy.Int64:
	default:
		return fmt.Errorf("%w: IDDType %v, want int32 or int64", ErrInvalidOptions, o.IDDType)
	}
	if o.MemBytes != 0 && o.MemBytes < MinMemBytes {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want at least %d (%d MiB)", opterr.Field("MemBytes"), o.MemBytes, MinMemBytes, MinMemBytes>>20)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.IDDType == npy.Invalid {
		r.IDDType = npy.Int64
	}
	if r.MemBytes == 0 {
		r.MemBytes = DefaultMemBytes
	}
	r.Progress = progress.Or(r.Progress)
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// chunkEdges is the number of edges buffered at a time: the buffers hold
// about 24 bytes per edge, and use a quarter of MemBytes.
func (o *Options) chunkEdges() int { return int(min(max(o.MemBytes/4/24, 4096), 1<<24)) }

// Report describes a finished export.
type Report struct {
	Dir            string `json:"dir"`
	Nodes          int64  `json:"nodes"`
	Edges          int64  `json:"edges"`
	FeatDim        int64  `json:"feat_dim"`
	FeaturesLinked bool   `json:"features_linked"` // hard link rather than copy
	Labels         bool   `json:"labels"`
	Task           bool   `json:"task"`     // a node_classification task was written
	OrigIDs        bool   `json:"orig_ids"` // node feature orig_id (a relabelled copy)
	Train          int64  `json:"train"`
	Valid          int64  `json:"valid"`
	Test           int64  `json:"test"`
	// UnlabelledSeeds counts, per set (train, validation, test), the
	// seeds whose label is -1: the dataset's split holds nodes without a
	// label (import warns, validate too). Training in ssdgnn skips them;
	// DGL trains on the set's labels as given, and its cross_entropy fails
	// on a -1 target.
	UnlabelledSeeds [3]int64      `json:"unlabelled_seeds"`
	BytesWritten    int64         `json:"bytes_written"` // excluding a hard-linked features file
	Wall            time.Duration `json:"wall_ns"`
}

// String is a one-paragraph human summary.
func (r Report) String() string {
	how := "copied"
	if r.FeaturesLinked {
		how = "hard-linked"
	}
	s := fmt.Sprintf("GraphBolt dataset in %s\n  nodes %d, edges %d", r.Dir, r.Nodes, r.Edges)
	if r.FeatDim > 0 {
		s += fmt.Sprintf(", features %d wide (%s)", r.FeatDim, how)
	}
	if r.Task {
		s += fmt.Sprintf("\n  node_classification: train %d, validation %d, test %d, labels %v", r.Train, r.Valid, r.Test, r.Labels)
	} else {
		s += "\n  no task (the dataset has no splits and no classes)"
	}
	if u := r.UnlabelledSeeds; u != [3]int64{} {
		s += fmt.Sprintf("\n  warning: %d train, %d validation and %d test seeds have label -1 (no label): DGL's cross_entropy fails on a -1 target; drop them (labels >= 0) before training", u[0], u[1], u[2])
	}
	if r.OrigIDs {
		s += "\n  node ids are the relabelled copy's; node feature orig_id holds each node's original id"
	}
	s += fmt.Sprintf("\n  %d bytes written in %v", r.BytesWritten, r.Wall.Round(time.Millisecond))
	return s
}
