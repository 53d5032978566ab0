// Package cgroup finds the memory cgroup this process runs in, reads its
// limit, and creates child cgroups with a limit of their own (v1 memory
// controller or v2). It is what gives --mem its default (the limit the
// kernel will enforce) and what bench/ooc caps its children with.
//
// Creating, emptying and removing cgroups needs root and a writable
// controller; every failure of that kind wraps ErrNoCgroup.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/internal/memstat"
)

// Version is 1 or 2.
type Version int

// ErrNoCgroup reports that no usable memory cgroup controller is there (not
// root, no memory controller, a v2 parent that cannot delegate it).
var ErrNoCgroup = errors.New("cgroup: no usable memory cgroup")

// Location is where our own memory cgroup lives.
type Location struct {
	Version Version
	// Path is the cgroup path as /proc/self/cgroup names it ("/" or
	// "/a/b"); Dir is the directory under the mount.
	Path string
	Dir  string
	// Root is the hierarchy's root cgroup directory (v1: the memory
	// controller's mount; v2: the unified mount), where Create falls back
	// to on v2.
	Root string
}

// ParseProcCgroup finds the memory controller in the text of
// /proc/<pid>/cgroup. A v1 "N:memory:/path" line (possibly "memory,xyz")
// wins over the v2 "0::/path" line, as the kernel charges memory to the v1
// controller when it is mounted. ok is false when neither is present.
func ParseProcCgroup(text string) (v Version, path string, ok bool) {
	var v2 string
	var haveV2 bool
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return 1, parts[2], true
			}
		}
	}
	if haveV2 {
		return 2, v2, true
	}
	return 0, "", false
}

// Locate reads procCgroup (normally /proc/self/cgroup) and checks that the
// matching directory under root exists with the files a limit needs.
func Locate(root, procCgroup string) (Location, error) {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return Location{}, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	v, p, ok := ParseProcCgroup(string(b))
	if !ok {
		return Location{}, fmt.Errorf("%w: %s names no memory controller", ErrNoCgroup, procCgroup)
	}
	loc := Location{Version: v, Path: p}
	probe := "cgroup.controllers"
	if v == 1 {
		loc.Root = filepath.Join(root, "memory")
		probe = limitFile(v)
	} else {
		loc.Root = root
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
			// hybrid layouts mount v2 at root/unified
			loc.Root = filepath.Join(root, "unified")
		}
	}
	loc.Dir = filepath.Join(loc.Root, p)
	if _, err := os.Stat(filepath.Join(loc.Dir, probe)); err != nil {
		return Location{}, fmt.Errorf("%w: cgroup v%d directory %s: %v", ErrNoCgroup, v, loc.Dir, err)
	}
	if v == 2 {
		c, err := os.ReadFile(filepath.Join(loc.Dir, "cgroup.controllers"))
		if err != nil || !containsWord(string(c), "memory") {
			return Location{}, fmt.Errorf("%w: cgroup v2 %s has no memory controller", ErrNoCgroup, loc.Dir)
		}
	}
	return loc, nil
}

// limitFile is the name of a version-v cgroup's memory limit file.
func limitFile(v Version) string {
	if v == 1 {
		return "memory.limit_in_bytes"
	}
	return "memory.max"
}

// MemoryLimit reads the memory limit of the cgroup at loc; ok is false when
// it cannot be read or is unlimited ("max", or v1's page-rounded MaxInt64).
func (loc Location) MemoryLimit() (limit int64, ok bool) {
	v := readInt(filepath.Join(loc.Dir, limitFile(loc.Version)))
	if v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}

func containsWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// Prefix starts the name of every cgroup Create makes; the
// creating process's pid follows, so stale ones can be told apart.
const Prefix = "ssdgnn-ooc-"

// Cgroup is a child memory cgroup made by the harness. Remove it when done.
type Cgroup struct {
	Version Version
	Dir     string
	Limit   int64
}

// Create makes <prefix><pid>-<name> with a memory limit under loc.Dir. On
// v2 it first enables the memory controller for the parent's children,
// which the kernel refuses in a non-root cgroup that holds processes
// itself (the no-internal-process rule: a login session's scope, a GPU
// machine's job cgroup); it then makes the cgroup under loc.Root, which
// is exempt. Failing both is ErrNoCgroup.
func Create(loc Location, name string, limit int64) (*Cgroup, error) {
	parent := loc.Dir
	if loc.Version == 2 {
		if err := enableMemory(parent); err != nil {
			if loc.Root == "" || loc.Root == parent {
				return nil, err
			}
			if rerr := enableMemory(loc.Root); rerr != nil {
				return nil, fmt.Errorf("%w; at the root: %v", err, rerr)
			}
			parent = loc.Root
		}
	}
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-%s", Prefix, os.Getpid(), name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
		}
	}
	cg := &Cgroup{Version: loc.Version, Dir: dir, Limit: limit}
	file := limitFile(loc.Version)
	if loc.Version == 1 {
		// Swap would let the child exceed the limit silently; v1 only
		// exposes memsw when swap accounting is on, so this is best effort.
		_ = writeCtl(filepath.Join(dir, "memory.swappiness"), "0")
	} else {
		_ = writeCtl(filepath.Join(dir, "memory.swap.max"), "0")
	}
	if err := writeCtl(filepath.Join(dir, file), strconv.FormatInt(limit, 10)); err != nil {
		_ = cg.Remove()
		return nil, fmt.Errorf("%w: set %s: %v", ErrNoCgroup, file, err)
	}
	return cg, nil
}

// enableMemory turns on the memory controller for dir's children (v2).
func enableMemory(dir string) error {
	sc := filepath.Join(dir, "cgroup.subtree_control")
	if b, err := os.ReadFile(sc); err == nil && containsWord(string(b), "memory") {
		return nil
	}
	if err := writeCtl(sc, "+memory"); err != nil {
		return fmt.Errorf("%w: enable memory in %s: %v", ErrNoCgroup, sc, err)
	}
	return nil
}

// joinScript is the trampoline that puts a child into its cgroup before
// the measured program starts: sh writes its own pid into cgroup.procs
// ($0) and then execs the program in place (same pid), so every page the
// program touches, the page cache of its reads included, is charged to the
// cgroup from its first instruction.
//
// A command that cannot be found is reported under its own name, not the
// shell's $0 (the procs file), which read as a cgroup failure.
const joinScript = `echo $$ > "$0" || exit 126; command -v -- "$1" >/dev/null 2>&1 || { echo "$1: command not found" >&2; exit 127; }; exec "$@"`

// Argv returns the command line that runs argv (argv[0] the program)
// inside c from its first instruction.
func (c *Cgroup) Argv(argv []string) []string {
	return append([]string{"/bin/sh", "-c", joinScript, c.ProcsFile()}, argv...)
}

// ProcsFile is the file a process writes its pid into to join.
func (c *Cgroup) ProcsFile() string { return filepath.Join(c.Dir, "cgroup.procs") }

// Stats are the counters read after a child exits.
type Stats struct {
	// PeakBytes: memory.max_usage_in_bytes (v1) or memory.peak (v2; -1
	// on kernels before 5.19).
	PeakBytes int64 `json:"peak_bytes"`
	// LimitHits: memory.failcnt (v1) or memory.events "max" (v2): how
	// often usage hit the limit (and reclaim ran).
	LimitHits int64 `json:"limit_hits"`
	// OOMKills: memory.oom_control oom_kill (v1, -1 when the kernel lacks
	// the field) or memory.events oom_kill (v2).
	OOMKills int64 `json:"oom_kills"`
}

// Stats reads the counters.
func (c *Cgroup) Stats() Stats {
	s := Stats{PeakBytes: -1, LimitHits: -1, OOMKills: -1}
	if c.Version == 1 {
		s.PeakBytes = readInt(filepath.Join(c.Dir, "memory.max_usage_in_bytes"))
		s.LimitHits = readInt(filepath.Join(c.Dir, "memory.failcnt"))
		s.OOMKills = readKey(filepath.Join(c.Dir, "memory.oom_control"), "oom_kill")
		return s
	}
	s.PeakBytes = readInt(filepath.Join(c.Dir, "memory.peak"))
	s.LimitHits = readKey(filepath.Join(c.Dir, "memory.events"), "max")
	s.OOMKills = readKey(filepath.Join(c.Dir, "memory.events"), "oom_kill")
	return s
}

// ForceEmpty frees the page cache charged to a v1 cgroup
// (memory.force_empty). It must run when the cgroup has no processes.
//
// On v2 it does nothing. v2's memory.reclaim is synchronous in the writer,
// and asked for more than the cgroup held (it used to be given 1<<50
// bytes) it did not return for minutes on the lent GPU machine's kernel
// (2026-11-27: bench capped hung after its child had exited, and the next
// bench capped hung in CleanStale on the cgroups the killed ones left,
// until killed). A removed v2 cgroup's pages move to its parent; callers
// that need a cold page cache drop it before the next run (bench ooc does
// unless --no-drop-caches).
func (c *Cgroup) ForceEmpty() error {
	if c.Version == 1 {
		return writeCtl(filepath.Join(c.Dir, "memory.force_empty"), "0")
	}
	return nil
}

// Remove deletes the cgroup, retrying briefly while the kernel finishes
// reaping its last process.
func (c *Cgroup) Remove() error {
	var err error
	for i := 0; i < 50; i++ {
		if err = syscall.Rmdir(c.Dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("cgroup: remove %s: %w", c.Dir, err)
}

// CleanStale removes cgroups left under loc by harness processes that no
// longer run (a crashed or killed bench). It returns the directories
// removed.
func CleanStale(loc Location) ([]string, error) {
	removed, err := cleanStaleIn(loc.Version, loc.Dir)
	if err != nil || loc.Version != 2 || loc.Root == "" || loc.Root == loc.Dir {
		return removed, err
	}
	// Create's fallback puts them under the root.
	more, err := cleanStaleIn(loc.Version, loc.Root)
	return append(removed, more...), err
}

func cleanStaleIn(v Version, dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), Prefix)
		if !e.IsDir() || !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err == nil && pid != os.Getpid() && processAlive(pid) {
			continue
		}
		cg := &Cgroup{Version: v, Dir: filepath.Join(dir, e.Name())}
		if b, _ := os.ReadFile(cg.ProcsFile()); len(strings.TrimSpace(string(b))) > 0 {
			continue // still has members: not ours to tear down
		}
		_ = cg.ForceEmpty()
		if err := cg.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, cg.Dir)
	}
	return removed, errors.Join(errs...)
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// readKey reads "key value" lines (memory.events, memory.oom_control).
func readKey(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return parseKey(string(b), key)
}

func parseKey(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// DropPageCache syncs and drops the kernel's clean page cache, dentries
// and inodes (needs root and a writable /proc/sys).
func DropPageCache() error {
	syscall.Sync()
	return writeCtl("/proc/sys/vm/drop_caches", "3")
}

// writeCtl writes a cgroup control file; it never creates one (cgroupfs
// files exist or the write is refused).
func writeCtl(path, val string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(val)
	return errors.Join(err, f.Close())
}

// Parent locates the memory cgroup that children will be made under
// (Locate with root and procCgroup), checks that this process may make them
// (root; otherwise ErrNoCgroup) and removes the ones crashed runs left
// (CleanStale), logging what it removed or could not remove to log.
func Parent(root, procCgroup string, log *slog.Logger) (Location, error) {
	loc, err := Locate(root, procCgroup)
	if err != nil {
		return loc, err
	}
	if os.Geteuid() != 0 {
		return loc, fmt.Errorf("%w: not root", ErrNoCgroup)
	}
	if removed, err := CleanStale(loc); err != nil {
		log.Warn("stale cgroups", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed stale cgroups", "dirs", removed)
	}
	return loc, nil
}

// Self locates this process's memory cgroup under /sys/fs/cgroup.
func Self() (Location, error) { return Locate("/sys/fs/cgroup", "/proc/self/cgroup") }

// WithinLimit refuses a whole-process budget (the value of --mem) above
// the limit of the memory cgroup this process runs in: the kernel would
// kill the process before the budget it plans to was reached (a --mem 1GiB
// train under a 256 MiB cgroup planned a gigabyte and was OOM-killed; an
// import the same).
func WithinLimit(mem int64) error {
	if l, ok := SelfMemoryLimit(); ok && mem > l {
		return fmt.Errorf("--mem %s exceeds the limit of the memory cgroup this process runs in (%s), which the kernel enforces first; omit --mem to fit that limit, or give one below it",
			humanize.IBytes(uint64(mem)), humanize.IBytes(uint64(l)))
	}
	return nil
}

// SelfMemoryLimit is the memory limit of the cgroup this process runs in;
// ok is false when there is none or it is unlimited.
func SelfMemoryLimit() (limit int64, ok bool) {
	loc, err := Self()
	if err != nil {
		return 0, false
	}
	return loc.MemoryLimit()
}

// SelfMemoryRoom is the memory this process may fill, page cache
// included: the lesser of its memory cgroup's limit and the memory the
// kernel reports available (memstat.Available). fromLimit says the limit
// was the lesser; room is 0 when neither is known.
func SelfMemoryRoom() (room int64, fromLimit bool) {
	limit, ok := SelfMemoryLimit()
	return lesserRoom(limit, ok, memstat.Available())
}

// lesserRoom is SelfMemoryRoom's rule for a limit (ok: there is one) and
// an available figure (0: unknown).
func lesserRoom(limit int64, ok bool, avail int64) (room int64, fromLimit bool) {
	if ok && (avail <= 0 || limit < avail) {
		return limit, true
	}
	return max(avail, 0), false
}
