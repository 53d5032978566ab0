package sample

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidOptions is wrapped by every Options/RROptions/SpillOptions
	// validation error.
	ErrInvalidOptions = errors.New("sample: invalid options")
	// ErrNoPartitions is returned when partition-based selection is asked
	// for without a Partitions.
	ErrNoPartitions = errors.New("sample: partition mode needs a partitioning")
	// ErrCorrupt is wrapped by every *CorruptError.
	ErrCorrupt = errors.New("sample: corrupt spill file")
	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("sample: iterator closed")
)

// CorruptError locates a bad spill record: the file and the byte offset of
// the record (or header) that failed to decode.
type CorruptError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: byte %d: %s", e.File, e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
