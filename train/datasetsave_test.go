package train

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dustin/go-humanize"

	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// ownSynth is a small generated graph in a directory of the test's own:
// these tests write profiles and hold the dataset's lock, which the
// shared datasets of the other tests must not see.
func ownSynth(t *testing.T) *storage.Dataset {
	return storagetest.Generate(t, synth.Config{Nodes: 3000, FeatDim: 16, Classes: 4, Seed: 7}, nil)
}

// roomyBudget is a budget under which synthOpts' training plans its
// caches (as TestPlanMemory's).
func roomyBudget(d *storage.Dataset) int64 {
	o := synthOpts()
	return MinimumBudget(d, o) + 8*d.NumNodes() + 200*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes + FixedState(d, o, nil).Bytes
}

// While another writer holds the dataset (or it cannot be written),
// PlanMemory plans from the profile it keeps in memory and writes nothing
// into the dataset; a plan given its own path is still written there.
// (Every save into the dataset holding its lock is what keeps two
// trainings from writing one profile at once: before, about one run in
// two of two concurrent `train --mem --reprofile` on Cora failed renaming
// a temporary file the other's save had cleaned away.)
func TestPlanMemoryWithDatasetHeld(t *testing.T) {
	d := ownSynth(t)
	mem := roomyBudget(d)
	lk, err := dirlock.Acquire(d.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	mp, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: mem})
	if err != nil {
		t.Fatalf("plan while the dataset is held: %v", err)
	}
	if !mp.Created || mp.PlanPath != "" || mp.Profile == nil {
		t.Errorf("created %v, plan path %q, profile %v: want a plan made, not saved, from the profile in memory", mp.Created, mp.PlanPath, mp.Profile != nil)
	}
	if _, err := os.Stat(filepath.Join(d.Dir(), "profile")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile directory written while the dataset was held: %v", err)
	}
	out := filepath.Join(t.TempDir(), "plan.json")
	mp, err = PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: mem, PlanOut: out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err != nil || mp.PlanPath != out {
		t.Errorf("plan path %q, %s: %v", mp.PlanPath, out, err)
	}
	lk.Release()
	// Released, the same run saves its profile.
	if _, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: mem}); err != nil {
		t.Fatal(err)
	}
	if _, err := planner.LoadProfile(d.Dir(), DefaultProfileName); err != nil {
		t.Errorf("profile after release: %v", err)
	}
}

// Without a profile name, PlanMemory plans from its own profile, else
// from the one `ssdgnn profile` saved, whichever matches; a new profile
// is saved under its own name, never over the other.
func TestPlanMemoryFindsProfileCommandsProfile(t *testing.T) {
	d := ownSynth(t)
	mem := roomyBudget(d)
	plan := func(o *Options, name string, reprofile bool) *MemPlan {
		t.Helper()
		mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: name, Reprofile: reprofile,
			PlanOut: filepath.Join(t.TempDir(), "plan.json")})
		if err != nil {
			t.Fatal(err)
		}
		return mp
	}
	// What `ssdgnn profile` leaves: a profile named planner.DefaultProfileName.
	plan(synthOpts(), planner.DefaultProfileName, true)
	for _, tc := range []struct {
		what      string
		o         *Options
		reprofile bool
		reused    bool
		from      string
	}{
		{"only the profile command's", synthOpts(), false, true, planner.DefaultProfileName},
		{"--reprofile", synthOpts(), true, false, DefaultProfileName},
		{"both match: its own first", synthOpts(), false, true, DefaultProfileName},
		{"neither matches (another seed)", withSeed(synthOpts(), 99), false, false, DefaultProfileName},
	} {
		mp := plan(tc.o, "", tc.reprofile)
		if mp.Reused != tc.reused || mp.Plan.Profile != tc.from {
			t.Errorf("%s: reused %v from %q, want %v from %q", tc.what, mp.Reused, mp.Plan.Profile, tc.reused, tc.from)
		}
	}
	// The profile command's profile was never written over.
	p, err := planner.LoadProfile(d.Dir(), planner.DefaultProfileName)
	if err != nil || p.Meta.Seed != synthOpts().Seed {
		t.Fatalf("the profile command's profile: %v (seed %v)", err, p)
	}
}

func withSeed(o *Options, seed uint64) *Options {
	o.Seed = seed
	return o
}

// A spill directory training cannot write into is refused by New, before
// the first epoch.
func TestSpillDirRefusedEarly(t *testing.T) {
	d := smallSynth(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := synthOpts()
	o.Spill, o.SpillDir = true, filepath.Join(file, "spill")
	tr, err := New(context.Background(), d, o)
	if err == nil {
		tr.Close()
		t.Fatal("New with a spill directory under a file: no error")
	}
	if want := "train: --spill-dir: sample: spill directory: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %q, want it to start %q", err, want)
	}
	o.SpillDir = t.TempDir()
	tr, err = New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if ents, err := os.ReadDir(o.SpillDir); err != nil || len(ents) != 0 {
		t.Errorf("spill directory after the check: %v, %d entries", err, len(ents))
	}
}

// TestGivenCacheSizesFit: a feature cache sized by hand takes its room
// before the plan divides the rest, so every budget either is refused by
// PlanMemory (ErrBudget, naming the flags and a --mem that fits) or builds
// a trainer whose caches, working set and fixed state fit it. Before, the
// plan gave the other caches the whole cache budget beside the given
// size, and New failed its memory check after the profiling epoch.
func TestGivenCacheSizesFit(t *testing.T) {
	// Wide rows: the feature file (3 MiB) dwarfs the rest of the budget.
	d := storagetest.Generate(t, synth.Config{Nodes: 3000, FeatDim: 256, Classes: 4, Seed: 7}, nil)
	base := MinimumBudget(d, synthOpts())
	feat := d.NumNodes() * d.FeatRowBytes() // every row: more than the room at the smaller budgets
	// Below its own address table: refused before the profiling epoch.
	tiny := synthOpts()
	tiny.FeatCacheBytes = 1 << 10
	if _, err := PlanMemory(context.Background(), d, tiny, &MemPlanOptions{MemBytes: base + 4*feat}); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "address table") {
		t.Errorf("--feat-cache 1KiB: %v, want ErrBudget naming the address table", err)
	}
	if _, err := os.Stat(filepath.Join(d.Dir(), planner.ProfileDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a profile was made before --feat-cache 1KiB was refused: %v", err)
	}
	refused, built, suggested := 0, 0, 0
	raise := regexp.MustCompile(`raise --mem to ([0-9.]+ [KMG]iB)$`) // the exact least (not "at least")
	for k := range int64(9) {
		mem := base + k*feat/4
		o := synthOpts()
		o.FeatCacheBytes = feat
		mo := &MemPlanOptions{MemBytes: mem}
		mp, err := PlanMemory(context.Background(), d, o, mo)
		if err != nil {
			if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "--feat-cache") || !strings.Contains(err.Error(), "raise --mem to") {
				t.Fatalf("--mem %d: %v, want ErrBudget naming --feat-cache and a --mem", mem, err)
			}
			// The --mem it names is one that plans.
			if m := raise.FindStringSubmatch(err.Error()); m != nil {
				least, perr := humanize.ParseBytes(m[1])
				if perr != nil {
					t.Fatal(perr)
				}
				if _, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: int64(least)}); err != nil {
					t.Errorf("--mem %d named %s, which fails too: %v", mem, m[1], err)
				}
				suggested++
			}
			refused++
			continue
		}
		mp.Apply(o, mo)
		tr, err := New(context.Background(), d, o)
		if err != nil {
			t.Fatalf("--mem %d: planned, then New: %v", mem, err)
		}
		if m := tr.mem; m.TotalBytes > mem {
			t.Errorf("--mem %d: the trainer's memory use is %d", mem, m.TotalBytes)
		}
		tr.Close()
		built++
	}
	if refused == 0 || built == 0 || suggested == 0 {
		t.Errorf("%d budgets refused (%d naming the least --mem), %d built: want some of each", refused, suggested, built)
	}
}

// TestResumeOtherPartitioning: a checkpoint records the partitioning its
// batches came from (name, K, part.npy's checksum); resuming on a
// partitioning replaced since (partition --force) or on random batches
// warns, and resuming on the same one does not (the sweep's F61: k 1000
// became 500 without a word).
func TestResumeOtherPartitioning(t *testing.T) {
	d := ownSynth(t)
	parts := func(k int) sample.Partitions {
		t.Helper()
		if _, err := partition.Run(d, &partition.Options{Parts: k, Seed: 1, Name: "p", Force: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatal(err)
		}
		pf, err := sample.OpenPartitionFiles(d, d.Dir(), "p")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pf.Close() })
		return pf
	}
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir, o.Selection, o.Partitions = 1, dir, sample.ModePartition, parts(20)
	run(t, d, o)
	for _, tc := range []struct {
		name  string
		parts sample.Partitions // nil: random batches
		warn  bool
	}{
		{"same", o.Partitions, false},
		{"replaced", parts(10), true},
		{"random", nil, true},
	} {
		var log bytes.Buffer
		r := synthOpts()
		r.Epochs, r.Resume = 2, dir
		if tc.parts != nil {
			r.Selection, r.Partitions = sample.ModePartition, tc.parts
		}
		r.Logger = slog.New(slog.NewTextHandler(&log, nil))
		tr, err := New(context.Background(), d, r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tr.Close()
		if got := strings.Contains(log.String(), "another partitioning"); got != tc.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.name, got, tc.warn, log.String())
		}
	}
}

// TestPlanFileProfileOfOtherData: train --plan reads its plan's profile
// to rank the caches and recount the reads. A profile made on another
// dataset (its dataset_checksum) is refused, as 'ssdgnn plan' refuses it;
// one made on a partitioning replaced since (partition --force) is
// warned about, as 'ssdgnn plan' warns. Before, both were taken without
// a word (the sweep's run: a 50,000-node graph's profile copied into
// another 50,000-node graph trained with its caches ranked by the other
// graph's counts).
func TestPlanFileProfileOfOtherData(t *testing.T) {
	d := ownSynth(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	parts := func(k int) (sample.Partitions, *partition.Partitioning) {
		t.Helper()
		if _, err := partition.Run(d, &partition.Options{Parts: k, Seed: 1, Name: "p", Force: true, Logger: quiet}); err != nil {
			t.Fatal(err)
		}
		pt, err := partition.Open(d.Dir(), "p")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pt.Close() })
		pf, err := sample.NewPartitionFiles(d, pt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pf.Close() })
		return pf, pt
	}
	opts := func(pf sample.Partitions, pt *partition.Partitioning) (*Options, *MemPlanOptions) {
		o := synthOpts()
		o.Selection, o.Partitions, o.Logger = sample.ModePartition, pf, quiet
		return o, &MemPlanOptions{MemBytes: roomyBudget(d), Part: pt.Part(), Partition: "p", Cross: pt.Cross(), ProfileName: "x"}
	}
	o, mo := opts(parts(20))
	mp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	// The same partitioning (written again, the same assignment): no
	// warning.
	o, mo = opts(parts(20))
	mo.PlanFile, mo.ProfileName = mp.PlanPath, ""
	same, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(same.Warning, "partitioning") {
		t.Errorf("the same partitioning: warning %q", same.Warning)
	}
	// Replaced by another assignment: a warning naming it.
	o, mo = opts(parts(10))
	mo.PlanFile, mo.ProfileName = mp.PlanPath, ""
	re, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(re.Warning, `partitioning "p"`) || !strings.Contains(re.Warning, "assignment") {
		t.Errorf("a partitioning replaced since the profile: warning %q", re.Warning)
	}
	// The plan and its profile in another dataset of as many nodes.
	other := storagetest.Generate(t, synth.Config{Nodes: 3000, FeatDim: 16, Classes: 4, Seed: 8}, nil)
	if err := os.CopyFS(filepath.Join(other.Dir(), "profile"), os.DirFS(filepath.Join(d.Dir(), "profile"))); err != nil {
		t.Fatal(err)
	}
	r := synthOpts()
	r.Logger = quiet
	_, err = PlanMemory(context.Background(), other, r, &MemPlanOptions{MemBytes: roomyBudget(other), PlanFile: mp.PlanPath})
	if !errors.Is(err, ErrPlanMismatch) || !errors.Is(err, planner.ErrMismatch) || !strings.Contains(err.Error(), "made on dataset") ||
		!strings.Contains(err.Error(), mp.PlanPath) {
		t.Errorf("a plan whose profile was made on another dataset: %v", err)
	}
}

// TestPlanFileWithoutItsProfile: a plan whose profile is not in the
// dataset (a relabelled copy, a plan carried to another directory)
// trains with its cache sizes, the caches selected by degree, and its
// predictions left those of whole batches. Both are said: the warning
// names the missing profile, and where training cuts batches the
// comparison's note says its rows and reads are not comparable. Before,
// only an info log line said it, and the table printed negative
// measured rows and bytes (−194,751 rows not gathered, −73 MB of
// feature bytes saved: 'ssdgnn relabel syn synpm', then train synpm
// --plan of syn's profile).
func TestPlanFileWithoutItsProfile(t *testing.T) {
	d := ownSynth(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := synthOpts()
	o.Logger = quiet
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: roomyBudget(d), ProfileName: "gone", PlanOut: filepath.Join(t.TempDir(), "plan.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(d.Dir(), "profile", "gone")); err != nil {
		t.Fatal(err)
	}
	o = synthOpts()
	o.Logger, o.Epochs, o.MaxBatchRows, o.ScanBatches = quiet, 2, 120, 1
	mo := &MemPlanOptions{MemBytes: roomyBudget(d), PlanFile: mp.PlanPath}
	re, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(re.Warning, `profile "gone"`) || !strings.Contains(re.Warning, "degree") {
		t.Errorf("a plan whose profile is gone: warning %q", re.Warning)
	}
	re.Apply(o, mo)
	rep := run(t, d, o)
	if rep.PlanComparison == nil {
		t.Fatal("no comparison")
	}
	if !strings.Contains(rep.PlanComparison.Note, "whole batches") {
		t.Errorf("micro-batches against a whole-batch prediction: note %q", rep.PlanComparison.Note)
	}
	// The same cut planned from a profile that is there: recounted, no
	// such note.
	o = synthOpts()
	o.Logger, o.Epochs, o.MaxBatchRows, o.ScanBatches = quiet, 2, 120, 1
	mo = &MemPlanOptions{MemBytes: roomyBudget(d), ProfileName: "here"}
	here, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatal(err)
	}
	here.Apply(o, mo)
	if rep := run(t, d, o); rep.PlanComparison == nil || strings.Contains(rep.PlanComparison.Note, "whole batches") {
		t.Errorf("a plan recounted for the cut: comparison %+v", rep.PlanComparison)
	}
}

// TestEveryCacheGivenNoPlanTables: with every cache sized by hand (the
// feature and neighbour caches off, the history cache given), nothing is
// left to the plan, so its address tables are not reserved beside them:
// a history cache that fills the caches' room trains. Before, it was
// refused ("the plan needs 391 KiB of address tables beside them": train
// syn --mem 80MiB --feat-cache 0 --neighbor-cache 0 --hist-cache
// 3700000; sweep 28, P12).
func TestEveryCacheGivenNoPlanTables(t *testing.T) {
	d := ownSynth(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := synthOpts()
	o.Logger, o.Hidden = quiet, 64 // a history cache wider than the caches' room
	mem := MinimumBudget(d, o) + 64<<10
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: "all"})
	if err != nil {
		t.Fatal(err)
	}
	room := mp.Budget.Caches
	o = synthOpts()
	o.Logger, o.Epochs, o.Hidden = quiet, 1, 64
	o.FeatCacheBytes, o.NeighborCacheBytes = -1, -1
	o.HistCacheBytes = room - 1024
	w := o.withDefaults()
	given := givenCacheBytes(d, &w, ModelConfig{Kind: w.Model, InDim: d.FeatDim(), Hidden: w.Hidden, Layers: w.Layers}.HistWidth())
	if tables := planner.TableBytes(d.NumNodes(), true); given+tables <= room || given > room {
		t.Fatalf("room %d: a history cache of %d (%d counted) and the tables (%d): the case is not tested", room, o.HistCacheBytes, given, tables)
	}
	mo := &MemPlanOptions{MemBytes: mem, ProfileName: "all"}
	gp, err := PlanMemory(context.Background(), d, o, mo)
	if err != nil {
		t.Fatalf("every cache given, the history's %d of the caches' room %d: %v", o.HistCacheBytes, room, err)
	}
	gp.Apply(o, mo)
	rep := run(t, d, o)
	if rep.Memory.HistoryBytes <= 0 || rep.Memory.FeatureBytes != 0 || rep.Memory.NeighborBytes != 0 {
		t.Errorf("caches built: %+v", rep.Memory)
	}
	if tot := rep.Memory.FeatureBytes + rep.Memory.HistoryBytes + rep.Memory.NeighborBytes; tot > room {
		t.Errorf("caches %d bytes above their room %d", tot, room)
	}
}

// TestGivenCachesRefusalNamesMoreMem: refused for caches given beside the
// plan's tables, the error's "raise --mem to M" names more than the
// --mem it says was given. Both were rounded to the nearest MiB before,
// so a budget of 28.6 MiB read "--mem 29 MiB leaves ... raise --mem to
// 29 MiB".
func TestGivenCachesRefusalNamesMoreMem(t *testing.T) {
	d := ownSynth(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := synthOpts()
	o.Logger, o.Hidden = quiet, 64
	mem := MinimumBudget(d, o) + 64<<10
	mp, err := PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: "all"})
	if err != nil {
		t.Fatal(err)
	}
	o = synthOpts()
	o.Logger, o.Hidden = quiet, 64
	o.NeighborCacheBytes = -1 // the feature cache left to the plan: its tables are reserved
	o.HistCacheBytes = mp.Budget.Caches - 1024
	_, err = PlanMemory(context.Background(), d, o, &MemPlanOptions{MemBytes: mem, ProfileName: "all"})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("history cache of the caches' whole room beside the plan's tables: %v, want ErrBudget", err)
	}
	m := regexp.MustCompile(`but --mem (\S+ \S+) leaves .* raise --mem to (\S+ \S+)$`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("refusal %q names no --mem to raise to", err)
	}
	t.Logf("--mem %s given, %s to give", m[1], m[2])
	if m[1] == m[2] {
		t.Errorf("refusal says --mem %s was given and to raise it to %s: %q", m[1], m[2], err)
	}
}
