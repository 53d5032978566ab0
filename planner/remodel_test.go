package planner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/sample"
)

// TestRemodelSaveLoad: a recount saved under a key and loaded into the
// profile as saved gives the recount's arrays and read model exactly; an
// unknown key loads nothing; a damaged file is refused before anything of
// the profile is overwritten; saving the profile again removes its
// recounts, and a profile keeps only the KeepRemodels newest.
func TestRemodelSaveLoad(t *testing.T) {
	ctx := context.Background()
	d := testDataset(t)
	mp, _, o, p := partitionedProfile(t, d, "remodel")
	dir := t.TempDir()
	if err := p.Save(dir); err != nil {
		t.Fatal(err)
	}
	load := func() *Profile {
		t.Helper()
		q, err := LoadProfile(dir, o.Name)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	half := func(b *sample.Batch, visit func([]int64)) {
		rows := b.Nodes()
		visit(rows[:len(rows)/2])
		visit(rows[len(rows)/2:])
	}
	r := load()
	if err := r.RemodelReads(ctx, d, mp, &o, half, 1, 2, 16); err != nil {
		t.Fatal(err)
	}
	if err := r.SaveRemodel(dir, "k1"); err != nil {
		t.Fatal(err)
	}

	q := load()
	if ok, err := q.LoadRemodel(dir, "k0"); ok || err != nil {
		t.Fatalf("unknown key: %v, %v", ok, err)
	}
	if ok, err := q.LoadRemodel(dir, "k1"); !ok || err != nil {
		t.Fatalf("saved key: %v, %v", ok, err)
	}
	if !slices.Equal(q.Feat, r.Feat) || !slices.Equal(q.FeatSingle, r.FeatSingle) || !slices.Equal(q.FeatHeldOut, r.FeatHeldOut) {
		t.Fatal("loaded arrays differ from the recount's")
	}
	if !reflect.DeepEqual(*q.Meta.Reads, *r.Meta.Reads) || q.Meta.Reads.ScanBatches != 2 || q.Meta.Reads.ChunkRows != 16 || q.Meta.Reads.MicroBatchRows != 1 ||
		q.Meta.SumFeat != r.Meta.SumFeat || q.Meta.SumFeatSingle != r.Meta.SumFeatSingle || q.Meta.SumFeatHeldOut != r.Meta.SumFeatHeldOut {
		t.Fatalf("loaded read model %+v, recount's %+v", *q.Meta.Reads, *r.Meta.Reads)
	}

	// One byte of one array flipped: refused, naming the file, and the
	// profile keeps its own counts.
	path := filepath.Join(ProfilePath(dir, o.Name), RemodelDir, "k1", FileFeatHeldOut)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	q = load()
	before := slices.Clone(q.Feat)
	var ce *CorruptError
	if ok, err := q.LoadRemodel(dir, "k1"); ok || !errors.As(err, &ce) || ce.File != path {
		t.Fatalf("damaged recount: %v, %v", ok, err)
	}
	if !slices.Equal(q.Feat, before) || q.Meta.Reads.ScanBatches != 0 {
		t.Fatal("a refused recount overwrote the profile")
	}

	// The newest KeepRemodels stay.
	for _, k := range []string{"k2", "k3", "k4"} {
		if err := r.SaveRemodel(dir, k); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(ProfilePath(dir, o.Name), RemodelDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != KeepRemodels || !slices.Contains(names, "k4") {
		t.Fatalf("recounts kept %v, want the %d newest with k4", names, KeepRemodels)
	}
	// A profile saved again drops its recounts.
	if err := load().Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ProfilePath(dir, o.Name), RemodelDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("recounts after the profile was saved again: %v", err)
	}
	if ok, err := load().LoadRemodel(dir, "k4"); ok || err != nil {
		t.Fatalf("recount of the replaced profile: %v, %v", ok, err)
	}
}
