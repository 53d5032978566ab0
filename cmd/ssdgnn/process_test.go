package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/extsort"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// ssdgnnBinary builds the ssdgnn command once per test run.
func ssdgnnBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ssdgnn-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "ssdgnn")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		out, err := exec.Command(gobin, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// SIGINT stops a real gen within a second or so: it exits non-zero, says
// it was interrupted, and leaves nothing that looks like a dataset and no
// temp files.
func TestGenSIGINT(t *testing.T) {
	bin := ssdgnnBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			cmd := exec.Command(bin, "gen", dir, "--nodes", "3000000", "--feat-dim", "64", "--quiet")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until it writes, so the signal lands mid-run.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if ents, _ := os.ReadDir(dir); len(ents) > 1 {
					break
				}
			}
			sent := time.Now()
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			took := time.Since(sent)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("gen after %v: %v, want a non-zero exit; stderr %q", sig, err, stderr.String())
			}
			if took > 3*time.Second { // measured 0.1-0.2s; loose for a loaded machine
				t.Errorf("gen took %v to exit after %v", took, sig)
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr %q does not say interrupted", stderr.String())
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() == "dataset.json" || strings.Contains(e.Name(), ".tmp") || e.IsDir() {
					t.Errorf("left behind after %v: %s", sig, e.Name())
				}
			}
		})
	}
}

// Two real gen processes on one directory: exactly one succeeds, the other
// exits 1 at once naming the holder's pid, and the result validates.
func TestTwoGenProcesses(t *testing.T) {
	bin := ssdgnnBinary(t)
	dir := filepath.Join(t.TempDir(), "g")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := make([]bytes.Buffer, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "gen", dir, "--nodes", "60000", "--seed", string(rune('1'+i)), "--quiet")
			cmd.Stderr = &outs[i]
			errs[i] = cmd.Run()
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
		} else if e := outs[i].String(); !strings.Contains(e, dir+" is in use by pid ") && !strings.Contains(e, "--force") {
			// (If the first finished before the second started, the
			// second refuses to overwrite without --force.)
			t.Errorf("loser's stderr %q, want %q", e, dir+" is in use by pid N")
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 2 gens succeeded; stderr %q, %q", ok, outs[0].String(), outs[1].String())
	}
	if out, err := exec.Command(bin, "validate", dir, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
}

// gen's --mem bounds the whole process: a generation whose edges do not
// fit spills within it, and the peak RSS the child reports stays below
// --mem, with the workers cut to fit (before, --mem was the sort buffer
// alone and a 48 MiB gen peaked near 91 MiB).
func TestGenWithinMem(t *testing.T) {
	bin := ssdgnnBinary(t)
	dir := filepath.Join(t.TempDir(), "g")
	const mem = 48 << 20
	out, err := exec.Command(bin, "gen", dir, "--nodes", "300000", "--mem", "48MiB", "--workers", "4", "--json", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	var r genReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.SortRuns == 0 {
		t.Errorf("the sort did not spill (buffer %d bytes): the test does not test the bound", r.SortBytes)
	}
	if r.Workers != 1 || r.SortBytes != mem-(synth.MinMemBytes-extsort.MinMemBytes) {
		t.Errorf("--mem 48MiB: %d workers, sort buffer %d bytes; want 1 worker and the rest of the budget", r.Workers, r.SortBytes)
	}
	if r.PeakRSS == 0 {
		t.Skip("the OS reports no peak RSS")
	}
	if r.PeakRSS > mem {
		t.Errorf("peak RSS %.1f MiB, beyond --mem 48MiB", float64(r.PeakRSS)/(1<<20))
	}
}
