package planner

import (
	"errors"
	"fmt"
)

// Errors returned by the package. Every error wraps one of them (or an
// error of the packages it calls).
var (
	// ErrInvalidOptions is wrapped by the Validate errors.
	ErrInvalidOptions = errors.New("planner: invalid options")
	// ErrBudget reports a memory budget too small for the caches' tables.
	ErrBudget = errors.New("planner: budget too small")
	// ErrNotFound reports a profile that does not exist.
	ErrNotFound = errors.New("planner: profile not found")
	// ErrCorrupt is wrapped by *CorruptError.
	ErrCorrupt = errors.New("planner: corrupt profile")
	// ErrMismatch reports a profile that does not belong to the dataset or
	// plan it is used with.
	ErrMismatch = errors.New("planner: profile mismatch")
	// ErrBadPlan reports a plan file that cannot be a plan (ReadPlan).
	ErrBadPlan = errors.New("planner: bad plan")
)

// CorruptError reports a damaged profile file: the file, the byte offset
// where the damage was found, and the field ("" when unknown): a
// profile.json key, or an array file's "header", "data" or "trailing"
// bytes.
type CorruptError struct {
	File   string
	Offset int64
	Field  string
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("planner: %s: offset %d (%s): %s", e.File, e.Offset, e.Field, e.Reason)
	}
	return fmt.Sprintf("planner: %s: offset %d: %s", e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
