package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

func synthOpts() *Options {
	return &Options{Model: ModelSAGE, Hidden: 16, Epochs: 3, BatchSize: 50, Fanouts: []int{5, 5}, Workers: 2, Seed: *seedFlag}
}

func run(t *testing.T, d *storage.Dataset, o *Options) *Report {
	t.Helper()
	return runThen(t, d, o, nil)
}

// runThen is run calling after (when set) on the trained Trainer before it
// is closed.
func runThen(t *testing.T, d *storage.Dataset, o *Options, after func(*Trainer)) *Report {
	t.Helper()
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after != nil {
		after(tr)
	}
	return rep
}

type curve struct {
	loss, train, valid, test float64
}

func curves(rep *Report) []curve {
	var out []curve
	for _, e := range rep.Epochs {
		out = append(out, curve{e.Loss, e.TrainAcc, e.ValidAcc, e.TestAcc})
	}
	return out
}

func sameCurves(t *testing.T, a, b []curve, what string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d epochs", what, len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("%s: epoch %d: %+v vs %+v", what, i, a[i], b[i])
		}
	}
}

// TestStalenessOneIsExact: with staleness 1 no embedding is ever reused, so
// training gives bit-identical losses and accuracies to --no-hist.
func TestStalenessOneIsExact(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	for _, pol := range []histcache.Policy{histcache.PolicyStaleness, histcache.PolicyGrad} {
		o := synthOpts()
		o.NoHist = true
		exact := run(t, d, o)
		o = synthOpts()
		o.Staleness, o.HistPolicy = 1, pol
		s1 := run(t, d, o)
		sameCurves(t, curves(exact), curves(s1), "no-hist vs staleness 1 ("+pol.String()+")")
		for _, e := range s1.Epochs {
			if e.Reused != 0 {
				t.Errorf("staleness 1 reused %d embeddings", e.Reused)
			}
		}
	}
}

// TestStalenessAtDepth: with Staleness = D (2) no decision made during an
// epoch can reuse anything (it sees pushes D batches old), but the first
// batches of every later epoch are decided against the cache the previous
// epoch left, whose newest entries are one batch old: they reuse. The
// warning said "no embedding will be reused" (`--staleness 2` reused 30
// embeddings in 3 epochs of the 5,000-node graph); it now says where
// reuse remains.
func TestStalenessAtDepth(t *testing.T) {
	d := smallSynth(t)
	var log bytes.Buffer
	o := synthOpts()
	o.Staleness = 2
	o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	rep := run(t, d, o)
	var later int64
	for _, e := range rep.Epochs {
		if e.Epoch == 0 && e.Reused != 0 {
			t.Errorf("epoch 0 reused %d embeddings: no decision in it can see a push younger than D", e.Reused)
		}
		if e.Epoch > 0 {
			later += e.Reused
		}
	}
	if later == 0 {
		t.Errorf("no reuse at the later epochs' starts: %+v", rep.Epochs)
	}
	if !strings.Contains(log.String(), "history reuse needs staleness > reuse depth") {
		t.Errorf("no warning: %s", log.String())
	}
	if strings.Contains(log.String(), "no embedding will be reused") {
		t.Errorf("the warning says nothing is reused, but %d embeddings were: %s", later, log.String())
	}
}

// TestReuseAges: every embedding the trainer reuses is at most
// Staleness−1 iterations old at the batch that uses it (OUTRE's bound,
// histcache's i − t < Staleness; the ages come from the pushes the
// trainer made, not from the cache's own rule), at least one iteration
// old, and at least D old except in an epoch's first D batches (decided
// against the cache the previous epoch left). With Staleness = D+1 the
// boundary is reached: reuse within an epoch happens at age exactly D =
// Staleness−1, never at Staleness.
func TestReuseAges(t *testing.T) {
	d := smallSynth(t)
	const D = PipelineDepth
	for _, s := range []int64{D + 1, 6} {
		o := synthOpts()
		o.Staleness, o.BatchSize, o.Epochs = s, 20, 3
		type use struct{ iter, age int64 }
		var uses []use
		last := map[int64]int64{} // node -> iteration of its last push
		testReuse = func(iter int64, nodes []int64, pushed bool) {
			for _, v := range nodes {
				if pushed {
					last[v] = iter
					continue
				}
				t0, ok := last[v]
				if !ok {
					t.Errorf("iteration %d reused node %d, never pushed", iter, v)
					continue
				}
				uses = append(uses, use{iter, iter - t0})
			}
		}
		rep := run(t, d, o)
		testReuse = nil
		start := map[int64]int64{} // iteration -> position in its epoch
		var it int64
		for _, e := range rep.Epochs {
			for k := 0; k < e.Batches; k++ {
				start[it] = int64(k)
				it++
			}
		}
		atBoundary, early := 0, 0
		for _, u := range uses {
			k := start[u.iter]
			if u.age < 1 || u.age >= s {
				t.Fatalf("staleness %d: iteration %d reused an embedding %d iterations old", s, u.iter, u.age)
			}
			if k >= D && u.age < D {
				t.Fatalf("staleness %d: batch %d of its epoch (iteration %d) reused an embedding %d old, younger than D = %d", s, k, u.iter, u.age, D)
			}
			if k < D {
				early++
			}
			if u.age == s-1 {
				atBoundary++
			}
		}
		if len(uses) == 0 || atBoundary == 0 {
			t.Fatalf("staleness %d: %d reuses, %d at age %d: the boundary was not exercised", s, len(uses), atBoundary, s-1)
		}
		t.Logf("staleness %d: %d reuses, %d at age %d, %d in an epoch's first %d batches", s, len(uses), atBoundary, s-1, early, D)
	}
}

// TestReproducible: the same seed gives the same results with a pipelined
// sampler of two workers, history on (reuse decisions are made at fixed
// pipeline points), for every model.
func TestReproducible(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	for _, m := range []string{ModelSAGE, ModelGCN, ModelGAT} {
		o := synthOpts()
		o.Model, o.Heads = m, 2
		a := run(t, d, o)
		o = synthOpts()
		o.Model, o.Heads = m, 2
		b := run(t, d, o)
		sameCurves(t, curves(a), curves(b), m)
		var reused int64
		for _, e := range a.Epochs {
			reused += e.Reused
		}
		if reused == 0 {
			t.Errorf("%s: staleness 100 reused no embedding", m)
		}
		if last := a.Epochs[len(a.Epochs)-1]; last.TestAcc < 0.5 {
			t.Errorf("%s: test accuracy %.3f after 3 epochs on an easy graph", m, last.TestAcc)
		}
	}
}

// TestResume: training 2 epochs, checkpointing, and resuming for the rest
// gives the same results as an uninterrupted run.
func TestResume(t *testing.T) {
	d := smallSynth(t)
	full := run(t, d, synthOpts())
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir, o.CheckpointEvery = 2, dir, 1
	run(t, d, o)
	o = synthOpts()
	o.Resume = dir
	resumed := run(t, d, o)
	sameCurves(t, curves(full), curves(resumed), "uninterrupted vs resumed")
	// A damaged checkpoint is reported with its offset.
	p := filepath.Join(dir, CheckpointFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadCheckpointInfo(p)
	var ce *CheckpointError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("damaged checkpoint: %v", err)
	}
}

// runInterrupted trains on d with o under ctx, which a hook in o cancels,
// and fails the test unless the run returns no error and reports itself
// interrupted (its checkpoint written).
func runInterrupted(t *testing.T, ctx context.Context, d *storage.Dataset, o *Options) *Report {
	t.Helper()
	tr, err := New(ctx, d, o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Run(ctx)
	tr.Close()
	if err != nil || !rep.Interrupted {
		t.Fatalf("interrupted run: %v, interrupted %v", err, rep != nil && rep.Interrupted)
	}
	return rep
}

// cancelIn is a progress.Reporter that calls fn once the task described
// desc has reached at items (an epoch's batches).
type cancelIn struct {
	desc string
	at   int64
	fn   func()
}

func (c cancelIn) Start(desc string, _ int64, _ progress.Unit) progress.Task {
	if desc != c.desc {
		return progress.Discard.Start(desc, 0, progress.Items)
	}
	return &cancelTask{fn: func(n int64) {
		if n >= c.at {
			c.fn()
		}
	}}
}

// TestResumeMidEpochExact: without history, a run interrupted in the
// middle of an epoch and resumed gives the uninterrupted run's rows bit
// for bit, the interrupted epoch's loss and train accuracy included. That
// row used to report the batches after the resume only (loss 1.5086
// instead of 1.6314 on this graph), though the weights were the same.
func TestResumeMidEpochExact(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	o.NoHist = true
	full := run(t, d, o)
	dir := t.TempDir()
	o = synthOpts()
	o.NoHist, o.CheckpointDir = true, dir
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Progress = cancelIn{desc: "epoch 1", at: 4, fn: cancel}
	runInterrupted(t, ctx, d, o)
	o = synthOpts()
	o.NoHist, o.Resume = true, dir
	resumed := run(t, d, o)
	if len(resumed.Epochs) < 2 || resumed.Epochs[1].ResumedAt == 0 {
		t.Fatalf("epoch 1 was not resumed mid-way: %+v", resumed.Epochs)
	}
	sameCurves(t, curves(full), curves(resumed), "uninterrupted vs resumed mid-epoch")
}

// TestResumePastEpochEnd: a mid-epoch checkpoint resumed with batches
// that make its epoch shorter than the batches it already trained is
// refused before training, naming both counts; it used to skip every
// batch and report the epoch with loss 0 and train accuracy 0.
func TestResumePastEpochEnd(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.BatchSize, o.CheckpointDir, o.NoHist = 1, 20, dir, true
	run(t, d, o)
	// Rewrite the checkpoint as if cut after batch 6 of epoch 0.
	p := filepath.Join(dir, CheckpointFile)
	ck, err := readCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	ck.meta.Epoch, ck.meta.BatchDone, ck.meta.EpochStats = 0, 6, nil
	meta, err := json.Marshal(ck.meta)
	if err != nil {
		t.Fatal(err)
	}
	b := encodeCheckpoint([]section{{secMeta, meta}, {secParm, bytes.Clone(ck.parm)}, {secAdam, bytes.Clone(ck.adam)}, {secEnd, nil}})
	ck.close()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Batches of 20 make more than 6 batches; batches of 1000 one.
	o = synthOpts()
	o.Epochs, o.BatchSize, o.NoHist, o.Resume = 2, 1000, true, dir
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if rep, err := tr.Run(context.Background()); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "after batch 6, and this run's epoch has 1 batches") {
		var first EpochStats
		if rep != nil && len(rep.Epochs) > 0 {
			first = rep.Epochs[0]
		}
		t.Fatalf("resumed past the epoch's end: error %v, first epoch %d batches, loss %v; want ErrMismatch naming batch 6 and 1 batch", err, first.Batches, first.Loss)
	}
}

// TestCancel: cancelling mid-epoch stops every goroutine (goleak in
// TestMain), writes a checkpoint, and returns an interrupted report.
func TestCancel(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 50, dir
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	o.OnEpoch = func(EpochStats) {
		if n++; n == 2 {
			cancel()
		}
	}
	tr, err := New(ctx, d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := tr.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Checkpoint == "" {
		t.Fatalf("report %+v", rep)
	}
	info, err := ReadCheckpointInfo(rep.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch < 2 {
		t.Errorf("checkpoint at epoch %d", info.Epoch)
	}
}

// TestCoraFloor trains GCN on the bundled Cora (planetoid split) with the
// documented defaults and checks a loose accuracy floor.
func TestCoraFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	d := cora(t)
	rep := run(t, d, &Options{Model: ModelGCN, Hidden: 64, Epochs: 100, BatchSize: 140, Fanouts: []int{-1, -1}, NoHist: true, Seed: 1, EvalEvery: 100})
	t.Logf("GCN Cora test accuracy %.4f", rep.FinalTest)
	if rep.FinalTest < 0.75 {
		t.Errorf("test accuracy %.4f < 0.75", rep.FinalTest)
	}
}

// TestInFlightBounded: however many batches an epoch has, at most
// Options.InFlight gather buffers are alive at once, they are recycled
// (allocations do not grow with the number of batches), and every adopted
// input tensor is freed by the end of the epoch.
func TestInFlightBounded(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	for _, tc := range []struct {
		name     string
		inFlight int
		hist     bool
	}{
		{"depth 1", 1, false},
		{"depth 2", 2, false},
		{"depth 2 hist", 2, true},
		{"depth 3", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := synthOpts()
			o.Epochs, o.BatchSize, o.InFlight, o.NoHist = 2, 20, tc.inFlight, !tc.hist
			be, err := cpu.New(&cpu.Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			o.Backend = be
			tr, err := New(context.Background(), d, o)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			params := be.MemStats().Allocated
			rep, err := tr.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			batches := rep.Epochs[len(rep.Epochs)-1].Batches
			rs := tr.lastRing
			t.Logf("%d batches per epoch; ring %+v", batches, rs)
			if rs.Peak < 1 || rs.Peak > tc.inFlight {
				t.Errorf("%d gather buffers alive at once, want 1..%d", rs.Peak, tc.inFlight)
			}
			// A buffer is only reallocated when a batch exceeds its
			// capacity (1/8 slack): far fewer times than there are batches.
			if rs.Allocs > 4*tc.inFlight || rs.Allocs >= batches {
				t.Errorf("%d buffer allocations over %d batches (depth %d)", rs.Allocs, batches, tc.inFlight)
			}
			if got := be.MemStats().Allocated; got != params {
				t.Errorf("backend holds %d bytes after the run, %d before (an input tensor was not freed)", got, params)
			}
			if rep.Memory.InFlight != tc.inFlight {
				t.Errorf("report in-flight %d, want %d", rep.Memory.InFlight, tc.inFlight)
			}
		})
	}
}

// TestResumeCorruptHistory: a history section that its own decoder
// rejects is reported as a *CheckpointError at the checkpoint's offset of
// the bad field, and still matches the decoder's *histcache.CorruptError.
func TestResumeCorruptHistory(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir, o.CheckpointEvery = 1, dir, 1
	runThen(t, d, o, func(tr *Trainer) {
		if tr.hc == nil {
			t.Fatal("the test options train without a history cache")
		}
		ck, err := readCheckpoint(filepath.Join(dir, CheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		ck.hist = slices.Clone(ck.hist)
		const versionAt = 8 // after the 8-byte magic
		ck.hist[versionAt] ^= 0x7f
		err = tr.restore(ck)
		var ce *CheckpointError
		var he *histcache.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpoint) || !errors.As(err, &he) {
			t.Fatalf("corrupt history section: %v, want a *CheckpointError wrapping a *histcache.CorruptError", err)
		}
		if want := ck.histOff + versionAt; ce.Offset != want || he.Field != "version" {
			t.Errorf("error at offset %d, field %q; want offset %d (section at %d), field version: %v", ce.Offset, he.Field, want, ck.histOff, err)
		}
	})
}

// TestCancelMidEpochReleases: a run cancelled in the middle of an epoch
// releases every batch the pipeline held (the gather stage's early exits
// included) and every buffer, streamed or not, once the trainer is
// closed.
func TestCancelMidEpochReleases(t *testing.T) {
	d := smallSynth(t)
	for _, stream := range []string{StreamInputOff, StreamInputOn} {
		t.Run(stream, func(t *testing.T) {
			base := memacct.Read()
			o := synthOpts()
			o.Epochs, o.InFlight, o.StreamInput, o.BatchSize = 3, 1, stream, 20
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o.Progress = cancelAfter{fn: func(n int64) {
				if n == 3 {
					cancel() // batches in every stage of the pipeline
				}
			}}
			tr, err := New(ctx, d, o)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := tr.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Interrupted {
				t.Errorf("not interrupted: %+v", rep)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			after := memacct.Read()
			for _, p := range []memacct.Purpose{memacct.SampledBatches, memacct.BatchBuffers} {
				if left := after.Bytes[p] - base.Bytes[p]; left != 0 {
					t.Errorf("%s: %d bytes still counted after Close", p, left)
				}
			}
		})
	}
}

// cancelAtStart is a progress.Reporter that calls fn with the
// description of every task started (an epoch, a layer-wise layer).
type cancelAtStart struct{ fn func(desc string) }

func (c cancelAtStart) Start(desc string, _ int64, _ progress.Unit) progress.Task {
	c.fn(desc)
	return progress.Discard.Start(desc, 0, progress.Items)
}

// TestCancelDuringEval: a run interrupted while it evaluates a trained
// epoch keeps that epoch (the checkpoint counts it as trained), and the
// resuming run evaluates and reports it first, so the rows, the metrics
// lines (OnEpoch) and the accuracies equal an uninterrupted run's. The
// epoch was dropped, and after the last epoch the resume trained and
// evaluated nothing ("final valid 0.00%").
func TestCancelDuringEval(t *testing.T) {
	d := smallSynth(t)
	opts := func() *Options {
		o := synthOpts()
		o.Epochs, o.NoHist = 2, true
		return o
	}
	full := run(t, d, opts())
	for _, cut := range []int{1, 2} { // the first epoch's evaluation, the last one's
		t.Run(fmt.Sprintf("evaluation %d", cut), func(t *testing.T) {
			dir := t.TempDir()
			o := opts()
			o.CheckpointDir = dir
			var reported []EpochStats
			o.OnEpoch = func(e EpochStats) { reported = append(reported, e) }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			evals := 0
			o.Progress = cancelAtStart{fn: func(desc string) {
				if strings.HasPrefix(desc, "layer 1/") {
					if evals++; evals == cut {
						cancel()
					}
				}
			}}
			rep := runInterrupted(t, ctx, d, o)
			if len(reported) != cut-1 || len(rep.Epochs) != cut || !rep.Epochs[cut-1].EvalPending {
				t.Fatalf("interrupted in epoch %d's evaluation: %d rows reported, report epochs %+v; want %d reported and epoch %d kept, pending", cut-1, len(reported), rep.Epochs, cut-1, cut-1)
			}
			if cut == 1 {
				if s := Summary(rep); !strings.Contains(s, "not evaluated: interrupted during epoch 0's evaluation") {
					t.Errorf("summary %q", s)
				}
			}
			o.Resume, o.Progress = dir, nil
			if cut == 2 {
				pending, err := New(context.Background(), d, o)
				if err != nil {
					t.Fatal(err)
				}
				if !pending.EvalPending() || pending.EpochsDone() != 2 {
					t.Errorf("restored: EvalPending %v, %d epochs done; want true, 2", pending.EvalPending(), pending.EpochsDone())
				}
				pending.Close()
			}
			resumed := run(t, d, o)
			if len(reported) != 2 || reported[cut-1].Epoch != cut-1 || !reported[cut-1].Evaluated {
				t.Errorf("rows reported over both runs: %+v, want epochs 0 and 1, evaluated", reported)
			}
			sameCurves(t, curves(full), curves(resumed), "uninterrupted vs resumed after an interrupted evaluation")
			if resumed.FinalValid != full.FinalValid || resumed.FinalTest != full.FinalTest {
				t.Errorf("final valid/test %v/%v, uninterrupted %v/%v", resumed.FinalValid, resumed.FinalTest, full.FinalValid, full.FinalTest)
			}
		})
	}
}

// TestCheckpointKeepsOthers: a run that does not resume the checkpoint in
// its checkpoint directory keeps it as PrevCheckpointFile when it writes
// its own, and says so; a run that resumes it replaces it. A one-epoch
// GCN run in the default directory silently replaced a five-epoch SAGE
// checkpoint.
func TestCheckpointKeepsOthers(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	ck, prev := filepath.Join(dir, CheckpointFile), filepath.Join(dir, PrevCheckpointFile)
	o := synthOpts()
	o.Epochs, o.CheckpointDir, o.NoHist = 2, dir, true
	run(t, d, o)
	if _, err := os.Stat(prev); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("first run into an empty directory: %s: %v, want none", prev, err)
	}
	var logged bytes.Buffer
	o = synthOpts()
	o.Model, o.Epochs, o.CheckpointDir, o.NoHist = ModelGCN, 1, dir, true
	o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	run(t, d, o)
	kept, err := ReadCheckpointInfo(prev)
	if err != nil || kept.Model.Kind != ModelSAGE || kept.Epoch != 2 {
		t.Fatalf("kept checkpoint %+v, %v; want the SAGE run's, 2 epochs", kept, err)
	}
	if now, err := ReadCheckpointInfo(ck); err != nil || now.Model.Kind != ModelGCN {
		t.Fatalf("new checkpoint %+v, %v; want the GCN run's", now, err)
	}
	if !strings.Contains(logged.String(), "kept as "+PrevCheckpointFile) || !strings.Contains(logged.String(), "holds=\"sage, 2 epochs\"") {
		t.Errorf("log %q: want the warning naming what the checkpoint holds", logged.String())
	}
	// On a file system without hard links the old checkpoint is moved
	// aside instead: training goes on (it failed at its first checkpoint).
	defer func(f func(string, string) error) { linkFile = f }(linkFile)
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	o = synthOpts()
	o.Epochs, o.CheckpointDir, o.NoHist = 1, dir, true
	run(t, d, o)
	if kept, err := ReadCheckpointInfo(prev); err != nil || kept.Model.Kind != ModelGCN {
		t.Fatalf("without hard links: kept %+v, %v; want the GCN run's", kept, err)
	}
	if now, err := ReadCheckpointInfo(ck); err != nil || now.Model.Kind != ModelSAGE {
		t.Fatalf("without hard links: new checkpoint %+v, %v; want this SAGE run's", now, err)
	}
	// Resuming it continues it: nothing more is kept.
	if err := os.Remove(prev); err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	o.Epochs, o.Resume = 2, dir
	o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	run(t, d, o)
	if _, err := os.Stat(prev); !errors.Is(err, os.ErrNotExist) || strings.Contains(logged.String(), PrevCheckpointFile) {
		t.Errorf("resumed run: %s: %v, log %q; want nothing kept or said", prev, err, logged.String())
	}
}

// TestChangedOptions: the options that change what a resumed run
// computes are named with both values; the rest (workers, in-flight
// batches, epochs) and the history options of a run without history are
// not.
func TestChangedOptions(t *testing.T) {
	base := Options{Seed: 1, LR: 0.01, WeightDecay: 5e-4, BatchSize: 1000, Fanouts: []int{10, 10}, Selection: sample.ModePartition,
		EvalMode: EvalLayerwise, Staleness: 7, PGrad: 0.9, Workers: 2, InFlight: 2, Epochs: 3}
	for _, tc := range []struct {
		name string
		edit func(o *Options)
		hist bool
		want string
	}{
		{"same", func(*Options) {}, true, ""},
		{"process only", func(o *Options) { o.Workers, o.InFlight, o.Epochs = 8, 1, 100 }, true, ""},
		{"seed", func(o *Options) { o.Seed = 7 }, false, "--seed 7 (checkpoint: 1)"},
		{"lr", func(o *Options) { o.LR = 0.1 }, false, "--lr 0.1 (checkpoint: 0.01)"},
		{"batch size", func(o *Options) { o.BatchSize = 500 }, false, "--batch-size 500 (checkpoint: 1000)"},
		{"fanouts", func(o *Options) { o.Fanouts = []int{5, 5} }, false, "--fanouts 5,5 (checkpoint: 10,10)"},
		{"selection", func(o *Options) { o.Selection = sample.ModeRandom }, false, "--selection random (checkpoint: partition)"},
		{"normalize", func(o *Options) { o.NormalizeFeatures = true }, false, "--normalize-features true (checkpoint: false)"},
		{"eval", func(o *Options) { o.EvalMode = EvalSampled }, false, "--eval sampled (checkpoint: layerwise)"},
		{"staleness, history on", func(o *Options) { o.Staleness = 2 }, true, "--staleness 2 (checkpoint: 7)"},
		{"staleness, history off", func(o *Options) { o.Staleness = 2 }, false, ""},
		{"spill, history on", func(o *Options) { o.Spill, o.Staleness = true, 43 }, true, "--spill true (checkpoint: false); --staleness 43 (checkpoint: 7)"},
		{"spill, history off", func(o *Options) { o.Spill = true }, false, ""},
		{"pgrad under staleness", func(o *Options) { o.PGrad = 0.5 }, true, ""},
		{"policy", func(o *Options) { o.HistPolicy = histcache.PolicyGrad; o.PGrad = 0.5 }, true, "--hist-policy grad (checkpoint: staleness); --pgrad 0.5 (checkpoint: 0.9)"},
	} {
		was, now := base, base
		tc.edit(&now)
		if got := strings.Join(changedOptions(&was, &now, tc.hist), "; "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestResumeChangedOptionsSaid: resuming with another seed and learning
// rate trains on, and says so with both values; resuming with the same
// options says nothing.
func TestResumeChangedOptionsSaid(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 1, dir
	run(t, d, o)
	for _, tc := range []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"same", func(*Options) {}, ""},
		{"seed and lr", func(o *Options) { o.Seed, o.LR = o.Seed+1, 0.05 }, fmt.Sprintf("--seed %d (checkpoint: %d); --lr 0.05 (checkpoint: 0.01)", *seedFlag+1, *seedFlag)},
	} {
		var logged bytes.Buffer
		o := synthOpts()
		o.Epochs, o.Resume = 2, filepath.Join(dir, CheckpointFile)
		o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		tc.edit(o)
		tr, err := New(context.Background(), d, o)
		if err != nil {
			t.Fatal(err)
		}
		tr.Close()
		said := strings.Contains(logged.String(), "resuming with other training options")
		if tc.want == "" && said || tc.want != "" && (!said || !strings.Contains(logged.String(), tc.want)) {
			t.Errorf("%s: log %q, want %q", tc.name, logged.String(), tc.want)
		}
	}
}

// TestResumeOtherHistorySize: a checkpoint whose history cache another
// budget sized resumes with an empty history cache and says so (the
// weights and Adam's state carry over); it was refused ("snapshot does
// not match this cache"), after the profiling epoch of a new --mem, so a
// run could not move to a machine with another budget.
func TestResumeOtherHistorySize(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 1, dir
	run(t, d, o)
	var logged bytes.Buffer
	o = synthOpts()
	o.Epochs, o.Resume, o.HistCacheBytes = 2, dir, 16<<10
	o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatalf("resume with another history size: %v", err)
	}
	defer tr.Close()
	if s := tr.hc.Stats(); s.Valid != 0 {
		t.Errorf("history cache holds %d valid entries, want an empty one", s.Valid)
	}
	rep, err := tr.Run(context.Background())
	if err != nil || len(rep.Epochs) != 2 {
		t.Fatalf("resumed run: %v, %d epochs", err, len(rep.Epochs))
	}
	if !strings.Contains(logged.String(), "history cache starts empty") || !strings.Contains(logged.String(), "slots=") {
		t.Errorf("log %q: want the warning with both sizes", logged.String())
	}
}

// TestResumeMissing: a --resume with no checkpoint says so, and points at
// DIR/checkpoints when given the directory above it; it said only "open
// X: no such file or directory".
func TestResumeMissing(t *testing.T) {
	d := smallSynth(t)
	top := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 1, filepath.Join(top, "checkpoints")
	run(t, d, o)
	for _, tc := range []struct{ resume, want string }{
		{filepath.Join(top, "none.ssdc"), "train: no checkpoint to resume at " + filepath.Join(top, "none.ssdc")},
		{top, filepath.Join(top, "checkpoints", CheckpointFile) + " is one"},
	} {
		o := synthOpts()
		o.Resume = tc.resume
		_, err := New(context.Background(), d, o)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--resume %s: %v, want %q", tc.resume, err, tc.want)
		}
	}
}

// TestResumeModelMismatchNamesOption: --resume with a model option other
// than the checkpoint's is refused naming that option (an opterr.Field,
// which the CLI names as its flag) with both values. It printed both
// model configurations whole and named no flag.
func TestResumeModelMismatchNamesOption(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 1, dir
	run(t, d, o)
	for _, c := range []struct {
		name  string
		set   func(*Options)
		field opterr.Field
		text  string
	}{
		{"model", func(o *Options) { o.Model = ModelGCN }, "Model", "Model gcn (checkpoint: sage)"},
		{"hidden", func(o *Options) { o.Hidden = 32 }, "Hidden", "Hidden 32 (checkpoint: 16)"},
		{"layers", func(o *Options) { o.Layers, o.Fanouts = 3, []int{5, 5, 5} }, "Layers", "Layers 3 (checkpoint: 2)"},
		{"dropout", func(o *Options) { o.Dropout = 0.25 }, "Dropout", "Dropout 0.25 (checkpoint: 0.5)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := synthOpts()
			o.Resume = dir
			c.set(o)
			tr, err := New(context.Background(), d, o)
			if err == nil {
				tr.Close()
				t.Fatal("resumed with another model")
			}
			var oe *opterr.Error
			if !errors.Is(err, ErrMismatch) || !errors.As(err, &oe) || oe.Field != c.field || !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q: want ErrMismatch naming option %s as %q", err, c.field, c.text)
			}
		})
	}
}

// TestReportCheckpointEpochs: the report's checkpoint_epochs and
// checkpoint_batches are what the checkpoint written last holds (its
// META), after a whole run and after an interruption inside an epoch, and
// best_valid_epoch is the epoch of best_valid_acc.
func TestReportCheckpointEpochs(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.CheckpointDir = dir
	rep := run(t, d, o)
	info, err := ReadCheckpointInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.CheckpointEpochs != info.Epoch || rep.CheckpointBatches != info.BatchDone || info.Epoch != o.Epochs {
		t.Errorf("report holds %d epochs %d batches, checkpoint %d and %d; want %d epochs", rep.CheckpointEpochs, rep.CheckpointBatches, info.Epoch, info.BatchDone, o.Epochs)
	}
	if rep.BestEpoch < 0 || rep.BestEpoch >= len(rep.Epochs) {
		t.Fatalf("best_valid_epoch %d of %d epochs", rep.BestEpoch, len(rep.Epochs))
	}
	best := rep.Epochs[rep.BestEpoch]
	for _, e := range rep.Epochs {
		if e.ValidAcc > best.ValidAcc {
			t.Errorf("best_valid_epoch %d (valid %v), epoch %d has %v", rep.BestEpoch, best.ValidAcc, e.Epoch, e.ValidAcc)
		}
	}
	if best.ValidAcc != rep.BestValid || best.TestAcc != rep.TestAtBest {
		t.Errorf("best_valid_epoch %d has valid %v test %v, report %v %v", rep.BestEpoch, best.ValidAcc, best.TestAcc, rep.BestValid, rep.TestAtBest)
	}
	// Interrupted inside epoch 1.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o = synthOpts()
	o.CheckpointDir = t.TempDir()
	o.Progress = cancelIn{desc: "epoch 1", at: 4, fn: cancel}
	rep = runInterrupted(t, ctx, d, o)
	if info, err = ReadCheckpointInfo(o.CheckpointDir); err != nil {
		t.Fatal(err)
	}
	if rep.CheckpointEpochs != info.Epoch || rep.CheckpointBatches != info.BatchDone || info.Epoch != 1 || info.BatchDone == 0 {
		t.Errorf("interrupted: report holds %d epochs %d batches, checkpoint %d and %d", rep.CheckpointEpochs, rep.CheckpointBatches, info.Epoch, info.BatchDone)
	}
}

// TestNothingToTrain: a resumed checkpoint that holds --epochs epochs or
// more, whole or cut inside a later epoch, is said to leave nothing to
// train; one that holds fewer is not. The cut one (2 epochs and 4
// batches resumed with --epochs 2) trained nothing and said nothing.
func TestNothingToTrain(t *testing.T) {
	d := smallSynth(t)
	whole, cut := wholeAndCutCheckpoints(t, d)
	for _, tc := range []struct {
		name   string
		resume string
		epochs int
		want   string // "" for nothing said
	}{
		{"whole, as many", whole, 2, "already holds 2 epochs (--epochs 2): nothing to train"},
		{"whole, fewer", whole, 1, "already holds 2 epochs (--epochs 1)"},
		{"whole, more", whole, 3, ""},
		{"cut, at --epochs", cut, 1, "already holds 1 epochs and "},
		{"cut, more", cut, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := synthOpts()
			o.Epochs, o.Resume = tc.epochs, tc.resume
			tr, err := New(context.Background(), d, o)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			got := tr.NothingToTrain()
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckpointInterval: with CheckpointInterval due after every epoch
// (1 ns) and no CheckpointEvery, the checkpoint is there after each epoch,
// so a run killed outright keeps what it trained; with it negative (never
// by time) only the end writes one.
func TestCheckpointInterval(t *testing.T) {
	d := smallSynth(t)
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     []int // the checkpoint's epochs seen as epochs 1, 2, 3 end (-1: none)
	}{
		{"every epoch by time", time.Nanosecond, []int{-1, 1, 2}},
		{"never by time", -1, []int{-1, -1, -1}},
		{"default: ten minutes", 0, []int{-1, -1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := synthOpts()
			o.Epochs, o.CheckpointDir, o.NoHist, o.CheckpointInterval = 3, dir, true, tc.interval
			var got []int
			o.OnEpoch = func(EpochStats) {
				// Called before the epoch's own checkpoint: what a kill
				// at this point would leave.
				ck, err := ReadCheckpointInfo(filepath.Join(dir, CheckpointFile))
				switch {
				case errors.Is(err, os.ErrNotExist):
					got = append(got, -1)
				case err != nil:
					t.Fatal(err)
				default:
					got = append(got, ck.Epoch)
				}
			}
			rep := run(t, d, o)
			if !slices.Equal(got, tc.want) {
				t.Errorf("checkpoint epochs seen after epochs 1-3: %v, want %v", got, tc.want)
			}
			if ck, err := ReadCheckpointInfo(rep.Checkpoint); err != nil || ck.Epoch != 3 {
				t.Errorf("final checkpoint %+v, %v; want epoch 3", ck, err)
			}
		})
	}
}

// TestCheckpointWriteMemory: a checkpoint write allocates about one
// parameter's host copy (ModelConfig.CheckpointScratchBytes, counted in
// the budget's model bytes), not copies of the whole model: it downloaded
// W, M and V whole and joined M and V (five model copies), and train
// --hidden 20000 on Cora was OOM-killed in a cgroup of its --mem while
// writing (the review's R8).
func TestCheckpointWriteMemory(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	o.Hidden, o.Layers, o.Fanouts, o.Epochs, o.NoHist = 1024, 3, []int{5, 5, 5}, 1, true
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	model, largest := tr.paramBytes()
	scratch := tr.model.cfg.CheckpointScratchBytes()
	if scratch != largest {
		t.Fatalf("the budget counts %d bytes of checkpoint scratch, the largest parameter takes %d", scratch, largest)
	}
	if 2*scratch > model+model/2 {
		t.Fatalf("largest parameter %d of %d bytes: the test needs a model of several large parameters", scratch, model)
	}
	dir := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	memacct.ResetPeak()
	if _, err := tr.SaveCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// Counted where it is allocated, under its own purpose.
	if snap := memacct.Read(); snap.MaxBytes[memacct.Checkpoint] != scratch || snap.Bytes[memacct.Checkpoint] != 0 {
		t.Errorf("checkpoint scratch counted at most %d, %d after, want %d then 0", snap.MaxBytes[memacct.Checkpoint], snap.Bytes[memacct.Checkpoint], scratch)
	}
	got := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("checkpoint write allocated %d bytes; largest parameter %d, all parameters %d", got, scratch, model)
	if limit := scratch + 2<<20; got > limit {
		t.Errorf("checkpoint write allocated %d bytes, want at most one parameter's copy and 2 MiB (%d)", got, limit)
	}
}

// wholeAndCutCheckpoints trains d twice: whole holds the checkpoint of 2
// whole epochs, cut that of a run interrupted after 4 batches of its
// second epoch (epoch 1).
func wholeAndCutCheckpoints(t *testing.T, d *storage.Dataset) (whole, cut string) {
	t.Helper()
	whole = t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 2, whole
	run(t, d, o)
	cut = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o = synthOpts()
	o.CheckpointDir = cut
	o.Progress = cancelIn{desc: "epoch 1", at: 4, fn: cancel}
	runInterrupted(t, ctx, d, o)
	return whole, cut
}
