// Package progress reports the progress of long work. Library packages
// take a Reporter in their Options (nil means Discard) and never decide
// whether to draw: the command line builds a Terminal reporter, which draws
// a bar on stderr only when stderr is a terminal and --quiet is not set.
//
// Invariants: every Reporter and Task is safe for concurrent use; a task
// started with total <= 0 has an unknown total, never an error; every
// started Task must be finished with Done, which clears its bar.
package progress

import (
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Unit says how to print counts.
type Unit int

// Units.
const (
	Items Unit = iota
	Bytes
)

// Reporter starts tasks. Implementations are safe for concurrent use.
type Reporter interface {
	// Start begins a task. total <= 0 means unknown.
	Start(desc string, total int64, unit Unit) Task
}

// Task is one unit of reported work. Methods are safe for concurrent use.
type Task interface {
	Add(n int64)
	// Describe replaces the description, e.g. to show a running statistic.
	Describe(desc string)
	// Done finishes the task and clears the bar.
	Done()
}

// Discard reports nothing.
var Discard Reporter = discard{}

type discard struct{}

func (discard) Start(string, int64, Unit) Task { return nopTask{} }

type nopTask struct{}

func (nopTask) Add(int64)       {}
func (nopTask) Describe(string) {}
func (nopTask) Done()           {}

// Or returns r, or Discard when r is nil.
func Or(r Reporter) Reporter {
	if r == nil {
		return Discard
	}
	return r
}

// Terminal returns a Reporter drawing on w, or Discard when quiet is set
// or w is not a terminal.
func Terminal(w io.Writer, quiet bool) Reporter {
	if quiet {
		return Discard
	}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return Discard
	}
	return &terminal{w: w}
}

type terminal struct {
	w      io.Writer
	mu     sync.Mutex // one bar draws at a time
	active []*bar     // started, not done, in start order; the first draws
}

// Start begins a task. Tasks that run at once (gen's edges and features)
// share one line: the earliest started draws, the others count silently
// and draw from where they are when their turn comes. Two bars drawing
// by turns on one line flickered between their descriptions.
func (t *terminal) Start(desc string, total int64, unit Unit) Task {
	if total <= 0 {
		total = -1
	}
	b := &bar{t: t, desc: desc, total: total, unit: unit}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active = append(t.active, b)
	if len(t.active) == 1 {
		b.show()
	}
	return b
}

type bar struct {
	t     *terminal
	desc  string
	total int64
	unit  Unit
	count int64
	b     *progressbar.ProgressBar // nil until the bar's turn to draw
}

// show starts drawing b from its count so far; t.mu is held.
func (b *bar) show() {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(b.t.w),
		progressbar.OptionSetDescription(b.desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
		// Drawn empty at once, so that the first count drawn comes a
		// throttle interval later: drawn at the first Add, microseconds
		// in, its rate read "142726441 it/s".
		progressbar.OptionSetRenderBlankState(true),
	}
	if b.unit == Bytes {
		// The byte rate only: with OptionShowIts too the bar printed the
		// same rate again as a bare count ("595 MB/s, 594632206 it/s").
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts())
	}
	b.b = progressbar.NewOptions64(b.total, opts...)
	if b.count > 0 {
		b.b.Add64(b.count)
	}
}

func (b *bar) Add(n int64) {
	b.t.mu.Lock()
	b.count += n
	if b.b != nil {
		b.b.Add64(n)
	}
	b.t.mu.Unlock()
}

func (b *bar) Describe(d string) {
	b.t.mu.Lock()
	b.desc = d
	if b.b != nil {
		b.b.Describe(d)
	}
	b.t.mu.Unlock()
}

func (b *bar) Done() {
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.Index(t.active, b)
	if i < 0 {
		return // Done twice
	}
	if b.b != nil {
		b.b.Finish()
	}
	t.active = slices.Delete(t.active, i, i+1)
	if len(t.active) > 0 && t.active[0].b == nil {
		t.active[0].show()
	}
}
