package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/iostat"
	"github.com/ssdgnn/ssdgnn/internal/memstat"
)

// ErrStart reports that the child could not be started.
var ErrStart = errors.New("child: start")

// Spec is one child process.
type Spec struct {
	Name string   // for error messages
	Argv []string // Argv[0] is the program
	// Cgroup, when set, is the cgroup the child runs in from its first
	// instruction; Run reads its counters after the child exits. Capped
	// makes one.
	Cgroup *cgroup.Cgroup
	// StdoutPath and StderrPath, when set, are files the child's output
	// goes to (created or truncated); otherwise Stdout and Stderr are
	// used (nil: discarded). Result.StderrTail is kept only from a file.
	StdoutPath, StderrPath string
	Stdin                  io.Reader
	Stdout, Stderr         io.Writer
	// Watch, when set, is polled every PollEvery while the child runs;
	// returning true sends SIGKILL.
	Watch   func() bool
	Timeout time.Duration // 0: none
}

// Result is what a child did, seen from outside.
type Result struct {
	Argv     []string `json:"argv"`
	ExitCode int      `json:"exit_code"` // -1 when killed by a signal
	Signal   string   `json:"signal,omitempty"`
	// KilledByUs: Run sent SIGKILL (context, timeout or Watch).
	KilledByUs bool    `json:"killed_by_harness,omitempty"`
	WallSec    float64 `json:"wall_s"`
	UserSec    float64 `json:"user_s"`
	SysSec     float64 `json:"sys_s"`
	// ReadBytes is read_bytes of /proc/<pid>/io read after the child
	// exited but before it was reaped (waitid WNOWAIT): the bytes the
	// whole process caused to be fetched from the block layer, mmap
	// faults and readahead included. -1 when unavailable.
	ReadBytes int64 `json:"read_bytes"`
	// InblockBytes is the rusage block-input count × 512, a cross-check.
	InblockBytes int64 `json:"inblock_bytes"`
	// MaxRSSBytes is the child's rusage ru_maxrss. Go starts a child
	// sharing the runner's memory until it execs (CLONE_VM|CLONE_VFORK),
	// and the kernel keeps that memory's high-water mark in the child's
	// count: MaxRSSBytes is never below RunnerPeakBytes, the runner's own
	// peak RSS read once the child had exec'd. At or below it, the
	// child's own peak is unknown, only at most MaxRSSBytes (Summary says
	// so); above it, it is the child's.
	MaxRSSBytes     int64         `json:"max_rss_bytes"`
	RunnerPeakBytes int64         `json:"runner_peak_rss_bytes,omitempty"`
	Cgroup          *cgroup.Stats `json:"cgroup,omitempty"`
	// CgroupLimit is the limit of the cgroup the child ran in (0: none).
	CgroupLimit int64  `json:"cgroup_limit_bytes,omitempty"`
	Stdout      string `json:"stdout_file,omitempty"`
	Stderr      string `json:"stderr_file,omitempty"`
	StderrTail  string `json:"stderr_tail,omitempty"`
}

// OOMKilled reports whether the kernel's OOM killer ended the child: the
// cgroup counted an OOM kill. Where the cgroup's counter is readable it
// decides (v1 oom_control and v2 memory.events count kills by any OOM
// killer, the machine's included); only without one (no cgroup, or a v1
// kernel without the field) does a SIGKILL that Run did not send count as
// one. Before, any such SIGKILL did, so a child killed by a person or
// another tool was reported "OOM-killed" beside "OOM kills 0".
func (r *Result) OOMKilled() bool {
	if r.Cgroup != nil && r.Cgroup.OOMKills >= 0 {
		return r.Cgroup.OOMKills > 0
	}
	return r.Signal == syscall.SIGKILL.String() && !r.KilledByUs
}

// OK reports a zero exit.
func (r *Result) OK() bool { return r.ExitCode == 0 }

// ShellStatus is the exit status a shell would report: the exit code, or
// 128 plus the signal's number for a child killed by a signal.
func (r *Result) ShellStatus() int {
	if r.ExitCode >= 0 {
		return r.ExitCode
	}
	for sig := syscall.Signal(1); sig < 65; sig++ {
		if sig.String() == r.Signal {
			return 128 + int(sig)
		}
	}
	return 255
}

// Summary is one line for a person: the cgroup's limit, peak, limit hits
// and OOM kills (or "uncapped"), then the child's times, peak RSS, bytes
// read and exit.
func (r *Result) Summary() string {
	var b strings.Builder
	if r.Cgroup != nil {
		fmt.Fprintf(&b, "cgroup limit %s, peak %s, hit limit %s times, OOM kills %s; ",
			humanize.IBytes(uint64(r.CgroupLimit)), sizeOrUnknown(r.Cgroup.PeakBytes),
			countOrUnknown(r.Cgroup.LimitHits), countOrUnknown(r.Cgroup.OOMKills))
	} else {
		b.WriteString("uncapped; ")
	}
	rss := humanize.IBytes(uint64(max(r.MaxRSSBytes, 0)))
	if r.MaxRSSBytes > 0 && r.MaxRSSBytes <= r.RunnerPeakBytes {
		// Before, the runner's own peak was printed as the command's
		// (12 MiB for /bin/true).
		rss = "at most " + rss + " (the runner's own peak, which the count includes)"
	}
	fmt.Fprintf(&b, "wall %.1f s, user %.1f s, sys %.1f s, max RSS %s, read %s; ",
		r.WallSec, r.UserSec, r.SysSec, rss, sizeOrUnknown(r.ReadBytes))
	switch {
	case r.Signal != "" && r.KilledByUs:
		fmt.Fprintf(&b, "killed (%s) by the runner", r.Signal)
	case r.OOMKilled():
		fmt.Fprintf(&b, "OOM-killed (%s)", r.Signal)
	case r.Signal != "":
		fmt.Fprintf(&b, "killed by signal %s", r.Signal)
	default:
		fmt.Fprintf(&b, "exit %d", r.ExitCode)
	}
	return b.String()
}

func sizeOrUnknown(n int64) string {
	if n < 0 {
		return "?"
	}
	return humanize.IBytes(uint64(n))
}

func countOrUnknown(n int64) string {
	if n < 0 {
		return "?"
	}
	return strconv.FormatInt(n, 10)
}

// PollEvery is how often Run samples the child's read counter and calls
// Spec.Watch.
const PollEvery = 100 * time.Millisecond

// InterruptGrace is how long Run waits, once its context is cancelled,
// between asking the child to stop (SIGINT) and killing it (SIGKILL):
// long enough for train to write its interrupt checkpoint. Before, the
// child was killed at once and a bench's interrupted training lost it.
var InterruptGrace = 30 * time.Second

// Run starts spec, waits for it and collects its counters. A non-zero
// exit is not an error here; failing to start one is.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("%w %s: empty command line", ErrStart, spec.Name)
	}
	res := &Result{Argv: spec.Argv, ReadBytes: -1, Stdout: spec.StdoutPath, Stderr: spec.StderrPath}
	argv := spec.Argv
	if spec.Cgroup != nil {
		argv = spec.Cgroup.Argv(argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	for _, f := range []struct {
		path string
		w    *io.Writer
	}{{spec.StdoutPath, &cmd.Stdout}, {spec.StderrPath, &cmd.Stderr}} {
		if f.path == "" {
			continue
		}
		out, err := os.Create(f.path)
		if err != nil {
			return nil, err
		}
		defer out.Close()
		*f.w = out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrStart, spec.Name, err)
	}
	pid := cmd.Process.Pid
	// Start returns once the child has exec'd: the runner's peak now
	// bounds what the shared memory left in the child's ru_maxrss.
	res.RunnerPeakBytes = memstat.PeakRSS()
	exited := make(chan struct{})
	go func() { // owner: Run, which waits on exited before returning
		defer close(exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	var deadline <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	kill := func() {
		if !res.KilledByUs {
			res.KilledByUs = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	var last int64 = -1
	done := ctx.Done()
	var grace <-chan time.Time
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-done:
			// Interrupted: the child is asked to stop as the user would
			// ask it (train then writes its checkpoint and exits), and
			// killed only if it has not within InterruptGrace.
			_ = cmd.Process.Signal(syscall.SIGINT)
			t := time.NewTimer(InterruptGrace)
			defer t.Stop()
			grace = t.C
			done = nil
		case <-grace:
			kill()
		case <-deadline:
			kill()
		case <-tick.C:
			if c, err := iostat.Pid(pid); err == nil {
				last = c.ReadBytes
			}
			if spec.Watch != nil && spec.Watch() {
				kill()
			}
		}
	}
	// The child is a zombie now: its /proc entry still has the final I/O
	// counters of the whole thread group.
	if c, err := iostat.Pid(pid); err == nil {
		res.ReadBytes = c.ReadBytes
	} else {
		res.ReadBytes = last
	}
	werr := cmd.Wait()
	res.WallSec = time.Since(start).Seconds()
	if spec.Cgroup != nil {
		s := spec.Cgroup.Stats()
		res.Cgroup = &s
		res.CgroupLimit = spec.Cgroup.Limit
	}
	ps := cmd.ProcessState
	if ps == nil {
		return nil, fmt.Errorf("child: wait %s: %w", spec.Name, werr)
	}
	res.UserSec, res.SysSec = ps.UserTime().Seconds(), ps.SystemTime().Seconds()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		res.InblockBytes = ru.Inblock * 512
		res.MaxRSSBytes = ru.Maxrss * 1024
	}
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	if spec.StderrPath != "" {
		res.StderrTail = tailFile(spec.StderrPath, 2000)
	}
	return res, nil
}

// Capped runs spec inside a fresh memory cgroup of limit bytes made under
// loc (named after name), then frees the page cache charged to it, so
// that it does not move to the parent and warm the next run, and removes
// it. Failing to make the cgroup is an error wrapping cgroup.ErrNoCgroup;
// the child is not started then.
func Capped(ctx context.Context, loc cgroup.Location, name string, limit int64, spec Spec) (res *Result, err error) {
	cg, err := cgroup.Create(loc, name, limit)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = cg.ForceEmpty() // best effort; nothing on v2 (see ForceEmpty)
		err = errors.Join(err, cg.Remove())
	}()
	spec.Cgroup = cg
	return Run(ctx, spec)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
