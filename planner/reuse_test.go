package planner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// TestReusable: a saved profile is reusable for exactly the options that
// would profile the same arrays. Every option that changes the batches,
// the history model or the read model is refused, naming it; workers and
// the source, which change only timings, are not; a profile recounted
// for micro-batches is refused.
func TestReusable(t *testing.T) {
	ctx := context.Background()
	d := testDataset(t)
	mp, part, base, p := partitionedProfile(t, d, "reuse")
	if p.Meta.PartChecksum != PartChecksum(part) || p.Meta.PartChecksum == "" {
		t.Fatalf("part checksum %q, want %q", p.Meta.PartChecksum, PartChecksum(part))
	}
	dir := t.TempDir()
	if err := p.Save(dir); err != nil {
		t.Fatal(err)
	}
	q, err := LoadProfile(dir, base.Name)
	if err != nil {
		t.Fatal(err)
	}

	// Another assignment with the same part count and sizes.
	other := slices.Clone(part)
	slices.Reverse(other)
	mp2, err := sample.NewMemPartitions(d, 30, other)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := neighborcache.Build(d, &neighborcache.Options{Budget: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		parts sample.Partitions
		edit  func(o *ProfileOptions)
		want  string // "" = reusable; else a word of the reason
	}{
		{"same", mp, func(*ProfileOptions) {}, ""},
		{"workers and source", mp, func(o *ProfileOptions) { o.Workers, o.Source = 1, sample.SourceDirect }, ""},
		{"defaults spelled out", mp, func(o *ProfileOptions) { o.PresampleEpochs, o.ReuseDepth = 1, 1 }, ""},
		{"seed", mp, func(o *ProfileOptions) { o.Seed = 4 }, "seed"},
		{"fanouts", mp, func(o *ProfileOptions) { o.Fanouts = []int{5, 4} }, "fanouts"},
		{"batch size", mp, func(o *ProfileOptions) { o.BatchSize = 65 }, "batch size"},
		{"random batches", mp, func(o *ProfileOptions) { o.Mode = sample.ModeRandom }, "batches"},
		{"parts per batch", mp, func(o *ProfileOptions) { o.PartsPerBatch = 7 }, "parts a batch"},
		{"partition name", mp, func(o *ProfileOptions) { o.Partition = "q" }, "partitioning"},
		{"assignment", mp2, func(o *ProfileOptions) { o.Part = other }, "assignment"},
		{"pre-sampled epochs", mp, func(o *ProfileOptions) { o.PresampleEpochs = 2 }, "pre-sampled"},
		{"staleness", mp, func(o *ProfileOptions) { o.Staleness = 3 }, "staleness"},
		{"reuse depth", mp, func(o *ProfileOptions) { o.ReuseDepth = 2 }, "staleness"},
		{"neighbour cache", mp, func(o *ProfileOptions) { o.NeighborCache = nc }, "neighbour cache"},
		{"read cap", mp, func(o *ProfileOptions) { o.Gather = &featurecache.Options{MaxReadAmplification: 3} }, "priced"},
		{"per-row reads", mp, func(o *ProfileOptions) { o.Gather = &featurecache.Options{CoalesceGap: featurecache.PerRowReads} }, "priced"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.edit(&o)
			err := q.Reusable(ctx, d, c.parts, &o)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("not reusable: %v", err)
			case c.want != "" && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a mismatch naming %q", err, c.want)
			}
		})
	}

	// Recounted for micro-batches: refused, since its counts are not the
	// profile's.
	half := func(b *sample.Batch, visit func([]int64)) {
		rows := b.Nodes()
		visit(rows[:len(rows)/2])
		visit(rows[len(rows)/2:])
	}
	if err := q.RemodelReads(ctx, d, mp, &base, half, 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := q.Reusable(ctx, d, mp, &base); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "micro-batches") {
		t.Fatalf("remodelled profile: %v", err)
	}
	// Recounted for scans of two whole batches: refused too.
	whole := func(b *sample.Batch, visit func([]int64)) { visit(b.Nodes()) }
	if err := q.RemodelReads(ctx, d, mp, &base, whole, 0, 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := q.Reusable(ctx, d, mp, &base); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "scans of 2") {
		t.Fatalf("profile remodelled for scans: %v", err)
	}
	// Counted by older models: refused, and Outdated says which.
	for _, tc := range []struct {
		name, want string
		edit       func(m *Meta)
	}{
		{"validity model 1", "history validity model 1", func(m *Meta) { m.HistModel = 1 }},
		{"one round", "over 0 rounds", func(m *Meta) { m.HistRounds = 0 }},
		{"no thinned counts", "thinned read counts", func(m *Meta) { r := *m.Reads; r.Thinned = nil; m.Reads = &r }},
		{"no held-out counts", "held-out feature counts", func(m *Meta) { m.HeldOutEpoch = 0 }},
	} {
		old := q.Meta
		q.Meta.Reads = &ReadModel{}
		*q.Meta.Reads = *old.Reads
		q.Meta.Reads.MicroBatchRows, q.Meta.Reads.ScanBatches = 0, 0
		tc.edit(&q.Meta)
		if why := q.Meta.Outdated(); !strings.Contains(why, tc.want) {
			t.Errorf("%s: Outdated %q, want it to name %q", tc.name, why, tc.want)
		}
		if err := q.Reusable(ctx, d, mp, &base); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
		q.Meta = old
	}
	// A profile of random batches needs no assignment.
	ro := base
	ro.Mode, ro.Name, ro.Part, ro.Partition = sample.ModeRandom, "reuse-random", nil, ""
	rp, err := RunProfile(ctx, d, nil, &ro)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Meta.PartChecksum != "" {
		t.Errorf("random profile has a part checksum %q", rp.Meta.PartChecksum)
	}
	if err := rp.Reusable(ctx, d, nil, &ro); err != nil {
		t.Errorf("random profile not reusable: %v", err)
	}
}

// TestPartChecksum: equal assignments agree, any changed entry differs.
func TestPartChecksum(t *testing.T) {
	a := make([]int32, 5000) // more than one 4 KiB chunk
	for i := range a {
		a[i] = int32(i % 17)
	}
	b := slices.Clone(a)
	if PartChecksum(a) != PartChecksum(b) {
		t.Fatal("equal assignments differ")
	}
	for _, i := range []int{0, 1023, 1024, 4999} {
		b[i]++
		if PartChecksum(a) == PartChecksum(b) {
			t.Errorf("entry %d changed, checksum did not", i)
		}
		b[i]--
	}
	if PartChecksum(nil) == PartChecksum([]int32{0}) {
		t.Error("empty and one-entry assignments agree")
	}
}

// partitionedProfile profiles d's partition batches over 30 parts of
// consecutive ids, under name, and returns the partitions, their
// assignment, the options and the profile.
func partitionedProfile(t *testing.T, d *storage.Dataset, name string) (*sample.MemPartitions, []int32, ProfileOptions, *Profile) {
	t.Helper()
	part := make([]int32, d.NumNodes())
	for v := range part {
		part[v] = int32(v * 30 / len(part))
	}
	mp, err := sample.NewMemPartitions(d, 30, part)
	if err != nil {
		t.Fatal(err)
	}
	o := ProfileOptions{Name: name, Fanouts: []int{5, 5}, BatchSize: 64, Mode: sample.ModePartition,
		Partition: "p30", Part: part, Seed: 3, Workers: 2}
	p, err := RunProfile(context.Background(), d, mp, &o)
	if err != nil {
		t.Fatal(err)
	}
	return mp, part, o, p
}
