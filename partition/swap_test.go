package partition

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

// swapDataset writes a small dataset with partitioning "p" made with seed
// 1 (the old one); replacing it uses seed 2 (the new one).
func swapDataset(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	g, _ := planted(300, 4, 6, 0.8, 0.3, 3)
	g.write(t, dir).Close()
	d := openDataset(t, dir)
	defer d.Close()
	if _, err := Run(d, &Options{Parts: 8, Name: "p", Seed: 1, Method: FennelExact}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func forceNew(dir string) error {
	d, err := storage.Open(dir, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = Run(d, &Options{Parts: 8, Name: "p", Seed: 2, Method: FennelExact, Force: true})
	return err
}

// otherRun partitions under another name: like every run, it first
// resolves interrupted replacements.
func otherRun(t *testing.T, dir string) {
	t.Helper()
	d := openDataset(t, dir)
	defer d.Close()
	if _, err := Run(d, &Options{Parts: 4, Name: "q", Method: Random, Force: true}); err != nil {
		t.Fatal(err)
	}
}

// seedOf opens partitioning "p" as a reader does and returns its seed.
func seedOf(t *testing.T, dir string) int64 {
	t.Helper()
	p, err := Open(dir, "p")
	if err != nil {
		t.Fatalf("Open: %v (left: %v)", err, Leftovers(dir))
	}
	defer p.Close()
	return p.Stats().Seed
}

// checkOne checks that exactly one complete partitioning "p" exists, made
// with seed want, for readers (Open, Exists, Names) and after a partition
// run of another name, which leaves no leftover.
func checkOne(t *testing.T, dir string, want int64) {
	t.Helper()
	if got := seedOf(t, dir); got != want {
		t.Fatalf("reader sees seed %d, want %d", got, want)
	}
	if !Exists(dir, "p") {
		t.Fatal(`Exists("p") = false`)
	}
	if names, err := Names(dir); err != nil || !slices.Contains(names, "p") {
		t.Fatalf("Names = %v, %v", names, err)
	}
	otherRun(t, dir)
	if l := Leftovers(dir); len(l) != 0 {
		t.Fatalf("after a run of another name, leftovers %v", l)
	}
	if got := seedOf(t, dir); got != want {
		t.Fatalf("after a run of another name: seed %d, want %d", got, want)
	}
	if !hasManifest(Dir(dir, "p")) {
		t.Fatal("p was not moved back to its name")
	}
}

// TestSwapRenameFails fails each rename of the swap (and with it every
// later one, so the undo fails too): the error leaves the old
// partitioning, which readers find and the next run restores.
func TestSwapRenameFails(t *testing.T) {
	for _, tc := range []struct {
		fail    int  // the rename that fails, from 1
		sticky  bool // every later rename fails too
		wantErr bool
	}{
		{1, false, true}, {2, false, true}, {1, true, true}, {2, true, true}, {3, false, false},
	} {
		t.Run(fmt.Sprintf("rename%d-sticky%v", tc.fail, tc.sticky), func(t *testing.T) {
			dir := swapDataset(t)
			calls := 0
			renameDir = func(a, b string) error {
				calls++
				if calls == tc.fail || (tc.sticky && calls > tc.fail) {
					return &os.LinkError{Op: "rename", Old: a, New: b, Err: syscall.EIO}
				}
				return os.Rename(a, b)
			}
			err := forceNew(dir)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Run: %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, syscall.EIO) {
				t.Fatalf("Run: %v, want EIO", err)
			}
			if tc.sticky && tc.fail == 2 {
				// The undo failed: the old copy is stranded at .p.old,
				// and a reader reads it there while renames still fail.
				if got := seedOf(t, dir); got != 1 {
					t.Fatalf("stranded: reader sees seed %d, want 1", got)
				}
			}
			renameDir = os.Rename
			want := int64(1)
			if !tc.wantErr {
				want = 2 // three renames needed only for a successful swap: the third never runs
			}
			checkOne(t, dir, want)
		})
	}
	renameDir = os.Rename
}

const killEnv = "SSDGNN_PARTITION_SWAP_KILL" // "DIR when N": exit at rename N

// TestSwapKillChild is the child of TestSwapKilled: it replaces "p" in
// DIR and exits with status 137, as if killed, at rename N of the swap
// ("before") or just after it ("after").
func TestSwapKillChild(t *testing.T) {
	spec := os.Getenv(killEnv)
	if spec == "" {
		t.Skip("run by TestSwapKilled")
	}
	f := strings.Fields(spec)
	dir, when := f[0], f[1]
	n, _ := strconv.Atoi(f[2])
	calls := 0
	renameDir = func(a, b string) error {
		calls++
		if calls == n && when == "before" {
			os.Exit(137)
		}
		err := os.Rename(a, b)
		if calls == n {
			os.Exit(137)
		}
		return err
	}
	if f[3] == "recover" {
		otherRun(t, dir)
	} else if err := forceNew(dir); err != nil {
		t.Fatal(err)
	}
	os.Exit(0)
}

// TestSwapKilled kills a --force replacement before and after each of its
// renames, and a recovery before and after its rename: afterwards exactly
// one complete partitioning "p" exists, the old one before the commit
// point (the second rename) and the new one after it.
func TestSwapKilled(t *testing.T) {
	child := func(dir, when string, n int, what string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSwapKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %s", killEnv, dir, when, n, what))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 137 {
			t.Fatalf("child: %v, want exit 137\n%s", err, out)
		}
	}
	for _, tc := range []struct {
		when string
		n    int
		want int64
	}{
		{"before", 1, 1}, {"after", 1, 1}, {"before", 2, 1}, {"after", 2, 2},
	} {
		t.Run(fmt.Sprintf("%s%d", tc.when, tc.n), func(t *testing.T) {
			dir := swapDataset(t)
			child(dir, tc.when, tc.n, "force")
			checkOne(t, dir, tc.want)
		})
	}
	// Stranded between the renames, then the recovery is killed at its
	// own rename, before or after it.
	for _, when := range []string{"before", "after"} {
		t.Run("recovery-"+when, func(t *testing.T) {
			dir := swapDataset(t)
			child(dir, "after", 1, "force")
			if l := Leftovers(dir); !slices.Equal(l, []string{".p.new", ".p.old"}) {
				t.Fatalf("leftovers %v, want [.p.new .p.old]", l)
			}
			child(dir, when, 1, "recover")
			checkOne(t, dir, 1)
		})
	}
}

// TestRecoverSwapsStates runs recoverSwaps on each state a swap can leave.
func TestRecoverSwapsStates(t *testing.T) {
	mk := func(t *testing.T, parts string, dirs map[string]bool) {
		for name, complete := range dirs {
			p := filepath.Join(parts, name)
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if complete {
				if err := os.WriteFile(filepath.Join(p, ManifestName), []byte(name), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		in   map[string]bool // directory -> holds a manifest
		want string          // "x"'s manifest afterwards ("" none)
	}{
		{"staged", map[string]bool{"x": true, ".x.new": true}, "x"},
		{"staging", map[string]bool{"x": true, ".x.new": false}, "x"},
		{"between", map[string]bool{".x.old": true, ".x.new": true}, ".x.old"},
		{"between-partial-x", map[string]bool{"x": false, ".x.old": true}, ".x.old"},
		{"committed", map[string]bool{"x": true, ".x.old": true}, "x"},
		{"removing-old", map[string]bool{"x": true, ".x.old": false}, "x"},
		{"not-ours", map[string]bool{".x": true, "..new": true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := t.TempDir()
			mk(t, parts, tc.in)
			if err := recoverSwaps(parts); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(parts)
			for _, e := range ents {
				if _, _, ok := swapName(e.Name()); ok {
					t.Errorf("left %s", e.Name())
				}
			}
			b, _ := os.ReadFile(filepath.Join(parts, "x", ManifestName))
			if string(b) != tc.want {
				t.Errorf("x holds %q, want %q", b, tc.want)
			}
			if tc.name == "not-ours" {
				for name := range tc.in {
					if _, err := os.Stat(filepath.Join(parts, name)); err != nil {
						t.Errorf("%s removed: %v", name, err)
					}
				}
			}
		})
	}
}
