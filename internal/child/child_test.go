package child

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/cgroup"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		argv    []string
		timeout time.Duration
		code    int
		shell   int
		signal  string
		killed  bool
	}{
		{"exit 0", []string{"/bin/sh", "-c", "echo out; echo err >&2"}, 0, 0, 0, "", false},
		{"exit 3", []string{"/bin/sh", "-c", "exit 3"}, 0, 3, 3, "", false},
		{"killed by itself", []string{"/bin/sh", "-c", "kill -TERM $$"}, 0, -1, 143, "terminated", false},
		{"timeout", []string{"/bin/sleep", "30"}, 200 * time.Millisecond, -1, 137, "killed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errp := filepath.Join(dir, tc.name+".out"), filepath.Join(dir, tc.name+".err")
			start := time.Now()
			r, err := Run(context.Background(), Spec{Name: tc.name, Argv: tc.argv, StdoutPath: out, StderrPath: errp, Timeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode != tc.code || r.Signal != tc.signal || r.KilledByUs != tc.killed || r.ShellStatus() != tc.shell {
				t.Fatalf("got exit %d signal %q killed %v status %d, want %d %q %v %d",
					r.ExitCode, r.Signal, r.KilledByUs, r.ShellStatus(), tc.code, tc.signal, tc.killed, tc.shell)
			}
			if r.OK() != (tc.code == 0) {
				t.Fatalf("OK() = %v with exit %d", r.OK(), r.ExitCode)
			}
			if r.OOMKilled() {
				t.Fatal("OOMKilled without a cgroup or a foreign SIGKILL")
			}
			if r.WallSec <= 0 || r.WallSec > time.Since(start).Seconds() {
				t.Fatalf("wall %v s", r.WallSec)
			}
			if r.ReadBytes < 0 || r.MaxRSSBytes <= 0 {
				t.Fatalf("read %d B, max RSS %d B: counters not collected", r.ReadBytes, r.MaxRSSBytes)
			}
			if tc.name == "exit 0" {
				b, _ := os.ReadFile(out)
				if string(b) != "out\n" || r.StderrTail != "err" {
					t.Fatalf("stdout %q, stderr tail %q", b, r.StderrTail)
				}
			}
		})
	}
}

func TestRunWriters(t *testing.T) {
	var out, errb bytes.Buffer
	r, err := Run(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", "cat; echo e >&2"},
		Stdin: strings.NewReader("in\n"), Stdout: &out, Stderr: &errb})
	if err != nil || !r.OK() {
		t.Fatalf("%v %+v", err, r)
	}
	if out.String() != "in\n" || errb.String() != "e\n" || r.StderrTail != "" {
		t.Fatalf("stdout %q stderr %q tail %q", out.String(), errb.String(), r.StderrTail)
	}
}

func TestRunWatchAndContext(t *testing.T) {
	polls := 0
	r, err := Run(context.Background(), Spec{Argv: []string{"/bin/sleep", "30"}, Watch: func() bool { polls++; return polls == 3 }})
	if err != nil || !r.KilledByUs || r.OOMKilled() || polls != 3 {
		t.Fatalf("watch: %v %+v polls %d", err, r, polls)
	}
	// A cancelled context asks the child to stop (SIGINT), as Ctrl-C
	// would: one that stops on it exits its own way...
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	r, err = Run(ctx, Spec{Argv: []string{"/bin/sleep", "30"}})
	if err != nil || r.KilledByUs || r.Signal != "interrupt" {
		t.Fatalf("context: %v %+v", err, r)
	}
	// ...one that handles it finishes what it does (train's checkpoint)...
	ctx2, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	var out strings.Builder
	r, err = Run(ctx2, Spec{Argv: []string{"/bin/sh", "-c", `trap 'echo stopped; exit 3' INT; while :; do sleep 0.05; done`}, Stdout: &out})
	if err != nil || r.KilledByUs || r.ExitCode != 3 || out.String() != "stopped\n" {
		t.Fatalf("handled interrupt: %v %+v, output %q", err, r, out.String())
	}
	// ...and one that ignores it is killed after InterruptGrace.
	defer func(g time.Duration) { InterruptGrace = g }(InterruptGrace)
	InterruptGrace = 200 * time.Millisecond
	ctx3, cancel3 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel3()
	r, err = Run(ctx3, Spec{Argv: []string{"/bin/sh", "-c", `trap '' INT; while :; do sleep 0.05; done`}})
	if err != nil || !r.KilledByUs || r.Signal != "killed" {
		t.Fatalf("ignored interrupt: %v %+v", err, r)
	}
}

func TestRunStartErrors(t *testing.T) {
	if _, err := Run(context.Background(), Spec{Name: "none"}); !errors.Is(err, ErrStart) {
		t.Fatalf("empty argv: %v", err)
	}
	if _, err := Run(context.Background(), Spec{Name: "missing", Argv: []string{"/nonexistent/prog"}}); !errors.Is(err, ErrStart) {
		t.Fatalf("missing program: %v", err)
	}
	if _, err := Run(context.Background(), Spec{Argv: []string{"/bin/true"}, StdoutPath: "/nonexistent/dir/out"}); err == nil {
		t.Fatal("unwritable stdout path accepted")
	}
}

// TestCapped runs a child that touches more anonymous memory than its
// cgroup allows: the kernel must OOM-kill it and the result must say so.
// It needs root and a memory controller; elsewhere it skips.
func TestCapped(t *testing.T) {
	loc, err := cgroup.Locate("/sys/fs/cgroup", "/proc/self/cgroup")
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	// 64 MiB of zeros held in a shell variable: over a 16 MiB limit.
	hog := []string{"/bin/sh", "-c", `x=$(head -c 67108864 /dev/zero | tr '\0' a); echo ${#x}`}
	r, err := Capped(context.Background(), loc, "test-hog", 16<<20, Spec{Argv: hog})
	if errors.Is(err, cgroup.ErrNoCgroup) {
		t.Skipf("cannot create a cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Cgroup == nil || r.CgroupLimit != 16<<20 {
		t.Fatalf("no cgroup counters: %+v", r)
	}
	if !r.OOMKilled() && r.OK() {
		t.Fatalf("a 64 MiB child under 16 MiB was neither OOM-killed nor failed: %+v %+v", r, *r.Cgroup)
	}
	if r.Cgroup.PeakBytes > 16<<20 || r.Cgroup.LimitHits == 0 {
		t.Fatalf("peak %d B, limit hits %d under a 16 MiB limit", r.Cgroup.PeakBytes, r.Cgroup.LimitHits)
	}
	r, err = Capped(context.Background(), loc, "test-small", 64<<20, Spec{Argv: []string{"/bin/true"}})
	if err != nil || !r.OK() || r.OOMKilled() {
		t.Fatalf("a small child under 64 MiB: %v %+v", err, r)
	}
	ents, _ := os.ReadDir(loc.Dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), cgroup.Prefix) && strings.Contains(e.Name(), "-test-") {
			t.Fatalf("cgroup %s left behind", e.Name())
		}
	}
}

// TestOOMKilled: a readable OOM-kill counter decides; a foreign SIGKILL
// counts as an OOM kill only where there is none (sweep 26, P4: `bench
// capped -- sh -c 'kill -9 $$'` said "OOM kills 0; ... OOM-killed").
func TestOOMKilled(t *testing.T) {
	kill := syscall.SIGKILL.String()
	for _, c := range []struct {
		name string
		r    Result
		want bool
	}{
		{"counted", Result{Signal: kill, Cgroup: &cgroup.Stats{OOMKills: 1}}, true},
		{"counted, exit status", Result{ExitCode: 1, Cgroup: &cgroup.Stats{OOMKills: 1}}, true},
		{"foreign SIGKILL, counter 0", Result{ExitCode: -1, Signal: kill, Cgroup: &cgroup.Stats{OOMKills: 0}}, false},
		{"foreign SIGKILL, no counter", Result{ExitCode: -1, Signal: kill, Cgroup: &cgroup.Stats{OOMKills: -1}}, true},
		{"foreign SIGKILL, uncapped", Result{ExitCode: -1, Signal: kill}, true},
		{"our SIGKILL, no counter", Result{ExitCode: -1, Signal: kill, KilledByUs: true, Cgroup: &cgroup.Stats{OOMKills: -1}}, false},
		{"SIGTERM, uncapped", Result{ExitCode: -1, Signal: syscall.SIGTERM.String()}, false},
		{"exit 0", Result{Cgroup: &cgroup.Stats{}}, false},
	} {
		if got := c.r.OOMKilled(); got != c.want {
			t.Errorf("%s: OOMKilled() = %v, want %v", c.name, got, c.want)
		}
		if sum := c.r.Summary(); strings.Contains(sum, "OOM-killed") != c.want {
			t.Errorf("%s: summary %q", c.name, sum)
		}
	}
}

// TestMaxRSSRunnerFloor: a child's ru_maxrss includes the runner's own
// peak (Go starts it sharing the runner's memory until exec), so a small
// command's count is the runner's; Summary says "at most" instead of
// printing it as the command's (sweep 26, P5: /bin/true "max RSS 12 MiB"
// where /usr/bin/time measures 908 KiB).
func TestMaxRSSRunnerFloor(t *testing.T) {
	r, err := Run(context.Background(), Spec{Argv: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.RunnerPeakBytes <= 0 || r.MaxRSSBytes > r.RunnerPeakBytes {
		t.Fatalf("/bin/true: max RSS %d, runner's peak %d", r.MaxRSSBytes, r.RunnerPeakBytes)
	}
	if s := r.Summary(); !strings.Contains(s, "max RSS at most") {
		t.Errorf("summary %q does not say the count is a bound", s)
	}
	big := Result{MaxRSSBytes: 64 << 20, RunnerPeakBytes: 12 << 20}
	if s := big.Summary(); !strings.Contains(s, "max RSS 64 MiB,") {
		t.Errorf("a child above the runner's peak: summary %q", s)
	}
}
