package storage

import (
	"errors"
	"fmt"
)

var (
	// ErrNotDataset is returned by Open for a directory without a manifest,
	// including one whose import was interrupted.
	ErrNotDataset = errors.New("storage: not a dataset (no dataset.json)")
	// ErrExists is returned by Create when the directory already holds a
	// dataset and Force is not set.
	ErrExists = errors.New("storage: dataset already exists (use --force to overwrite)")
	// ErrMismatch is wrapped when a file disagrees with the manifest.
	ErrMismatch = errors.New("storage: file does not match manifest")
	// ErrCorrupt is wrapped by every *CorruptError.
	ErrCorrupt = errors.New("storage: corrupt data")
	// ErrDType is returned when a view is asked of an array of another dtype.
	ErrDType = errors.New("storage: wrong dtype")
	// ErrInvalidOptions reports options outside their bounds.
	ErrInvalidOptions = errors.New("storage: invalid options")
)

// CorruptError locates a problem in a dataset file. Index is the element
// (row) index, or -1 when Offset, a byte offset, is the better locator.
type CorruptError struct {
	File   string
	Field  string
	Index  int64
	Offset int64
	Msg    string
}

func (e *CorruptError) Error() string {
	loc := ""
	switch {
	case e.Index >= 0 && e.Field != "":
		loc = fmt.Sprintf(" %s[%d]", e.Field, e.Index)
	case e.Index >= 0:
		loc = fmt.Sprintf(" element %d", e.Index)
	case e.Offset >= 0:
		loc = fmt.Sprintf(" byte %d", e.Offset)
	}
	if loc == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%s: %s", e.File, loc, e.Msg)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corruptAt(file, field string, index int64, format string, args ...any) *CorruptError {
	return &CorruptError{File: file, Field: field, Index: index, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}
