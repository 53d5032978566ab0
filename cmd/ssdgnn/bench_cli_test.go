package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchOOCFlags checks the thin wrapper's flag handling; the harness
// itself is tested end to end in bench/ooc.
func TestBenchOOCFlags(t *testing.T) {
	tmp := t.TempDir()
	common := []string{"bench", "ooc", "--bin", "/nonexistent/ssdgnn", "--dir", filepath.Join(tmp, "d"), "--out", filepath.Join(tmp, "o")}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown config", []string{"--configs", "ssdgnn,pyg"}, "unknown configuration"},
		// Flags named as typed (before: "cache budget 1073741824 must be
		// below the memory limit 268435456", "CacheFrac 0 must be in
		// [0,1) and NeighborFrac 1.5 in (0,1)").
		{"cache budget over limit", []string{"--mem-limit", "256MiB", "--cache-budget", "1GiB"}, "--cache-budget 1 GiB must be below --mem-limit 256 MiB"},
		{"neighbour share", []string{"--dual-neighbor-frac", "1.5"}, "--dual-neighbor-frac 1.5, want a share in (0,1)"},
		// --out inside --dir (or its -pm copy) would write logs, plans and
		// checkpoints among the dataset's files; before, it ran.
		{"out is the dataset", []string{"--out", filepath.Join(tmp, "d")}, "is, or lies inside, the dataset directory --dir"},
		{"out inside the dataset", []string{"--out", filepath.Join(tmp, "d", "r")}, "--out " + filepath.Join(tmp, "d", "r") + " is, or lies inside"},
		{"out inside the pm copy", []string{"--out", filepath.Join(tmp, "d-pm", "r")}, "partition-major copy"},
		{"bad size", []string{"--data-size", "lots"}, "size"},
		{"tiny data", []string{"--data-size", "1KiB"}, "at least 1000"},
		{"missing binary", []string{"--uncapped", "--data-size", "2MiB", "--mem-limit", "64MiB"}, "/nonexistent/ssdgnn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, append(append([]string{}, common...), tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	out, _, err := run(t, "bench", "ooc", "--help")
	if err != nil || !strings.Contains(out, "--mem-limit") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}
