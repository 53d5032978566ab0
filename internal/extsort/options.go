package extsort

import (
	"errors"
	"fmt"
	"os"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
)

// Defaults and limits of Options.
const (
	DefaultMemBytes = 256 << 20 // default Options.MemBytes
	MinMemBytes     = 64 << 10  // smallest Options.MemBytes accepted by Validate
	DefaultMaxFanIn = 64        // default Options.MaxFanIn
	MinMaxFanIn     = 2         // smallest Options.MaxFanIn accepted by Validate
	// BlockSize is the size of the I/O buffer each open run file uses, and
	// the largest block in a run file.
	BlockSize = 64 << 10
)

// Sentinel errors. Returned errors wrap them; test with errors.Is.
var (
	ErrInvalidOptions = errors.New("extsort: invalid options")
	ErrNegativeID     = errors.New("extsort: negative node id")
	ErrSorted         = errors.New("extsort: Add or Sort after Sort")
	ErrClosed         = errors.New("extsort: sorter is closed")
	ErrCorrupt        = errors.New("extsort: corrupt run file")
)

// CorruptError reports a run file that failed verification. It matches
// ErrCorrupt with errors.Is.
type CorruptError struct {
	Path   string // run file
	Offset int64  // byte offset of the header or block that failed
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("extsort: corrupt run file %s at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Options configures a Sorter. The zero value of every field selects its
// default; a nil *Options means all defaults.
type Options struct {
	// TempDir is where run files are created. Default os.TempDir().
	TempDir string
	// MemBytes is the budget for the in-memory edge buffer. Default
	// DefaultMemBytes; at least MinMemBytes. See the package doc for the
	// full memory bound.
	MemBytes int64
	// Dedup drops exact duplicate (Src, Dst) pairs from the output.
	Dedup bool
	// ByRow sorts by Src only: the edges of one Src come out in the order
	// they were added (a stable sort by Src). Runs, intermediate merges
	// and the final merge all keep input order among equal Src. It
	// excludes Dedup. The importers use it where duplicates are kept and
	// a neighbour list's order is data (a GraphBolt edge array).
	ByRow bool
	// MaxFanIn is the largest number of runs merged at once. More runs
	// cause intermediate merge passes. Default DefaultMaxFanIn; at least
	// MinMaxFanIn.
	MaxFanIn int
}

// Validate reports whether o is usable. A nil receiver is valid. Zero
// fields are valid (they mean the default).
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.MemBytes < 0 || (o.MemBytes > 0 && o.MemBytes < MinMemBytes) {
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want 0 (default) or >= %d", opterr.Field("MemBytes"), o.MemBytes, MinMemBytes)
	}
	if o.ByRow && o.Dedup {
		return fmt.Errorf("%w: ByRow and Dedup: a stable by-row sort keeps every edge in input order, Dedup drops some", ErrInvalidOptions)
	}
	if o.MaxFanIn < 0 || (o.MaxFanIn > 0 && o.MaxFanIn < MinMaxFanIn) {
		return fmt.Errorf("%w: MaxFanIn %d, want 0 (default) or >= %d", ErrInvalidOptions, o.MaxFanIn, MinMaxFanIn)
	}
	return nil
}

// withDefaults returns a copy of o with every zero field set to its
// default. It does not modify o.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.TempDir == "" {
		r.TempDir = os.TempDir()
	}
	if r.MemBytes == 0 {
		r.MemBytes = DefaultMemBytes
	}
	if r.MaxFanIn == 0 {
		r.MaxFanIn = DefaultMaxFanIn
	}
	return r
}
