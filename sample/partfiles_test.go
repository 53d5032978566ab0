package sample_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/internal/memacct"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

func TestPartitionFilesAdapter(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 13))
	adj, _, train := communityGraph(r, 6, 30, 8, 2, 2)
	d := writeDataset(t, adj, train, 0)
	pf := partitionFiles(t, d, 6, seed)
	var _ sample.Partitions = pf
	c := sample.NewDynamicCache(false)
	all := make([]int, pf.K())
	for i := range all {
		all[i] = i
	}
	if err := pf.LoadAdjacency(all, c); err != nil {
		t.Fatal(err)
	}
	if c.Len() != len(adj) {
		t.Fatalf("dynamic cache holds %d nodes, want %d", c.Len(), len(adj))
	}
	// MacroBytesBound bounds what loading any ppb partitions takes.
	if b := pf.MacroBytesBound(pf.K(), 0); c.MemBytes() > b {
		t.Fatalf("all %d partitions: MemBytes %d > MacroBytesBound %d", pf.K(), c.MemBytes(), b)
	}
	for q := range pf.K() {
		one := sample.NewDynamicCache(false)
		if err := pf.LoadAdjacency([]int{q}, one); err != nil {
			t.Fatal(err)
		}
		if b := pf.MacroBytesBound(1, 0); one.MemBytes() > b {
			t.Fatalf("partition %d: MemBytes %d > MacroBytesBound(1) %d", q, one.MemBytes(), b)
		}
	}
	// A cache reused across macro batches (Reset, then LoadAdjacency)
	// holds exactly what a fresh one would, keeps its arrays when they are
	// large enough, and never reports less memory than a fresh load.
	reused := sample.NewDynamicCache(false)
	for _, ps := range [][]int{{0}, all, {1}, {2, 3}, all[:1], all} {
		reused.Reset()
		if err := pf.LoadAdjacency(ps, reused); err != nil {
			t.Fatal(err)
		}
		fresh := sample.NewDynamicCache(false)
		if err := pf.LoadAdjacency(ps, fresh); err != nil {
			t.Fatal(err)
		}
		if reused.Len() != fresh.Len() || reused.DataBytes() != fresh.DataBytes() || reused.MemBytes() < fresh.MemBytes() || reused.NeedBytes() != fresh.MemBytes() {
			t.Fatalf("partitions %v: reused cache %d nodes, %d bytes, MemBytes %d; fresh %d, %d, %d", ps, reused.Len(), reused.DataBytes(), reused.MemBytes(), fresh.Len(), fresh.DataBytes(), fresh.MemBytes())
		}
		for v := range adj {
			want, inFresh := fresh.Lookup(int64(v))
			got, ok := reused.Lookup(int64(v))
			if ok != inFresh || !slices.Equal(got.AppendTo(nil), want.AppendTo(nil)) {
				t.Fatalf("partitions %v: node %d: reused cache has %v (%v), fresh %v (%v)", ps, v, got.AppendTo(nil), ok, want.AppendTo(nil), inFresh)
			}
		}
	}
	if got, want := reused.AllocatedBytes(), c.AllocatedBytes(); got != want {
		t.Fatalf("reused cache allocated %d bytes, want the largest load's %d (kept, not regrown)", got, want)
	}
	// LoadAdjacency reserves exact sizes: no doubling slack.
	if got, want := c.AllocatedBytes(), c.DataBytes()+8*int64(c.Len()+1); got != want {
		t.Fatalf("dynamic cache allocated %d bytes, want exactly %d", got, want)
	}
	for v := range adj {
		l, ok := c.Lookup(int64(v))
		if !ok || !slices.Equal(l.AppendTo(nil), d.Neighbors(int64(v)).AppendTo(nil)) {
			t.Fatalf("node %d: loaded list differs from the dataset's", v)
		}
	}
	s, err := sample.New(d, pf, &sample.Options{Fanouts: []int{4, 4}, BatchSize: 10, Mode: sample.ModePartition, PartsPerBatch: 2, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bs, st := collect(t, s, 0)
	for _, b := range bs {
		checkBatch(t, d, []int{4, 4}, b, nil)
	}
	if st.Dynamic.Hits == 0 {
		t.Fatal("no dynamic-cache hits from partition files")
	}
}

// TestMacroCachesAlive: the macro batches' dynamic caches held at once,
// live or waiting in the iterator's spare, never take more than Workers ×
// MacroBytesBound (memacct's peak for the purpose), whatever the
// scheduling: macro batches of one to a few batches, a consumer that
// sometimes stalls, 1 to 4 workers.
func TestMacroCachesAlive(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 17))
	adj, _, train := communityGraph(r, 24, 40, 8, 2, 3)
	d := writeDataset(t, adj, train, 0)
	pf := partitionFiles(t, d, 24, seed)
	for _, tc := range []struct{ workers, ppb, batch int }{
		{1, 1, 5}, {2, 1, 5}, {2, 2, 7}, {4, 1, 4}, {4, 3, 30}, {3, 1, 13},
	} {
		bound := pf.MacroBytesBound(tc.ppb, tc.batch)
		s, err := sample.New(d, pf, &sample.Options{Fanouts: []int{3, 3}, BatchSize: tc.batch, Mode: sample.ModePartition,
			PartsPerBatch: tc.ppb, Seed: seed, Workers: tc.workers})
		if err != nil {
			t.Fatal(err)
		}
		base := memacct.Read().Bytes[memacct.DynamicCache]
		memacct.ResetPeak()
		var peak int64
		for epoch := range 3 {
			it := s.Epoch(context.Background(), epoch)
			for i := 0; ; i++ {
				b, err := it.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				}
				b.Release()
			}
			it.Close()
			peak = max(peak, memacct.Read().PeakBytes[memacct.DynamicCache]-base)
			if left := memacct.Read().Bytes[memacct.DynamicCache] - base; left != 0 {
				t.Fatalf("%+v, epoch %d: %d bytes of dynamic caches still counted after Close", tc, epoch, left)
			}
		}
		s.Close()
		t.Logf("%+v: peak %d bytes of dynamic caches, bound %d per macro batch", tc, peak, bound)
		if peak <= 0 || peak > int64(tc.workers)*bound {
			t.Errorf("%+v: dynamic caches peaked at %d bytes, want in (0, %d × %d]", tc, peak, tc.workers, bound)
		}
	}
}

// partitionFiles partitions d into parts parts in one level (exact
// FENNEL, seeded from seed) and opens them as PartitionFiles, closed when
// the test ends.
func partitionFiles(t *testing.T, d *storage.Dataset, parts int, seed uint64) *sample.PartitionFiles {
	t.Helper()
	if _, err := partition.Run(d, &partition.Options{Parts: parts, FirstLevel: parts, Method: partition.FennelExact, Seed: int64(seed >> 1), Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	pf, err := sample.OpenPartitionFiles(d, d.Dir(), string(partition.FennelExact))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pf.Close() })
	return pf
}

// TestOpenPartitionFiles: a missing partitioning is partition.ErrNotFound
// with a message that names it and says how to make it; an opened one
// owns its partitioning, whose files are unmapped by Close.
func TestOpenPartitionFiles(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 14))
	adj, _, train := communityGraph(r, 4, 20, 6, 2, 2)
	d := writeDataset(t, adj, train, 0)
	_, err := sample.OpenPartitionFiles(d, d.Dir(), "nope")
	if !errors.Is(err, partition.ErrNotFound) || !strings.Contains(err.Error(), `no partitioning "nope"`) || !strings.Contains(err.Error(), "ssdgnn partition "+d.Dir()) {
		t.Fatalf("missing partitioning: %v", err)
	}
	pf := partitionFiles(t, d, 4, seed) // opened by OpenPartitionFiles
	dir := pf.Partitioning().Dir()
	if pf.K() != 4 || pf.Partitioning().K() != 4 || mapped(t, dir) == 0 {
		t.Fatalf("K %d, partitioning K %d, %d mappings under %s", pf.K(), pf.Partitioning().K(), mapped(t, dir), dir)
	}
	if err := pf.Close(); err != nil {
		t.Fatal(err)
	}
	if n := mapped(t, dir); n != 0 {
		t.Errorf("%d mappings under %s after Close", n, dir)
	}
}

// mapped counts this process's memory mappings of files under dir.
func mapped(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(b), dir+"/")
}

// TestPartitionFilesReplaced: a partitioning replaced after it was opened
// (partition --force with the same name) is refused when its adjacency
// file is opened by path, instead of pairing the new lists with the old
// offsets.
func TestPartitionFilesReplaced(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 15))
	adj, _, train := communityGraph(r, 4, 20, 6, 2, 2)
	d := writeDataset(t, adj, train, 0)
	name := string(partition.FennelExact)
	if _, err := partition.Run(d, &partition.Options{Parts: 4, FirstLevel: 4, Method: partition.FennelExact, Seed: 1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	p, err := partition.Open(d.Dir(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := partition.Run(d, &partition.Options{Parts: 4, FirstLevel: 4, Method: partition.Random, Name: name, Seed: 2, Force: true, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	pf, err := sample.NewPartitionFiles(d, p)
	if err == nil {
		pf.Close()
		t.Fatal("a partitioning replaced after it was opened was accepted")
	}
	if !errors.Is(err, partition.ErrMismatch) || !strings.Contains(err.Error(), "was replaced while it was read") {
		t.Errorf("replaced partitioning: %v", err)
	}
}

// TestPartitionFilesOtherSplit: a partitioning made for the same graph with
// another training split (copied from a dataset generated or imported with
// other split fractions or seed; N and E agree, so partition.Open takes it)
// is refused: partition batches take their targets from train_members.npy,
// so before this check rr and train silently used the other split's
// training nodes, validation and test nodes among them.
func TestPartitionFilesOtherSplit(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 16))
	adj, _, train := communityGraph(r, 4, 20, 6, 2, 2) // even ids
	src := writeDataset(t, adj, train, 0)
	if _, err := partition.Run(src, &partition.Options{Parts: 4, Method: partition.FennelExact, Seed: 1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	odd := make([]int64, len(train)) // as many training nodes, other ids
	for i, v := range train {
		odd[i] = v + 1
	}
	for _, tc := range []struct {
		name  string
		train []int64
		want  string
	}{
		{"same count", odd, "train_members.npy: element "},
		{"fewer", train[:len(train)-3], "training nodes"},
		{"more", append(slices.Clone(train), 1), "training nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := writeDataset(t, adj, tc.train, 0)
			if err := os.CopyFS(partition.Dir(d.Dir(), string(partition.FennelExact)), os.DirFS(partition.Dir(src.Dir(), string(partition.FennelExact)))); err != nil {
				t.Fatal(err)
			}
			pf, err := sample.OpenPartitionFiles(d, d.Dir(), string(partition.FennelExact))
			if err == nil {
				defer pf.Close()
				var n int
				for q := range pf.K() {
					n += len(pf.TrainMembers(q))
				}
				t.Fatalf("a partitioning of another split was accepted: its batches would train on %d nodes, the dataset has %d training nodes", n, len(tc.train))
			}
			if !errors.Is(err, partition.ErrMismatch) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "train_idx.npy") {
				t.Errorf("partitioning of another split: %v", err)
			}
		})
	}
}

// TestPartitionFilesReadCalls: LoadAdjacency counts one read call per
// partition it reads, as the kernel sees them: a partition with no list
// bytes (empty, or only isolated nodes) issues no pread and counts none.
// Every partition was counted: on a 50k-node graph with 10,000 parts (225
// empty) the load stage reported 10,000 read calls an epoch against 9,775
// pread64 calls under strace.
func TestPartitionFilesReadCalls(t *testing.T) {
	seed := testSeed(t)
	const n, ring = 40, 10
	adj := make([][]int64, n) // nodes ring..n-1 isolated
	for v := range ring {
		u := int64((v + 1) % ring)
		adj[v] = append(adj[v], u)
		adj[u] = append(adj[u], int64(v))
	}
	d := writeDataset(t, adj, []int64{0, 3, 7, 20}, 0)
	pf := partitionFiles(t, d, 20, seed)
	all := make([]int, pf.K())
	var withBytes, without int64
	for q := range all {
		all[q] = q
		if pf.Partitioning().AdjacencyOf(q).FileBytes > 0 {
			withBytes++
		} else {
			without++
		}
	}
	if without == 0 || withBytes == 0 {
		t.Fatalf("the partitioning has %d parts with list bytes and %d without: the test needs both", withBytes, without)
	}
	before := d.Accounting().Snapshot()
	if err := pf.LoadAdjacency(all, sample.NewDynamicCache(false)); err != nil {
		t.Fatal(err)
	}
	var got storage.StageStats
	for _, s := range d.Accounting().Snapshot() {
		if s.Stage == storage.StageLoad {
			got = s
		}
	}
	for _, s := range before {
		if s.Stage == storage.StageLoad {
			got.ReadCalls -= s.ReadCalls
		}
	}
	if got.ReadCalls != withBytes {
		t.Fatalf("load stage counted %d read calls for %d partitions with list bytes (%d without)", got.ReadCalls, withBytes, without)
	}
}

// TestAdjacencyTruncated: an adjacency file that another program
// truncates after the partitioning was opened fails the batch whose macro
// batch reads past its end with an error naming the file, and that error
// is not the end of the epoch. Before, the read's io.EOF, wrapped, read as
// the end (errors.Is(err, io.EOF)): rr reported the partition selection
// over the batches before it (0 batches, RR 0.00, exit 0), a training
// epoch ended early (with history on, train hung waiting for the next
// batch's reuse request).
func TestAdjacencyTruncated(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 19))
	adj, _, train := communityGraph(r, 8, 40, 8, 2, 2)
	for _, tc := range []struct {
		name string
		run  func(d *storage.Dataset, pf *sample.PartitionFiles) error
	}{
		{"epoch", func(d *storage.Dataset, pf *sample.PartitionFiles) error {
			s, err := sample.New(d, pf, &sample.Options{Fanouts: []int{3, 3}, BatchSize: 20, Mode: sample.ModePartition, PartsPerBatch: 1, Seed: seed, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			it := s.Epoch(context.Background(), 0)
			defer it.Close()
			for {
				b, err := it.Next()
				if err != nil {
					return err
				}
				b.Release()
			}
		}},
		{"rr", func(d *storage.Dataset, pf *sample.PartitionFiles) error {
			_, err := sample.RRReport(context.Background(), d, pf, &sample.RROptions{Fanouts: []int{3, 3}, BatchSize: 20, PartsPerBatch: 1, NoHist: true, Seed: seed})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := writeDataset(t, adj, train, 0)
			pf := partitionFiles(t, d, 8, seed)
			path := pf.Partitioning().AdjacencyPath()
			if err := os.Truncate(path, 200); err != nil {
				t.Fatal(err)
			}
			err := tc.run(d, pf)
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("truncated %s: %v, want a read error that is not io.EOF", path, err)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), path) {
				t.Errorf("truncated %s: %v, want io.ErrUnexpectedEOF naming the file", path, err)
			}
		})
	}
}
