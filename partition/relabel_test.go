package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// relabelSource writes a planted graph with features, labels and splits
// and partitions it.
func relabelSource(t *testing.T, dir string, n int, featDim int, dtype string, splits bool, seed int64) *storage.Dataset {
	t.Helper()
	g, comm := planted(n, 6, 8, 0.8, 0.3, seed)
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	labels := make([]int32, n)
	for v := range labels {
		labels[v] = int32(comm[v])
		if r.IntN(10) == 0 {
			labels[v] = -1
		}
	}
	sg := storagetest.Graph{Adj: g.adj, Symmetrized: true, FeatDim: featDim, FeatDType: dtype,
		Feature: func(v int64, row []float32) {
			for i := range row {
				row[i] = float32(v)*0.5 + float32(i)
			}
		},
		Labels: labels, NumClasses: 6}
	if splits {
		sg.Train = g.train
		for v := range int64(n) {
			if !slices.Contains(g.train, v) {
				if v%3 == 0 {
					sg.Valid = append(sg.Valid, v)
				} else if v%3 == 1 {
					sg.Test = append(sg.Test, v)
				}
			}
		}
	}
	d := storagetest.Write(t, dir, sg)
	parts, first := 12, 3
	if n < parts {
		parts, first = n, 1
	}
	if _, err := Run(d, &Options{Parts: parts, FirstLevel: first, Seed: seed, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	return d
}

// checkRelabelled compares out with its source d through out's id map:
// every edge (as a pair of original ids, in order), feature row, label
// and split entry, the carried-over partitioning, and the order within
// each part that out's manifest records (heat: the values given to
// Relabel for RelabelByHeat).
func checkRelabelled(t *testing.T, d, out *storage.Dataset, name string, heat []uint32) {
	t.Helper()
	idm := out.IDMap()
	if idm == nil {
		t.Fatal("relabelled dataset has no id map")
	}
	n := d.NumNodes()
	if out.NumNodes() != n || out.NumEdges() != d.NumEdges() {
		t.Fatalf("out has %d nodes / %d edges, source %d / %d", out.NumNodes(), out.NumEdges(), n, d.NumNodes())
	}
	orig := func(v int64) int64 {
		u, err := idm.Orig(v)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for v := range n {
		u := orig(v)
		got, want := out.Neighbors(v), d.Neighbors(u)
		if got.Len() != want.Len() {
			t.Fatalf("new %d (old %d): degree %d, want %d", v, u, got.Len(), want.Len())
		}
		for i := range got.Len() {
			if o := orig(got.At(i)); o != want.At(i) {
				t.Fatalf("new %d (old %d): neighbour %d is old %d, want %d", v, u, i, o, want.At(i))
			}
		}
		if d.FeatDim() > 0 && !bytes.Equal(out.FeatureBytes(v), d.FeatureBytes(u)) {
			t.Fatalf("new %d (old %d): feature row differs", v, u)
		}
		if d.Labels() != nil && out.Labels()[v] != d.Labels()[u] {
			t.Fatalf("new %d (old %d): label %d, want %d", v, u, out.Labels()[v], d.Labels()[u])
		}
	}
	for i, pair := range [][2][]int64{{out.TrainIdx(), d.TrainIdx()}, {out.ValidIdx(), d.ValidIdx()}, {out.TestIdx(), d.TestIdx()}} {
		var mapped []int64
		for _, v := range pair[0] {
			mapped = append(mapped, orig(v))
		}
		slices.Sort(mapped)
		if !slices.Equal(mapped, pair[1]) && (len(mapped) > 0 || len(pair[1]) > 0) {
			t.Fatalf("split %d: original ids %v, want %v", i, mapped, pair[1])
		}
	}
	rep, err := storage.Validate(out.Dir(), nil)
	if err != nil || !rep.OK() {
		t.Fatalf("validate: %v %v", err, rep)
	}
	src, err := Open(d.Dir(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pt, err := Open(out.Dir(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if err := pt.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := pt.Contiguous(); err != nil {
		t.Fatal(err)
	}
	if pt.Stats() != src.Stats() {
		t.Fatalf("stats %+v, source %+v", pt.Stats(), src.Stats())
	}
	order := RelabelOrder(out.Manifest().RelabelledFrom.Order)
	var key func(u int64) uint32
	switch order {
	case RelabelByID:
		key = func(int64) uint32 { return 0 }
	case RelabelByHeat:
		key = func(u int64) uint32 { return heat[u] }
	case RelabelByDegree:
		in := make([]uint32, n)
		for u := range n {
			nb := d.Neighbors(u)
			for i := range nb.Len() {
				in[nb.At(i)]++
			}
		}
		key = func(u int64) uint32 { return in[u] }
	default:
		t.Fatalf("manifest records order %q", order)
	}
	for q := range src.K() {
		var m, tm []int64
		for _, v := range pt.Members(q) {
			m = append(m, orig(v))
		}
		for i := 1; i < len(m); i++ {
			if a, b := key(m[i-1]), key(m[i]); a < b || a == b && m[i-1] > m[i] {
				t.Fatalf("part %d, order %s: old %d (key %d) before old %d (key %d)", q, order, m[i-1], a, m[i], b)
			}
		}
		for _, v := range pt.TrainMembers(q) {
			tm = append(tm, orig(v))
		}
		slices.Sort(m)
		slices.Sort(tm)
		if !slices.Equal(m, src.Members(q)) || !slices.Equal(tm, src.TrainMembers(q)) {
			t.Fatalf("part %d: members differ from the source's", q)
		}
		for _, v := range pt.Members(q) {
			if pt.Cross()[v] != src.Cross()[orig(v)] {
				t.Fatalf("cross of new %d differs", v)
			}
		}
	}
}

func relabel(t *testing.T, d *storage.Dataset, out string, o *RelabelOptions) *storage.Dataset {
	t.Helper()
	p, err := Open(d.Dir(), string(Fennel))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := Relabel(context.Background(), d, p, out, o); err != nil {
		t.Fatal(err)
	}
	od, err := storage.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { od.Close() })
	return od
}

func TestRelabelRoundTrip(t *testing.T) {
	seed := testSeed(t)
	type tc = struct {
		name    string
		n, dim  int
		dtype   string
		splits  bool
		windows int64
	}
	for _, c := range []tc{
		{"float32", 500, 7, "float32", true, 0},
		{"float32-small-windows", 500, 7, "float32", true, 37},
		{"float16", 300, 4, "float16", true, 16},
		{"no-features-no-splits", 300, 0, "", false, 0},
		{"one-node", 1, 3, "float32", false, 0},
	} {
		for _, order := range RelabelOrders {
			t.Run(c.name+"/"+string(order), func(t *testing.T) {
				testWindowRows = c.windows
				defer func() { testWindowRows = 0 }()
				dir := t.TempDir()
				d := relabelSource(t, filepath.Join(dir, "src"), c.n, c.dim, c.dtype, c.splits, seed)
				p, err := Open(d.Dir(), string(Fennel))
				if err != nil {
					t.Fatal(err)
				}
				o := &RelabelOptions{Order: order, MemBytes: RelabelMinMemFor(d, p, order)}
				p.Close()
				if order == RelabelByHeat {
					// Few distinct values, so ties (broken by old id) are common.
					r := rand.New(rand.NewPCG(uint64(seed), 9))
					o.Heat = make([]uint32, d.NumNodes())
					for u := range o.Heat {
						o.Heat[u] = uint32(r.IntN(4))
					}
				}
				out := relabel(t, d, filepath.Join(dir, "out"), o)
				checkRelabelled(t, d, out, string(Fennel), o.Heat)
			})
		}
	}
}

// TestRelabelTwice: relabelling a relabelled copy composes the maps, so
// the copy of the copy speaks the original dataset's ids: checked against
// the original through its own map, edge by edge, row by row, split by
// split, part by part. Its manifest records both directories.
func TestRelabelTwice(t *testing.T) {
	seed := testSeed(t)
	for _, order := range []RelabelOrder{RelabelByDegree, RelabelByID} {
		t.Run(string(order), func(t *testing.T) {
			dir := t.TempDir()
			d := relabelSource(t, filepath.Join(dir, "src"), 400, 5, "float32", true, seed)
			mem := func(d *storage.Dataset) *RelabelOptions {
				p, err := Open(d.Dir(), string(Fennel))
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				return &RelabelOptions{Order: order, MemBytes: RelabelMinMemFor(d, p, order)}
			}
			once := relabel(t, d, filepath.Join(dir, "once"), mem(d))
			twice := relabel(t, once, filepath.Join(dir, "twice"), mem(once))
			checkRelabelled(t, d, twice, string(Fennel), nil)
			if r := twice.Manifest().RelabelledFrom; r.Dir != once.Dir() || r.Original != d.Dir() {
				t.Errorf("relabelled_from dir %q original %q, want %q and %q", r.Dir, r.Original, once.Dir(), d.Dir())
			}
			if r := once.Manifest().RelabelledFrom; r.Original != "" {
				t.Errorf("a first copy records original %q", r.Original)
			}
		})
	}
}

func TestRelabelCora(t *testing.T) {
	dir := t.TempDir()
	d := importCora(t, dir, "cora")
	defer d.Close()
	if _, err := Run(d, &Options{Parts: 20, Seed: 1, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	out := relabel(t, d, filepath.Join(dir, "cora-pm"), nil)
	checkRelabelled(t, d, out, string(Fennel), nil)
}

// cancelAfter is a context whose Err turns to Canceled after n calls.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

func TestRelabelCancelLeavesNoDataset(t *testing.T) {
	dir := t.TempDir()
	testWindowRows = 50
	defer func() { testWindowRows = 0 }()
	d := relabelSource(t, filepath.Join(dir, "src"), 400, 5, "float32", true, 1)
	p, err := Open(d.Dir(), string(Fennel))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := filepath.Join(dir, "out")
	// Every number of checks up to the first that completes: each phase
	// is cancelled somewhere.
	for after := 0; ; after++ {
		_, err := Relabel(&cancelAfter{Context: context.Background(), n: after}, d, p, out, nil)
		if err == nil {
			if after < 8 {
				t.Fatalf("relabel completed after only %d cancellation checks", after)
			}
			if err := os.RemoveAll(out); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancel after %d checks: %v, want context.Canceled", after, err)
		}
		// Nothing it committed stays: no arrays, no partitioning.
		if left, _ := os.ReadDir(out); len(left) > 0 {
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			t.Fatalf("cancel after %d checks left %v in OUT", after, names)
		}
		if _, err := os.Stat(filepath.Join(out, storage.ManifestName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cancel after %d checks left a manifest (%v)", after, err)
		}
		if _, err := storage.Open(out, nil); !errors.Is(err, storage.ErrNotDataset) {
			t.Fatalf("open after cancel: %v, want ErrNotDataset", err)
		}
		if left, _ := filepath.Glob(filepath.Join(out, "relabel-buckets*")); len(left) > 0 {
			t.Fatalf("cancel after %d checks left %v", after, left)
		}
	}
	checkRelabelled(t, d, relabel(t, d, out, nil), string(Fennel), nil)
}

func TestRelabelRefuses(t *testing.T) {
	dir := t.TempDir()
	d := relabelSource(t, filepath.Join(dir, "src"), 200, 3, "float32", true, 1)
	p, err := Open(d.Dir(), string(Fennel))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	// Each order's minimum is enforced and named; id order needs less.
	for _, o := range RelabelOrders {
		need := RelabelMinMemFor(d, p, o)
		if o == RelabelByID && need != RelabelMinMem(200) || o != RelabelByID && need <= RelabelMinMem(200) {
			t.Fatalf("order %s: minimum %d, id order's %d", o, need, RelabelMinMem(200))
		}
		var heat []uint32
		if o == RelabelByHeat {
			heat = make([]uint32, 200)
		}
		_, err = Relabel(ctx, d, p, filepath.Join(dir, "out"), &RelabelOptions{Order: o, Heat: heat, MemBytes: need - 1})
		if !errors.Is(err, ErrRelabelMem) || !strings.Contains(err.Error(), strconv.FormatInt(need, 10)) {
			t.Fatalf("order %s, --mem one byte short: %v, want ErrRelabelMem naming %d", o, err, need)
		}
	}
	for _, bad := range []struct {
		o    RelabelOptions
		want string
	}{
		{RelabelOptions{Order: "bfs"}, `unknown Order "bfs"`},
		{RelabelOptions{Order: RelabelByHeat}, "heat is given exactly for order"},
		{RelabelOptions{Order: RelabelByDegree, Heat: make([]uint32, 200)}, "heat is given exactly for order"},
		{RelabelOptions{Order: RelabelByHeat, Heat: make([]uint32, 199)}, "199 heat values for 200 nodes"},
		{RelabelOptions{MemBytes: -1}, "MemBytes"},
	} {
		if _, err := Relabel(ctx, d, p, filepath.Join(dir, "out"), &bad.o); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an error containing %q", bad.o, err, bad.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out", storage.ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused relabel left a manifest")
	}
	if _, err = Relabel(ctx, d, p, d.Dir(), nil); err == nil || !strings.Contains(err.Error(), "in place") {
		t.Fatalf("relabel in place: %v, want a refusal", err)
	}
	relabel(t, d, filepath.Join(dir, "out"), nil)
	if _, err = Relabel(ctx, d, p, filepath.Join(dir, "out"), nil); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("existing OUT without force: %v, want ErrExists", err)
	}
}

// TestRelabelBrokenMap swaps two entries of new_ids.npy: validate must
// name the file, and lookups through the damaged entries must fail with a
// CorruptError instead of returning a wrong id.
func TestRelabelBrokenMap(t *testing.T) {
	dir := t.TempDir()
	d := relabelSource(t, filepath.Join(dir, "src"), 200, 3, "float32", true, 1)
	out := relabel(t, d, filepath.Join(dir, "out"), nil)
	e := out.Manifest().File(storage.FileNewIDs)
	path := filepath.Join(out.Dir(), storage.FileNewIDs)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data := b[e.DataOffset:]
	var a, c [8]byte
	copy(a[:], data[8*3:]) // entries 3 and 150
	copy(c[:], data[8*150:])
	copy(data[8*3:], c[:])
	copy(data[8*150:], a[:])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := storage.Validate(out.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), "not inverse permutations") {
		t.Fatalf("validate missed the broken map: %v", rep.Problems)
	}
	// Open refuses it by the checksum; opened without the scan (as info
	// does), the lookup through the swapped entry still fails.
	if _, err := storage.Open(out.Dir(), nil); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), storage.FileNewIDs) {
		t.Fatalf("open with a broken map: %v, want a corrupt %s", err, storage.FileNewIDs)
	}
	od, err := storage.Open(out.Dir(), &storage.OpenOptions{SkipChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	if _, err := od.IDMap().New(3); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("New(3) through a swapped entry: %v, want ErrCorrupt", err)
	}
}

// TestRelabelCorruptMembers: a members.npy that disagrees with part.npy is
// a named CorruptError, not a wrong dataset.
func TestRelabelCorruptMembers(t *testing.T) {
	dir := t.TempDir()
	d := relabelSource(t, filepath.Join(dir, "src"), 200, 3, "float32", false, 1)
	p, err := Open(d.Dir(), string(Fennel))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	path := filepath.Join(p.Dir(), FileMembers)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := p.Manifest().File(FileMembers).DataOffset
	b[off+8*10], b[off+8*190] = b[off+8*190], b[off+8*10] // low bytes of two ids
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Relabel(context.Background(), d, p, filepath.Join(dir, "out"), nil)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(ce.File, FileMembers) {
		t.Fatalf("corrupt members: %v, want a CorruptError naming %s", err, FileMembers)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", storage.ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed relabel left a manifest")
	}
}

// TestRelabelWithinMem: MemBytes is the whole process's budget, so the Go
// runtime's memory (what its soft limit governs: runtime/metrics' total
// less released) stays at least membudget.PageCacheBytes below it,
// leaving the page cache its room (measured 35 MiB of 64; 53 before).
// Before, the soft limit was MemBytes itself and the
// runtime's memory reached it: `relabel --mem 64MiB` of a 1M-node graph
// was OOM-killed in two of three cold runs in a 64 MiB cgroup. The
// features (60 MiB) exceed the gather window, so the window takes all the
// budget leaves.
func TestRelabelWithinMem(t *testing.T) {
	if testing.Short() {
		t.Skip("relabels 60 MiB of features")
	}
	const mem = 64 << 20
	d := relabelSource(t, t.TempDir(), 60000, 256, "float32", true, 1)
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // sampled every millisecond until stop
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			if v := samples[0].Value.Uint64() - samples[1].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	out := relabel(t, d, filepath.Join(t.TempDir(), "pm"), &RelabelOptions{MemBytes: mem})
	close(stop)
	<-done
	out.Close()
	t.Logf("Go runtime's memory peaked at %.1f MiB for MemBytes %d MiB", float64(peak.Load())/(1<<20), mem>>20)
	if limit := uint64(membudget.Of(mem).GoLimit()); peak.Load() > limit {
		t.Errorf("the Go runtime's memory reached %d bytes, above %d: it leaves the page cache less than membudget.PageCacheBytes (%d) of MemBytes %d",
			peak.Load(), limit, membudget.PageCacheBytes, mem)
	}
}

// TestRelabelPartitioningReplaced: a 'partition --force' that replaces
// the partitioning while relabel runs (here once the id map is written,
// before the adjacency is read again by path) must make relabel fail,
// leaving no dataset, never a copy whose CSR comes from the other
// partitioning's adjacency (the same sizes, so no size check catches it,
// and validate finds nothing wrong in such a copy).
func TestRelabelPartitioningReplaced(t *testing.T) {
	for _, order := range []RelabelOrder{RelabelByDegree, RelabelByID} {
		t.Run(string(order), func(t *testing.T) {
			dir := t.TempDir()
			d := relabelSource(t, filepath.Join(dir, "src"), 400, 5, "float32", true, 1)
			p, err := Open(d.Dir(), string(Fennel))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			replace := func() {
				if _, err := Run(d, &Options{Method: Random, Parts: 12, Seed: 7, Workers: 2, Name: string(Fennel), Force: true}); err != nil {
					t.Error(err)
				}
			}
			out := filepath.Join(dir, "out")
			_, err = Relabel(context.Background(), d, p, out, &RelabelOptions{Order: order, Progress: &progresstest.OnFirstAdd{Fn: replace}})
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "replaced while it was read") {
				t.Fatalf("relabel with its partitioning replaced: %v, want ErrMismatch saying it was replaced", err)
			}
			if _, err := storage.Open(out, nil); !errors.Is(err, storage.ErrNotDataset) {
				t.Fatalf("open after a refused relabel: %v, want ErrNotDataset", err)
			}
		})
	}
}

// TestRelabelOpenChecksMaps: two entries swapped in both id maps (still
// inverse permutations, so no lookup notices) are refused at Open by
// their checksums, naming orig_ids.npy; before, infer on such a copy gave
// the two nodes' predictions to each other's original ids.
func TestRelabelOpenChecksMaps(t *testing.T) {
	dir := t.TempDir()
	d := relabelSource(t, filepath.Join(dir, "src"), 300, 3, "float32", true, 1)
	out := relabel(t, d, filepath.Join(dir, "out"), nil).Dir()
	// Entries i of orig_ids.npy and new_ids.npy as stored, and a setter
	// that rewrites one in place.
	get := func(name string, i int64) int64 {
		_, b := storagetest.ReadNPY(t, filepath.Join(out, name))
		return int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	set := func(name string, i, v int64) {
		h, _ := storagetest.ReadNPY(t, filepath.Join(out, name))
		f, err := os.OpenFile(filepath.Join(out, name), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], uint64(v))
		if _, err := f.WriteAt(x[:], h.DataOffset+8*i); err != nil {
			t.Fatal(err)
		}
	}
	a, b := get(storage.FileOrigIDs, 0), get(storage.FileOrigIDs, 1)
	set(storage.FileOrigIDs, 0, b)
	set(storage.FileOrigIDs, 1, a)
	set(storage.FileNewIDs, a, 1)
	set(storage.FileNewIDs, b, 0)
	_, err := storage.Open(out, nil)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), storage.FileOrigIDs) {
		t.Fatalf("open with swapped id map entries: %v, want a corrupt %s", err, storage.FileOrigIDs)
	}
}
