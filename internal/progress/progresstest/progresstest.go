// Package progresstest has progress.Reporters for tests of long-running
// work: CancelAt cancels a context when a named stage first reports
// progress, which is how the cancellation tests stop gen, import and
// partition at a chosen point.
package progresstest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// CancelBound is how long a cancelled run may take to return in tests.
// The target is under a second (measured 0.03-0.3 s on an idle machine);
// the bound is looser so that the race detector on a loaded, shared
// 2-core machine does not make the tests flaky.
const CancelBound = 3 * time.Second

// CancelAt is a progress.Reporter that calls Cancel when a task whose
// name starts with Prefix first reports progress, or, with After set,
// once such tasks have reported more than After units in all.
type CancelAt struct {
	Prefix string
	Cancel context.CancelFunc
	After  int64
	once   sync.Once
	mu     sync.Mutex
	done   int64
	at     time.Time
}

// At is when Cancel was called (zero: never).
func (c *CancelAt) At() time.Time { return c.at }

// Start implements progress.Reporter.
func (c *CancelAt) Start(desc string, _ int64, _ progress.Unit) progress.Task {
	return &cancelTask{c: c, hit: strings.HasPrefix(desc, c.Prefix)}
}

type cancelTask struct {
	c   *CancelAt
	hit bool
}

func (t *cancelTask) Add(n int64) {
	if !t.hit {
		return
	}
	t.c.mu.Lock()
	t.c.done += n
	past := t.c.done > t.c.After
	t.c.mu.Unlock()
	if past || t.c.After == 0 {
		t.c.once.Do(func() { t.c.at = time.Now(); t.c.Cancel() })
	}
}
func (t *cancelTask) Describe(string) {}
func (t *cancelTask) Done()           {}

// Recorder is a progress.Reporter that keeps every task it started, for
// tests that check what a long pass reports.
type Recorder struct {
	mu    sync.Mutex
	tasks []*Recorded
}

// Recorded is one task a Recorder started.
type Recorded struct {
	Desc  string
	Total int64
	mu    sync.Mutex
	added int64
	done  bool
}

// Start implements progress.Reporter.
func (r *Recorder) Start(desc string, total int64, _ progress.Unit) progress.Task {
	t := &Recorded{Desc: desc, Total: total}
	r.mu.Lock()
	r.tasks = append(r.tasks, t)
	r.mu.Unlock()
	return t
}

// Tasks lists the tasks started so far, in order.
func (r *Recorder) Tasks() []*Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Recorded(nil), r.tasks...)
}

// Added is the sum of the task's Add calls.
func (t *Recorded) Added() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.added
}

// Finished reports whether Done was called.
func (t *Recorded) Finished() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// Add implements progress.Task.
func (t *Recorded) Add(n int64) {
	t.mu.Lock()
	t.added += n
	t.mu.Unlock()
}

// Describe implements progress.Task.
func (t *Recorded) Describe(string) {}

// Done implements progress.Task.
func (t *Recorded) Done() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

// OnFirstAdd is a progress.Reporter that calls Fn once, synchronously,
// at the first Add of any task: a hook into a running pass, for tests
// that change its inputs under it.
type OnFirstAdd struct {
	Fn   func()
	once sync.Once
}

// Start implements progress.Reporter.
func (r *OnFirstAdd) Start(string, int64, progress.Unit) progress.Task { return r }

// Add implements progress.Task.
func (r *OnFirstAdd) Add(int64) { r.once.Do(r.Fn) }

// Describe implements progress.Task.
func (r *OnFirstAdd) Describe(string) {}

// Done implements progress.Task.
func (r *OnFirstAdd) Done() {}
