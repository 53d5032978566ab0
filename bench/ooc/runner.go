package ooc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/iostat"
)

// childSpec is one child process.
type childSpec struct {
	name   string
	argv   []string       // argv[0] is the program
	cgroup *cgroup.Cgroup // nil: uncapped
	stdout string         // file paths for the child's output
	stderr string
	// watch, when set, is polled every pollEvery while the child runs;
	// returning true sends SIGKILL.
	watch   func() bool
	timeout time.Duration
}

// ChildResult is what a child did, from outside.
type ChildResult struct {
	Argv     []string `json:"argv"`
	ExitCode int      `json:"exit_code"` // -1 when killed by a signal
	Signal   string   `json:"signal,omitempty"`
	// KilledByUs: the harness sent SIGKILL (timeout or a robustness check).
	KilledByUs bool    `json:"killed_by_harness,omitempty"`
	WallSec    float64 `json:"wall_s"`
	// ReadBytes is read_bytes of /proc/<pid>/io read after the child
	// exited but before it was reaped (waitid WNOWAIT): the bytes the
	// whole process caused to be fetched from the block layer, mmap
	// faults and readahead included. -1 when unavailable.
	ReadBytes int64 `json:"read_bytes"`
	// InblockBytes is the rusage block-input count × 512, a cross-check.
	InblockBytes int64         `json:"inblock_bytes"`
	MaxRSSBytes  int64         `json:"max_rss_bytes"`
	Cgroup       *cgroup.Stats `json:"cgroup,omitempty"`
	Stdout       string        `json:"stdout_file"`
	Stderr       string        `json:"stderr_file"`
	StderrTail   string        `json:"stderr_tail,omitempty"`
}

// OOMKilled reports whether the kernel's OOM killer ended the child: the
// cgroup counted an OOM kill, or the child died of SIGKILL we did not send.
func (r *ChildResult) OOMKilled() bool {
	if r.Cgroup != nil && r.Cgroup.OOMKills > 0 {
		return true
	}
	return r.Signal == syscall.SIGKILL.String() && !r.KilledByUs
}

// OK reports a zero exit.
func (r *ChildResult) OK() bool { return r.ExitCode == 0 }

const pollEvery = 100 * time.Millisecond

// runChild starts spec, waits for it and collects its counters. A non-zero
// exit is not an error here; failing to start one is.
func runChild(ctx context.Context, spec childSpec) (*ChildResult, error) {
	res := &ChildResult{Argv: spec.argv, ReadBytes: -1, Stdout: spec.stdout, Stderr: spec.stderr}
	argv := spec.argv
	if spec.cgroup != nil {
		argv = spec.cgroup.Argv(argv)
	}
	outF, err := os.Create(spec.stdout)
	if err != nil {
		return nil, err
	}
	defer outF.Close()
	errF, err := os.Create(spec.stderr)
	if err != nil {
		return nil, err
	}
	defer errF.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = outF, errF
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ooc: start %s: %w", spec.name, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { // owner: runChild, which waits on exited before returning
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
	if spec.timeout > 0 {
		t := time.NewTimer(spec.timeout)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	kill := func() {
		if !res.KilledByUs {
			res.KilledByUs = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	var last int64 = -1
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-ctx.Done():
			kill()
		case <-deadline:
			kill()
		case <-tick.C:
			if c, err := iostat.Pid(pid); err == nil {
				last = c.ReadBytes
			}
			if spec.watch != nil && spec.watch() {
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
	if spec.cgroup != nil {
		s := spec.cgroup.Stats()
		res.Cgroup = &s
	}
	ps := cmd.ProcessState
	if ps == nil {
		return nil, fmt.Errorf("ooc: wait %s: %w", spec.name, werr)
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		res.InblockBytes = ru.Inblock * 512
		res.MaxRSSBytes = ru.Maxrss * 1024
	}
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	res.StderrTail = tailFile(spec.stderr, 2000)
	return res, nil
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
