package partition

import (
	"errors"
	"fmt"
)

var (
	// ErrOptions is wrapped by every invalid-option error from Validate.
	ErrOptions = errors.New("partition: invalid options")
	// ErrExists is returned by Run when the partitioning already exists and
	// Options.Force is not set.
	ErrExists = errors.New("partition: partitioning already exists (use --force to overwrite)")
	// ErrNotFound is returned by Open for a name without a manifest,
	// including one whose writing was interrupted.
	ErrNotFound = errors.New("partition: no such partitioning (no manifest.json)")
	// ErrMemory is returned by Run, before any work, when the memory
	// cgroup's limit is below MinMemory.
	ErrMemory = errors.New("partition: memory limit too small")
	// ErrNoMetis is returned by the metis method when gpmetis is not on PATH.
	ErrNoMetis = errors.New("partition: gpmetis not found on PATH (install METIS, e.g. apt-get install metis)")
	// ErrMismatch is wrapped when a file disagrees with the manifest or the
	// manifest disagrees with the dataset.
	ErrMismatch = errors.New("partition: file does not match manifest")
	// ErrCorrupt is wrapped by every *CorruptError.
	ErrCorrupt = errors.New("partition: corrupt data")
	// ErrInfeasible is returned when no partition can take a node because
	// every partition is at its cap (cannot happen with Epsilon > 0).
	ErrInfeasible = errors.New("partition: every partition is full")
)

// CorruptError locates a problem in a partition file. Index is the element
// index, or -1 when Offset, a byte offset, is the better locator.
type CorruptError struct {
	File   string
	Index  int64
	Offset int64
	Msg    string
}

func (e *CorruptError) Error() string {
	switch {
	case e.Index >= 0:
		return fmt.Sprintf("%s: element %d: %s", e.File, e.Index, e.Msg)
	case e.Offset >= 0:
		return fmt.Sprintf("%s: byte %d: %s", e.File, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
