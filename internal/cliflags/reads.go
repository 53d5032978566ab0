package cliflags

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// ReadFlags say how feature rows are read from storage. train reads with
// them and profile models the same reads, so both take them.
type ReadFlags struct {
	mode, io string
	gap      int64
	amp      float64
}

// Register registers --feat-read, --max-read-amp, --coalesce-gap and --io.
func (r *ReadFlags) Register(f *pflag.FlagSet) {
	f.StringVar(&r.mode, "feat-read", "auto", "how feature-cache misses are read: auto (O_DIRECT where supported when a memory cgroup limit charges the page cache or the features exceed half of available memory, else buffered), buffered (page cache, 4 KiB per row) or direct (O_DIRECT, only the row's blocks)")
	f.Float64Var(&r.amp, "max-read-amp", featurecache.DefaultMaxReadAmplification, "cap on feature bytes read ÷ bytes of the missed rows when --coalesce-gap merges reads: the smallest gaps merge first while they fit (0: no cap; 1: only rows sharing a block)")
	f.Int64Var(&r.gap, "coalesce-gap", -1, "read two missed feature rows with one call when fewer than this many rows lie between them (-1: the break-even gap of DIR/device.json from ssdgnn probe, or of the default profile; 0: one read per row)")
	f.StringVar(&r.io, "io", "auto", "how feature reads are submitted: auto (io_uring where the kernel allows it), uring or pread")
}

// Options returns the flags as featurecache.Options' read fields (Mode
// may be storage.ReadAuto: see train.AutoFeatRead).
func (r *ReadFlags) Options() (featurecache.Options, error) {
	var o featurecache.Options
	var err error
	if o.Mode, err = storage.ParseReadMode(r.mode); err != nil {
		return o, err
	}
	if o.IO, err = storage.ParseIOEngine(r.io); err != nil {
		return o, err
	}
	switch {
	case r.gap < -1:
		return o, fmt.Errorf("--coalesce-gap %d: want -1 (device.json), 0 (one read per row) or a row count", r.gap)
	case r.gap == 0:
		o.CoalesceGap = featurecache.PerRowReads
	case r.gap > 0:
		o.CoalesceGap = r.gap
	}
	switch {
	case r.amp == 0:
		o.MaxReadAmplification = featurecache.UncappedReads
	case r.amp >= 1:
		o.MaxReadAmplification = r.amp
	default:
		return o, fmt.Errorf("--max-read-amp %v: want 0 (no cap) or a ratio of at least 1", r.amp)
	}
	return o, nil
}

// SourceFlag says how uncached neighbour lists are read (--source): train,
// rr and profile sample, so all three take it.
type SourceFlag string

// Register registers --source.
func (s *SourceFlag) Register(f *pflag.FlagSet) {
	f.StringVar((*string)(s), "source", "auto", "how uncached neighbour lists are read: auto (batch when the graph exceeds half of what the page cache has left: the memory cgroup limit, else available memory, less --mem plus half its runtime reserve; else mmap), mmap, pread, direct (one pread per list) or batch (a hop's lists read together: sorted, merged, io_uring, O_DIRECT)")
}

// Check rejects an unknown --source before any work starts.
func (s SourceFlag) Check() error {
	if s == "auto" {
		return nil
	}
	_, err := sample.ParseSource(string(s))
	return err
}

// Resolve is the sampler source for d: the flag's, or for auto
// train.AutoSource under budget bytes of --mem (0: none), logged.
func (s SourceFlag) Resolve(d *storage.Dataset, budget int64, log *slog.Logger) (sample.Source, error) {
	src, note, err := s.resolveIn(d, 0, budget)
	if note != "" {
		log.Info(note)
	}
	return src, err
}

// resolveIn is Resolve for a process whose memory room is room bytes (0:
// this process's own, train.AutoSource; else train.AutoSourceIn), with
// auto's note returned (empty for a named source).
func (s SourceFlag) resolveIn(d *storage.Dataset, room, budget int64) (sample.Source, string, error) {
	switch {
	case s != "auto":
		src, err := sample.ParseSource(string(s))
		return src, "", err
	case room > 0:
		src, note := train.AutoSourceIn(d, room, budget)
		return src, note, nil
	}
	src, note := train.AutoSource(d, budget)
	return src, note, nil
}
