package storage

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ssdgnn/ssdgnn/internal/iostat"
)

// Standard stage names used across ssdgnn's reports.
const (
	StageSample = "sample"
	StageGather = "gather"
	StageLoad   = "load" // cache fills and partition loads
)

// StageCounters counts one pipeline stage's requests and storage reads.
// All methods are safe for concurrent use.
type StageCounters struct {
	rows           atomic.Int64
	bytesRequested atomic.Int64
	bytesRead      atomic.Int64
	readCalls      atomic.Int64
	_              [32]byte // keep hot counters of distinct stages apart
}

// Request records rows and bytes a stage asked for, whether served from a
// cache or from storage.
func (s *StageCounters) Request(rows, bytes int64) {
	s.rows.Add(rows)
	s.bytesRequested.Add(bytes)
}

// Read records bytes the stage read from storage itself (pread paths), or
// a /proc read_bytes delta attributed to it.
func (s *StageCounters) Read(bytes int64) {
	s.bytesRead.Add(bytes)
	s.readCalls.Add(1)
}

// StageStats is a snapshot of StageCounters.
type StageStats struct {
	Stage          string `json:"stage"`
	Rows           int64  `json:"rows_requested"`
	BytesRequested int64  `json:"bytes_requested"`
	BytesRead      int64  `json:"bytes_read"`
	ReadCalls      int64  `json:"read_calls"`
}

// Accounting collects StageCounters by name. The zero value is not usable;
// use NewAccounting.
type Accounting struct {
	mu struct {
		sync.Mutex
		stages map[string]*StageCounters
	}
}

// NewAccounting returns an empty Accounting.
func NewAccounting() *Accounting {
	a := &Accounting{}
	a.mu.stages = map[string]*StageCounters{}
	return a
}

// Stage returns the counters of the named stage, creating them on first
// use. Callers on hot paths should keep the returned pointer.
func (a *Accounting) Stage(name string) *StageCounters {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.mu.stages[name]
	if !ok {
		s = &StageCounters{}
		a.mu.stages[name] = s
	}
	return s
}

// Snapshot returns every stage's counters, sorted by stage name.
func (a *Accounting) Snapshot() []StageStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]StageStats, 0, len(a.mu.stages))
	for name, s := range a.mu.stages {
		out = append(out, StageStats{
			Stage:          name,
			Rows:           s.rows.Load(),
			BytesRequested: s.bytesRequested.Load(),
			BytesRead:      s.bytesRead.Load(),
			ReadCalls:      s.readCalls.Load(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stage < out[j].Stage })
	return out
}

// Measure runs fn and attributes the process's /proc/self/io read_bytes
// delta to stage. It is exact only when no other stage reads storage while
// fn runs (for example, in a profiling pass that runs stages one at a
// time); the mmap path has no other way to learn what faulted in. It
// returns the delta, or 0 where /proc is unavailable.
func (a *Accounting) Measure(stage string, fn func()) int64 {
	before, err := iostat.Self()
	fn()
	if err != nil {
		return 0
	}
	after, err := iostat.Self()
	if err != nil {
		return 0
	}
	d := after.ReadBytes - before.ReadBytes
	a.Stage(stage).Read(d)
	return d
}
