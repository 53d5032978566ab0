package extsort

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// StaleAge is how old a run file must be before CleanStale removes it. A
// live Sorter keeps a run for as long as its import runs, which may be
// long, so only files untouched for this long are assumed abandoned.
const StaleAge = time.Hour

// CleanStale removes run files (ssdgnn-sort-*.run) in dir whose
// modification time is more than StaleAge ago, left by a process that
// crashed. It returns how many it removed. Files that vanish meanwhile are
// not an error; other failures are joined into the returned error.
func CleanStale(dir string) (int, error) {
	return cleanStale(dir, time.Now().Add(-StaleAge))
}

func cleanStale(dir string, cutoff time.Time) (int, error) {
	paths, err := filepath.Glob(filepath.Join(dir, runPattern))
	if err != nil {
		return 0, fmt.Errorf("extsort: clean stale: %w", err)
	}
	n := 0
	var errs []error
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(p); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("extsort: clean stale: %w", errors.Join(errs...))
	}
	return n, nil
}
