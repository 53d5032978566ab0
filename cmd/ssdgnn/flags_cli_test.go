package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An explicit 0 where 0 only stood for the default, and absurd sizes, are
// errors that name the flag (issue #18, group 4).
func TestRejectedFlagValues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "300", "--feat-dim", "4", "--classes", "2"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gen", out, "--mem", "8EiB"}, `invalid argument "8EiB" for "--mem" flag: size "8EiB" is 8.0 EiB, beyond the largest accepted (1.0 EiB)`},
		{[]string{"gen", out, "--mem", "99999999999999999999999"}, `for "--mem" flag`},
		{[]string{"gen", out, "--mem", "0"}, "--mem 0: want a positive value"},
		{[]string{"gen", out, "--feat-dim", "0"}, "--feat-dim 0: want a positive value (omit the flag for the default, 128)"},
		{[]string{"gen", out, "--avg-degree", "0"}, "--avg-degree 0"},
		{[]string{"gen", out, "--classes", "0"}, "--classes 0"},
		{[]string{"import", "edgelist", "e.txt", out, "--num-nodes", "0"}, "--num-nodes 0"},
		{[]string{"import", "edgelist", "e.txt", out, "--mem", "0"}, "--mem 0"},
		{[]string{"partition", dir, "--parts", "0"}, "--parts 0: want a positive value (omit the flag for the default, 10000)"},
		{[]string{"partition", dir, "--parts", "-3"}, "--parts -3"},
		{[]string{"validate", dir, "--max-problems", "0"}, "--max-problems 0"},
		{[]string{"profile", dir, "--batch-size", "0"}, "--batch-size 0"},
		{[]string{"rr", dir, "--epochs", "0"}, "--epochs 0"},
		{[]string{"plan", dir, "--mem", "1GiB", "--hidden", "0"}, "--hidden 0"},
		{[]string{"train", dir, "--mem", "8EiB"}, `for "--mem" flag`},
		{[]string{"train", dir, "--source", "ring"}, `source "ring": want mmap, pread, direct or batch`},
		{[]string{"rr", dir, "--source", "ring"}, `source "ring"`},
		{[]string{"profile", dir, "--source", "ring"}, `source "ring"`},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rejected commands left %s: %v", out, err)
	}
}

// TestResumeCommand: the interrupt hint repeats the command's flags with
// --resume in place of any earlier one, quoting what a shell would split.
func TestResumeCommand(t *testing.T) {
	defer func(a []string) { os.Args = a }(os.Args)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bin/ssdgnn", "train", "d", "--mem", "1GiB"}, "ssdgnn train d --mem 1GiB --resume ck/x.ssdc"},
		{[]string{"ssdgnn", "train", "d", "--resume", "old", "--epochs", "5"}, "ssdgnn train d --epochs 5 --resume ck/x.ssdc"},
		{[]string{"ssdgnn", "train", "my data", "--resume=old"}, "ssdgnn train 'my data' --resume ck/x.ssdc"},
	} {
		os.Args = c.args
		if got := resumeCommand("ck/x.ssdc"); got != c.want {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}
