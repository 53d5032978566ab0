package train

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

func TestReuseDepth(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *Options
		want int
	}{
		{"nil", nil, PipelineDepth},
		{"no spill", &Options{SpillChunk: 64, SpillAhead: 8}, PipelineDepth},
		{"spill defaults", &Options{Spill: true}, 16*2 + 4 + 2},
		{"chunk 1 ahead 1 in-flight 1", &Options{Spill: true, SpillChunk: 1, SpillAhead: 1, InFlight: 1}, 1*2 + 4 + 1},
		{"chunk 4 ahead 3", &Options{Spill: true, SpillChunk: 4, SpillAhead: 3}, 4*4 + 4 + 2},
		{"in-flight 3", &Options{Spill: true, SpillChunk: 8, SpillAhead: 1, InFlight: 3}, 8*2 + 4 + 3},
		{"in-flight 8 capped", &Options{Spill: true, SpillChunk: 8, SpillAhead: 1, InFlight: 8}, 8*2 + 4 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReuseDepth(tc.o)
			if got != tc.want {
				t.Errorf("ReuseDepth = %d, want %d", got, tc.want)
			}
			// The documented deadlock-free range: c ≤ D ≤ (A+1)·c + P + m + 4.
			w := tc.o.withDefaults()
			if w.Spill {
				m := min(w.InFlight, 3)
				if got < w.SpillChunk || got > (w.SpillAhead+1)*w.SpillChunk+w.InFlight+m+4 {
					t.Errorf("D %d outside the deadlock-free range for %+v", got, tc.o)
				}
			}
		})
	}
	if err := (&Options{SpillChunk: -1}).Validate(); err == nil {
		t.Error("negative spill chunk accepted")
	}
}

// spillFiles lists the spill files in dir.
func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "spill-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// runGuarded trains under a timeout that only guards against a deadlock:
// a run that hits it is reported as hung, never as slow.
func runGuarded(t *testing.T, o *Options) *Report {
	t.Helper()
	d := smallSynth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tr, err := New(ctx, d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := tr.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Interrupted {
		t.Fatalf("run did not finish within the guard timeout (deadlock?) with %+v", o)
	}
	return rep
}

// TestSpillNoHistExact: without history, reading the batches back from a
// spill file gives bit-identical training to sampling in memory, and the
// same neighbour-lookup statistics; no spill file is left behind.
func TestSpillNoHistExact(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	o := synthOpts()
	o.Epochs, o.NoHist = 2, true
	plain := runGuarded(t, o)
	dir := t.TempDir()
	o = synthOpts()
	o.Epochs, o.NoHist = 2, true
	o.Spill, o.SpillChunk, o.SpillAhead, o.SpillDir = true, 3, 2, dir
	spilled := runGuarded(t, o)
	sameCurves(t, curves(plain), curves(spilled), "in-memory vs spilled")
	for i := range plain.Epochs {
		if a, b := plain.Epochs[i].Lookups, spilled.Epochs[i].Lookups; a != b || a.Lookups == 0 {
			t.Errorf("epoch %d lookups: in-memory %+v, spilled %+v", i, a, b)
		}
		if a, b := plain.Epochs[i].InputNodes, spilled.Epochs[i].InputNodes; a != b {
			t.Errorf("epoch %d input nodes: %d vs %d", i, a, b)
		}
	}
	if f := spillFiles(t, dir); len(f) != 0 {
		t.Errorf("spill files left: %v", f)
	}
}

// TestSpillHistory: with history on, spilled training finishes (the guard
// timeout catches a deadlock) for several chunk, ahead and in-flight
// settings, reuses embeddings when Staleness exceeds the reuse depth, and
// is reproducible.
func TestSpillHistory(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	for _, tc := range []struct {
		name                   string
		chunk, ahead, inFlight int
	}{
		{"chunk 1 ahead 1 in-flight 1", 1, 1, 1},
		{"chunk 3 ahead 1", 3, 1, 2},
		{"chunk 5 ahead 3 in-flight 3", 5, 3, 3},
		{"chunk 8 ahead 2", 8, 2, 2},
		{"chunk 64 ahead 1", 64, 1, 2}, // one chunk holds the whole epoch
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := func() *Options {
				o := synthOpts()
				o.Epochs, o.Staleness, o.BatchSize = 2, 200, 8 // ~45 batches per epoch
				o.Spill, o.SpillChunk, o.SpillAhead, o.InFlight, o.SpillDir = true, tc.chunk, tc.ahead, tc.inFlight, t.TempDir()
				return o
			}
			o := opts()
			a := runGuarded(t, o)
			if f := spillFiles(t, o.SpillDir); len(f) != 0 {
				t.Errorf("spill files left: %v", f)
			}
			b := runGuarded(t, opts())
			sameCurves(t, curves(a), curves(b), "two spilled runs")
			var reused int64
			for i, e := range a.Epochs {
				reused += e.Reused
				if e.Reused != b.Epochs[i].Reused {
					t.Errorf("epoch %d reused %d vs %d", i, e.Reused, b.Epochs[i].Reused)
				}
			}
			t.Logf("D %d, %d batches/epoch, reused %d", ReuseDepth(o), a.Epochs[0].Batches, reused)
			if reused == 0 {
				t.Errorf("staleness %d > D %d reused nothing", o.Staleness, ReuseDepth(o))
			}
		})
	}
}

// cancelAfter is a progress.Reporter that calls fn after every batch.
type cancelAfter struct{ fn func(n int64) }

func (c cancelAfter) Start(string, int64, progress.Unit) progress.Task { return &cancelTask{fn: c.fn} }

type cancelTask struct {
	fn func(int64)
	n  int64
}

func (c *cancelTask) Add(n int64) {
	c.n += n
	c.fn(c.n)
}
func (c *cancelTask) Describe(string) {}
func (c *cancelTask) Done()           {}

// TestSpillCleanup: the spill file exists while an epoch runs and is gone
// after every epoch and after a mid-epoch cancellation.
func TestSpillCleanup(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.NoHist = 50, true
	o.Spill, o.SpillChunk, o.SpillDir = true, 2, dir
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var during atomic.Int64
	epochs := 0
	o.OnEpoch = func(EpochStats) {
		epochs++
		if f := spillFiles(t, dir); len(f) != 0 {
			t.Errorf("after epoch %d: spill files %v", epochs, f)
		}
	}
	o.Progress = cancelAfter{fn: func(n int64) {
		if n == 3 && len(spillFiles(t, dir)) == 1 {
			during.Add(1)
		}
		if n == 5 && epochs == 1 {
			cancel() // mid-epoch of the second epoch
		}
	}}
	tr, err := New(ctx, d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := tr.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || epochs != 1 {
		t.Fatalf("interrupted %v after %d epochs", rep.Interrupted, epochs)
	}
	if during.Load() == 0 {
		t.Error("no spill file seen while an epoch ran")
	}
	if f := spillFiles(t, dir); len(f) != 0 {
		t.Errorf("after cancel: spill files %v", f)
	}
}

// TestSpillStalenessWarning: New warns when Staleness does not exceed the
// reuse depth, and not otherwise.
func TestSpillStalenessWarning(t *testing.T) {
	d := smallSynth(t)
	for _, tc := range []struct {
		staleness int64
		warn      bool
	}{{38, true}, {39, false}} {
		var buf bytes.Buffer
		o := synthOpts()
		o.Spill, o.Staleness, o.SpillDir = true, tc.staleness, t.TempDir()
		o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		tr, err := New(context.Background(), d, o)
		if err != nil {
			t.Fatal(err)
		}
		tr.Close()
		if got := strings.Contains(buf.String(), "staleness > reuse depth"); got != tc.warn {
			t.Errorf("staleness %d (D %d): warned %v, want %v; log %q", tc.staleness, ReuseDepth(o), got, tc.warn, buf.String())
		}
	}
}

// TestSpillDepthRange: depths c (the lower bound), the old upper bound
// (A+1)·c + P + min(InFlight, 3) + 4, and beyond it finish (the guard
// timeout catches a deadlock). Past the old upper bound the writer, paused
// at SpillAhead chunks, deadlocked; with history it now keeps the chunks
// of D + InFlight batches announced (Trainer.spillAhead).
func TestSpillDepthRange(t *testing.T) {
	d := smallSynth(t)
	for _, cfg := range []struct{ chunk, ahead, inFlight int }{{3, 1, 2}, {4, 2, 1}} {
		c, a, p := cfg.chunk, cfg.ahead, cfg.inFlight
		for _, depth := range []int{c, (a+1)*c + p + min(p, 3) + 4, (a+1)*c + p + min(p, 3) + 5, (a+1)*c + p + min(p, 3) + 30} {
			name := fmt.Sprintf("c%d A%d P%d D%d", c, a, p, depth)
			t.Run(name, func(t *testing.T) {
				o := synthOpts()
				o.Epochs, o.Staleness, o.BatchSize = 1, 200, 8
				o.Spill, o.SpillChunk, o.SpillAhead, o.InFlight, o.SpillDir = true, c, a, p, t.TempDir()
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				tr, err := New(ctx, d, o)
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				tr.depth = depth
				rep, err := tr.Run(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Interrupted {
					t.Fatalf("depth %d did not finish within the guard timeout (deadlock)", depth)
				}
			})
		}
	}
}

// TestStalenessEpochWarning: New warns when Staleness spans more than an
// epoch's batches (history may then come from earlier epochs' models),
// and not otherwise or without history.
func TestStalenessEpochWarning(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	per := (int64(len(d.TrainIdx())) + int64(o.BatchSize) - 1) / int64(o.BatchSize)
	edge := per + PipelineDepth // one epoch of ages past the reuse depth
	for _, tc := range []struct {
		staleness int64
		noHist    bool
		warn      bool
	}{{0, false, false}, {edge, false, false}, {edge + 1, false, true}, {edge + 1, true, false}} {
		var buf bytes.Buffer
		o := synthOpts()
		o.Staleness, o.NoHist = tc.staleness, tc.noHist
		o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		tr, err := New(context.Background(), d, o)
		if err != nil {
			t.Fatal(err)
		}
		tr.Close()
		if got := strings.Contains(buf.String(), "more than an epoch of batches"); got != tc.warn {
			t.Errorf("staleness %d, %d batches per epoch, no-hist %v: warned %v, want %v; log %q", tc.staleness, per, tc.noHist, got, tc.warn, buf.String())
		}
	}
}

// TestStalenessDefault: Staleness 0 is one epoch of batches, both for
// training alone and for the profile PlanMemory makes; training from a
// plan file takes the bound the plan's profile modelled.
func TestStalenessDefault(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	per := histcache.EpochStaleness(int64(len(d.TrainIdx())), o.BatchSize, PipelineDepth)
	if per < 2 || per >= histcache.DefaultStaleness {
		t.Fatalf("test graph has %d batches an epoch; want 2..99 to tell the defaults apart", per)
	}
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Options().Staleness; got != per {
		t.Errorf("default staleness %d, want one epoch of batches past the reuse depth, %d", got, per)
	}
	tr.Close()
	if o.Staleness != 0 {
		t.Errorf("New wrote the resolved staleness back into the caller's options: %d", o.Staleness)
	}

	big := MinimumBudget(d, o) + 64*d.NumNodes() + 400*d.FeatRowBytes() + WorkingSet(d, o, nil).Bytes
	mp, err := PlanMemory(context.Background(), d, synthOpts(), &MemPlanOptions{MemBytes: big, ProfileName: "stale-default"})
	if err != nil {
		t.Fatal(err)
	}
	if got := mp.Profile.Meta.Staleness; got != per {
		t.Errorf("profile made with the default modelled staleness %d, want %d", got, per)
	}
	// A plan whose profile modelled another bound: training adopts it, so
	// the plan's history predictions hold.
	other := per + 3
	so := synthOpts()
	so.Staleness = other
	mp2, err := PlanMemory(context.Background(), d, so, &MemPlanOptions{MemBytes: big, ProfileName: "stale-other"})
	if err != nil {
		t.Fatal(err)
	}
	ro := synthOpts()
	fromPlan, err := PlanMemory(context.Background(), d, ro, &MemPlanOptions{MemBytes: big, PlanFile: mp2.PlanPath})
	if err != nil {
		t.Fatal(err)
	}
	fromPlan.Apply(ro, nil)
	tr, err = New(context.Background(), d, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got := tr.Options().Staleness; got != other {
		t.Errorf("training from a plan profiled with staleness %d used %d", other, got)
	}
}

// TestSpillMicroBatches: with history, spilled batches cut into
// micro-batches finish at the default reuse depth. D's upper bound counts
// the pipeline between the spill reader and compute in batches, but its
// stages hold micro-batches, so the reader can stand one batch past
// compute; the writer, paused with A chunks announced, then never reached
// the batch whose request compute waited for (a 1M-node graph under
// --mem 200MiB --spill stopped after 14 of 100 batches). The reuse
// protocol bounds the writer's lead itself, so the announcements no
// longer do with history on.
func TestSpillMicroBatches(t *testing.T) {
	for _, cfg := range []struct{ chunk, ahead, inFlight, micro int }{{3, 1, 2, 4}, {4, 1, 1, 8}, {16, 1, 2, 4}} {
		t.Run(fmt.Sprintf("c%d A%d P%d k%d", cfg.chunk, cfg.ahead, cfg.inFlight, cfg.micro), func(t *testing.T) {
			o := synthOpts()
			o.Epochs, o.Staleness, o.BatchSize = 1, 200, 8
			o.Spill, o.SpillChunk, o.SpillAhead, o.InFlight, o.SpillDir = true, cfg.chunk, cfg.ahead, cfg.inFlight, t.TempDir()
			o.MicroBatches = cfg.micro
			runGuarded(t, o) // fails the test on a deadlock
		})
	}
}
