package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProcCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		v          Version
		path       string
		ok         bool
	}{
		{"v1", "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n", 1, "/process_api/abc", true},
		{"v1 joined", "5:cpu,memory:/user.slice\n1:name=systemd:/user.slice\n", 1, "/user.slice", true},
		{"v1 root", "4:memory:/\n", 1, "/", true},
		{"v2", "0::/user.slice/user-0.slice/session-1.scope\n", 2, "/user.slice/user-0.slice/session-1.scope", true},
		{"v2 root", "0::/\n", 2, "/", true},
		{"hybrid v1 wins", "0::/init.scope\n7:memory:/docker/x\n", 1, "/docker/x", true},
		{"path with colon", "4:memory:/a:b\n", 1, "/a:b", true},
		{"none", "3:cpu:/\n2:pids:/\n", 0, "", false},
		{"empty", "", 0, "", false},
		{"garbage", "not a cgroup file\n::\n", 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, p, ok := ParseProcCgroup(tc.text)
			if v != tc.v || p != tc.path || ok != tc.ok {
				t.Fatalf("got (%d, %q, %v), want (%d, %q, %v)", v, p, ok, tc.v, tc.path, tc.ok)
			}
		})
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add("4:memory:/a\n0::/b\n")
	f.Add("0::/x\n")
	f.Fuzz(func(t *testing.T, s string) {
		v, p, ok := ParseProcCgroup(s)
		if ok != (v == 1 || v == 2) || (!ok && p != "") {
			t.Fatalf("inconsistent (%d, %q, %v)", v, p, ok)
		}
	})
}

func TestParseKey(t *testing.T) {
	events := "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n"
	oomControl := "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	for _, tc := range []struct {
		text, key string
		want      int64
	}{
		{events, "max", 12}, {events, "oom_kill", 1}, {events, "oom", 1}, {oomControl, "oom_kill", 3},
		{oomControl, "missing", -1}, {"oom_kill x\n", "oom_kill", -1},
	} {
		if got := parseKey(tc.text, tc.key); got != tc.want {
			t.Errorf("parseKey(%q, %q) = %d, want %d", tc.text, tc.key, got, tc.want)
		}
	}
}

// TestLocateFake builds fake v1 and v2 hierarchies.
func TestLocateFake(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory/process_api/abc/memory.limit_in_bytes", "9223372036854771712\n")
	write("proc-v1", "4:memory:/process_api/abc\n0::/\n")
	write("proc-v2", "0::/svc\n")
	write("proc-none", "3:cpu:/\n")
	loc, err := Locate(root, filepath.Join(root, "proc-v1"))
	if err != nil || loc.Version != 1 || loc.Dir != filepath.Join(root, "memory/process_api/abc") {
		t.Fatalf("v1: %+v %v", loc, err)
	}
	if _, err := Locate(root, filepath.Join(root, "proc-v2")); err == nil {
		t.Fatal("v2 without files: want an error")
	}
	write("cgroup.controllers", "cpu io memory pids\n")
	write("svc/cgroup.controllers", "cpu memory\n")
	loc, err = Locate(root, filepath.Join(root, "proc-v2"))
	if err != nil || loc.Version != 2 || loc.Dir != filepath.Join(root, "svc") {
		t.Fatalf("v2: %+v %v", loc, err)
	}
	if _, err := Locate(root, filepath.Join(root, "proc-none")); err == nil {
		t.Fatal("no controller: want an error")
	}
	if _, err := Locate(root, filepath.Join(root, "missing")); err == nil {
		t.Fatal("missing file: want an error")
	}
}

func TestCleanStaleFake(t *testing.T) {
	dir := t.TempDir()
	// pid 1 runs (init); a huge pid does not.
	for _, n := range []string{Prefix + "1-live", Prefix + "999999999-dead", "other"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := CleanStale(Location{Version: 1, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || filepath.Base(removed[0]) != Prefix+"999999999-dead" {
		t.Fatalf("removed %v", removed)
	}
	for _, n := range []string{Prefix + "1-live", "other"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestForceEmptyWritesNoReclaim: v1 writes memory.force_empty; v2 leaves
// memory.reclaim alone (an unbounded reclaim hung for minutes on a GPU
// machine's kernel), so that neither bench capped nor CleanStale can block
// in it.
func TestForceEmptyWritesNoReclaim(t *testing.T) {
	for _, tc := range []struct {
		v     Version
		file  string
		wrote string
	}{{1, "memory.force_empty", "0"}, {2, "memory.reclaim", ""}} {
		dir := t.TempDir()
		path := filepath.Join(dir, tc.file)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := (&Cgroup{Version: tc.v, Dir: dir}).ForceEmpty(); err != nil {
			t.Fatalf("v%d: %v", tc.v, err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != tc.wrote {
			t.Errorf("v%d: %s holds %q (%v), want %q", tc.v, tc.file, b, err, tc.wrote)
		}
	}
}

// TestLesserRoom: the room is the lesser of a limit and the available
// memory, the limit alone when availability is unknown, and 0 when
// neither is known.
func TestLesserRoom(t *testing.T) {
	for _, tc := range []struct {
		limit     int64
		ok        bool
		avail     int64
		room      int64
		fromLimit bool
	}{
		{1 << 30, true, 22 << 30, 1 << 30, true},
		{64 << 30, true, 22 << 30, 22 << 30, false},
		{1 << 30, true, 0, 1 << 30, true},
		{0, false, 22 << 30, 22 << 30, false},
		{0, false, 0, 0, false},
		{0, false, -1, 0, false},
	} {
		if room, from := lesserRoom(tc.limit, tc.ok, tc.avail); room != tc.room || from != tc.fromLimit {
			t.Errorf("lesserRoom(%d, %v, %d) = %d, %v; want %d, %v", tc.limit, tc.ok, tc.avail, room, from, tc.room, tc.fromLimit)
		}
	}
}

// TestCreateFallsBackToRoot: on v2, when our own cgroup cannot enable the
// memory controller for children (it holds processes: here its
// cgroup.subtree_control cannot be written), Create makes the child under
// the root; without a distinct root it fails with ErrNoCgroup. CleanStale
// looks under the root too.
func TestCreateFallsBackToRoot(t *testing.T) {
	root := t.TempDir()
	job := filepath.Join(root, "job")
	// A directory where the control file should be: writing it fails.
	if err := os.MkdirAll(filepath.Join(job, "cgroup.subtree_control"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(root, fmt.Sprintf("%s%d-x", Prefix, os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil { // the kernel makes the control files
		t.Fatal(err)
	}
	for _, f := range []string{"memory.max", "memory.swap.max"} {
		if err := os.WriteFile(filepath.Join(child, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cg, err := Create(Location{Version: 2, Dir: job, Root: root}, "x", 123)
	if err != nil {
		t.Fatal(err)
	}
	if cg.Dir != child {
		t.Fatalf("made %s, want %s under the root", cg.Dir, child)
	}
	if b, _ := os.ReadFile(filepath.Join(child, "memory.max")); string(b) != "123" {
		t.Errorf("memory.max %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control")); !strings.Contains(string(b), "+memory") {
		t.Errorf("root's subtree_control %q: memory not enabled", b)
	}
	if _, err := Create(Location{Version: 2, Dir: job, Root: job}, "y", 123); !errors.Is(err, ErrNoCgroup) {
		t.Errorf("no distinct root: %v, want ErrNoCgroup", err)
	}
	if err := os.RemoveAll(child); err != nil { // ours, and done with
		t.Fatal(err)
	}
	dead := filepath.Join(root, Prefix+"999999999-dead")
	if err := os.Mkdir(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := CleanStale(Location{Version: 2, Dir: job, Root: root})
	if err != nil || len(removed) != 1 || removed[0] != dead {
		t.Errorf("CleanStale removed %v (%v), want %s", removed, err, dead)
	}
}
