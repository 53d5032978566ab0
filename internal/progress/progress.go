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
	w  io.Writer
	mu sync.Mutex // one bar draws at a time
}

func (t *terminal) Start(desc string, total int64, unit Unit) Task {
	if total <= 0 {
		total = -1
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(t.w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
	}
	if unit == Bytes {
		// The byte rate only: with OptionShowIts too the bar printed the
		// same rate again as a bare count ("595 MB/s, 594632206 it/s").
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts())
	}
	return &bar{t: t, b: progressbar.NewOptions64(total, opts...)}
}

type bar struct {
	t *terminal
	b *progressbar.ProgressBar
}

func (b *bar) Add(n int64) {
	b.t.mu.Lock()
	b.b.Add64(n)
	b.t.mu.Unlock()
}

func (b *bar) Describe(d string) {
	b.t.mu.Lock()
	b.b.Describe(d)
	b.t.mu.Unlock()
}

func (b *bar) Done() {
	b.t.mu.Lock()
	b.b.Finish()
	b.t.mu.Unlock()
}
