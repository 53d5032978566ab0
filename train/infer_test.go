package train

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/progress/progresstest"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestInfer checks Infer's files against Predict with full neighbourhoods
// (SAGE, where sampled -1 and layer-wise agree) on nodes in scrambled order
// with a repeat, in both modes.
func TestInfer(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Epochs: 1, Seed: *seedFlag})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	nodes := []int64{2999, 5, 17, 5, 1000, 0}
	nodes = append(nodes, d.TestIdx()...)
	want, err := tr.Predict(context.Background(), nodes, []int{-1, -1})
	if err != nil {
		t.Fatal(err)
	}
	c := tr.model.cfg.Classes
	// A killed earlier infer's temporary files beside the outputs (its pid
	// gone) are removed; the sweep's T8.
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{EvalLayerwise, EvalSampled} {
		dir := t.TempDir()
		o := &InferOptions{Mode: mode, Fanouts: []int{-1, -1}, PredPath: filepath.Join(dir, "p.npy"), LogitsPath: filepath.Join(dir, "l.npy")}
		var stale []string
		for _, p := range []string{o.PredPath, o.LogitsPath} {
			s := fmt.Sprintf("%s.tmp-%d-0-1", p, child.Process.Pid)
			if err := os.WriteFile(s, []byte("partial"), 0o644); err != nil {
				t.Fatal(err)
			}
			stale = append(stale, s)
		}
		rep, err := tr.Infer(context.Background(), nodes, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stale {
			if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: a killed write's temporary file: %v, want it removed", s, err)
			}
		}
		pred := readNpy(t, o.PredPath)
		logp := npy.AsFloat32(readNpy(t, o.LogitsPath))
		p32 := npy.AsInt32(pred)
		if len(p32) != len(nodes) || len(logp) != len(nodes)*c {
			t.Fatalf("%s: %d predictions, %d logits for %d nodes", mode, len(p32), len(logp), len(nodes))
		}
		correct, labelled := 0, 0
		for i, v := range nodes {
			if p := int32(argmax(want[i*c : (i+1)*c])); p32[i] != p {
				t.Errorf("%s: node %d (position %d) predicted %d, want %d", mode, v, i, p32[i], p)
			}
			for k := range c {
				if !closeTo(float64(logp[i*c+k]), float64(want[i*c+k])) {
					t.Errorf("%s: node %d logit %d: %v, want %v", mode, v, k, logp[i*c+k], want[i*c+k])
				}
			}
			if l := d.Labels()[v]; l >= 0 {
				labelled++
				if l == p32[i] {
					correct++
				}
			}
		}
		if rep.Labelled != labelled || rep.Correct != correct || (mode == EvalLayerwise) != (rep.Layerwise != nil) || rep.BytesRead <= 0 {
			t.Errorf("%s: report %+v, want %d of %d labelled correct", mode, rep, correct, labelled)
		}
	}
	if _, err := tr.Infer(context.Background(), []int64{3000}, nil); err == nil {
		t.Error("node out of range accepted")
	}
}

func readNpy(t *testing.T, path string) []byte {
	_, b := storagetest.ReadNPY(t, path)
	return b
}

// TestInferBudget checks InferOptions.MemBytes: a budget below the least
// is refused before anything is written, naming the least; a budget that
// leaves a small chunk bound gives the unbounded predictions in more
// chunks.
func TestInferBudget(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Seed: *seedFlag})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	nodes := d.TestIdx()
	dir := t.TempDir()
	want, err := tr.Infer(context.Background(), nodes, &InferOptions{PredPath: filepath.Join(dir, "want.npy")})
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small.npy")
	_, err = tr.Infer(context.Background(), nodes, &InferOptions{PredPath: small, MemBytes: 1 << 20})
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "is the least") || !strings.HasPrefix(err.Error(), "infer: memory budget too small: ") {
		t.Fatalf("--mem 1 MiB: %v, want infer's ErrBudget naming the least --mem", err)
	}
	if _, err := os.Stat(small); !os.IsNotExist(err) {
		t.Errorf("a refused inference left %s (%v)", small, err)
	}
	// The least it names is enough, and one byte less is not, at the
	// reserve's floor and above it (an eighth of the budget; more nodes
	// requested raise the rest).
	for _, n := range []int{len(nodes), 1 << 26} {
		least := inferLeast(tr.inferRest(n))
		_, err := tr.inferChunkBytes(n, &InferOptions{MemBytes: 1 << 20})
		if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "--mem "+ibytesUp(least)+" is the least") {
			t.Errorf("%d nodes: %v, want the least %s", n, err, ibytesUp(least))
		}
		if _, err := tr.inferChunkBytes(n, &InferOptions{MemBytes: least}); err != nil {
			t.Errorf("%d nodes: the least %d is refused: %v", n, least, err)
		}
		if _, err := tr.inferChunkBytes(n, &InferOptions{MemBytes: least - 1}); err == nil {
			t.Errorf("%d nodes: one byte below the least %d is accepted", n, least)
		}
		t.Logf("%d nodes: least --mem %s (reserve %s)", n, ibytes(least), ibytes(RuntimeReserve(least)))
	}
	// An explicit chunk bound (--eval-mem) above what the budget leaves
	// for chunks is refused, naming both; at it, it is taken. It was
	// taken as given, and OOM-killed in its cgroup.
	for _, mem := range []int64{64 << 20, 1 << 30} {
		left, err := tr.inferChunkBytes(len(nodes), &InferOptions{MemBytes: mem})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.inferChunkBytes(len(nodes), &InferOptions{MemBytes: mem, ChunkBytes: left + 1}); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "--eval-mem "+ibytes(left+1)+" exceeds what --mem "+ibytes(mem)) {
			t.Errorf("--mem %s, --eval-mem one byte above the %d it leaves: %v, want ErrBudget naming both", ibytes(mem), left, err)
		}
		if got, err := tr.inferChunkBytes(len(nodes), &InferOptions{MemBytes: mem, ChunkBytes: left}); err != nil || got != left {
			t.Errorf("--mem %s, --eval-mem %d (what it leaves): %d, %v", ibytes(mem), left, got, err)
		}
	}
	// The budget whose chunk bound is 256 KiB.
	const huge = 1 << 40
	left, err := tr.inferChunkBytes(len(nodes), &InferOptions{MemBytes: huge})
	if err != nil {
		t.Fatal(err)
	}
	// left = (mem − reserve − rest)·3/4, the reserve its floor at small
	// budgets.
	rest := huge - left*4/3 - RuntimeReserve(huge)
	mem := RuntimeReserve(0) + rest + (256<<10)*4/3
	got := filepath.Join(dir, "got.npy")
	rep, err := tr.Infer(context.Background(), nodes, &InferOptions{PredPath: got, MemBytes: mem})
	if err != nil {
		t.Fatal(err)
	}
	lw := rep.Layerwise
	t.Logf("--mem %d: chunk bound %d, chunks %v, stages %v", mem, lw.ChunkBytes, lw.chunks(), lw.stages())
	if lw.ChunkBytes > 260<<10 || lw.ChunkBytes < 250<<10 {
		t.Errorf("chunk bound %d, want about 256 KiB", lw.ChunkBytes)
	}
	if lw.Layers[0].Chunks < 2 {
		t.Errorf("%d chunks on layer 0 under 256 KiB", lw.Layers[0].Chunks)
	}
	if rep.Correct != want.Correct || !slices.Equal(readNpy(t, got), readNpy(t, filepath.Join(dir, "want.npy"))) {
		t.Errorf("predictions under the budget differ from the unbounded ones (%d and %d correct)", rep.Correct, want.Correct)
	}
	if tr.o.EvalMemBytes != 0 {
		t.Errorf("Infer left the trainer's chunk bound at %d", tr.o.EvalMemBytes)
	}
}

// TestCheckNodeList: the check made before a --nodes list is read
// refuses a budget the list's per-node arrays cannot fit (ErrBudget,
// infer's wording), and never a budget Infer accepts: it is a lower bound
// of the least Infer names. Without it a 12 M-id list under --mem 64MiB
// was OOM-killed in a 64 MiB cgroup while being read.
func TestCheckNodeList(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Seed: *seedFlag})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, n := range []int{len(d.TestIdx()), 1 << 26} {
		err := tr.CheckNodeList(int64(n), 64<<20)
		if refused := n == 1<<26; refused != (err != nil) {
			t.Errorf("%d nodes under 64 MiB: %v, refused %v", n, err, refused)
		}
		if err != nil && (!errors.Is(err, ErrBudget) || !strings.HasPrefix(err.Error(), "infer: memory budget too small: ")) {
			t.Errorf("%d nodes: %v, want infer's ErrBudget", n, err)
		}
		if least := inferLeast(tr.inferRest(n)); tr.CheckNodeList(int64(n), least) != nil {
			t.Errorf("%d nodes: refuses --mem %d, which Infer accepts", n, least)
		}
		if err := tr.CheckNodeList(int64(n), 0); err != nil {
			t.Errorf("%d nodes without a budget: %v", n, err)
		}
	}
}

// TestSampledInferMem: sampled inference fits --mem: with room it keeps
// the evaluation cut, below that it cuts finer (the same predictions),
// and below the finest cut's need it refuses, naming it; within the
// budget memacct's counted peak stays under the budget less the runtime
// reserve (a helper found `infer --mode sampled --mem 1` ran).
func TestSampledInferMem(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory is not counted")
	}
	t.Run("synth", func(t *testing.T) { testSampledInferMem(t, smallSynth(t), synthOpts()) })
	// Cora's degrees are below the fanouts: a batch has more input-layer
	// destinations a row than the estimate's formula, so the cut holds
	// them to it too.
	t.Run("cora", func(t *testing.T) {
		o := synthOpts()
		o.Fanouts, o.EvalFanouts, o.BatchSize = []int{10, 10}, []int{10, 10}, 140
		testSampledInferMem(t, cora(t), o)
	})
}

func testSampledInferMem(t *testing.T, d *storage.Dataset, o *Options) {
	tr := restoredAfterOneEpoch(t, d, o)
	nodes, fan := d.TestIdx(), tr.o.EvalFanouts
	whole, what := tr.sampledInferNeed(len(nodes), fan, 0)
	so := tr.sampledOptions(fan)
	leastRows := fanoutRows(microTargets(&so), so.Fanouts, d.NumNodes())
	least, _ := tr.sampledInferNeed(len(nodes), fan, leastRows)
	t.Logf("need %d bytes (%s); in micro-batches of %d rows %d", whole, what, leastRows, least)
	if least >= whole {
		t.Fatalf("the finest cut needs %d, the evaluation cut %d", least, whole)
	}
	if _, err := tr.Infer(context.Background(), nodes, &InferOptions{Mode: EvalSampled, MemBytes: least - 1}); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "even in micro-batches") ||
		!strings.HasPrefix(err.Error(), "infer: memory budget too small: ") {
		t.Errorf("--mem %d: %v, want ErrBudget naming the finest cut's need", least-1, err)
	}
	free, err := tr.Infer(context.Background(), nodes, &InferOptions{Mode: EvalSampled})
	if err != nil {
		t.Fatal(err)
	}
	for _, mem := range []int64{whole, (least + whole) / 2} {
		memacct.ResetPeak()
		rep, err := tr.Infer(context.Background(), nodes, &InferOptions{Mode: EvalSampled, MemBytes: mem})
		if err != nil {
			t.Fatalf("--mem %d: %v", mem, err)
		}
		if rep.Correct != free.Correct {
			t.Errorf("--mem %d: %d correct, %d without a budget", mem, rep.Correct, free.Correct)
		}
		if snap, room := memacct.Read(), mem-RuntimeReserve(mem); snap.Peak > room {
			t.Errorf("--mem %d: counted peak %d bytes (%v), more than the %d the budget leaves beside the reserve", mem, snap.Peak, snap.PeakBytes, room)
		}
	}
	if tr.evalBound.rows != 0 && int64(tr.evalBound.rows) < leastRows {
		t.Errorf("the finer cut stayed after Infer: %+v", tr.evalBound)
	}
}

// TestRestoreOptions checks that a trainer restored for inference reports
// through the process's logger and progress bars (infer -v): a bar per
// layer-wise layer and one per sampled pass, each counting every
// destination it computed, and the trainer's lines in the log.
func TestRestoreOptions(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 1, dir
	run(t, d, o)
	var log bytes.Buffer
	rec := &progresstest.Recorder{}
	tr, err := NewFromCheckpoint(context.Background(), d, dir, &RestoreOptions{Workers: 1, Progress: rec,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	nodes := d.TestIdx()
	if _, err := tr.Infer(context.Background(), nodes, nil); err != nil {
		t.Fatal(err)
	}
	fan := tr.o.EvalFanouts
	whole, _ := tr.sampledInferNeed(len(nodes), fan, 0)
	so := tr.sampledOptions(fan)
	least, _ := tr.sampledInferNeed(len(nodes), fan, fanoutRows(microTargets(&so), so.Fanouts, d.NumNodes()))
	if _, err := tr.Infer(context.Background(), nodes, &InferOptions{Mode: EvalSampled, MemBytes: (least + whole) / 2}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range rec.Tasks() {
		got = append(got, k.Desc)
		if !k.Finished() || k.Added() != k.Total || k.Total <= 0 {
			t.Errorf("task %q: added %d of %d, done %v; want every destination counted and the bar finished", k.Desc, k.Added(), k.Total, k.Finished())
		}
	}
	if want := []string{"layer 1/2", "layer 2/2", "sampled pass"}; !slices.Equal(got, want) {
		t.Errorf("progress tasks %q, want %q", got, want)
	}
	if last := rec.Tasks(); len(last) > 0 && last[len(last)-1].Total != int64(len(nodes)) {
		t.Errorf("sampled pass total %d, want the %d nodes", last[len(last)-1].Total, len(nodes))
	}
	for _, line := range []string{"layer-wise stage", "sampled inference cut finer to fit --mem"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, log.String())
		}
	}
}

// TestInferNodesErrNodeList: every refusal of an infer --nodes list wraps
// ErrNodeList (a list the budget cannot hold: ErrBudget, as infer words
// it), as the package's other errors wrap a sentinel: a missing file, a
// float array, a truncated one, an id out of range. Before, InferNodes
// (moved from cmd/ssdgnn) returned bare fmt errors.
func TestInferNodesErrNodeList(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Seed: *seedFlag})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	dir := t.TempDir()
	write := func(name string, dt npy.DType, shape []int64, b []byte) string {
		p := filepath.Join(dir, name)
		if _, err := npy.WriteFile(p, dt, shape, b); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out := make([]byte, 8)
	binary.LittleEndian.PutUint64(out, uint64(d.NumNodes()))
	trunc := write("trunc.npy", npy.Int64, []int64{2}, make([]byte, 16))
	if err := os.Truncate(trunc, 128+8); err != nil { // one id of two
		t.Fatal(err)
	}
	for _, c := range []struct{ name, spec, want string }{
		{"missing", filepath.Join(dir, "none.npy"), "no such file"},
		{"float", write("f.npy", npy.Float32, []int64{1}, make([]byte, 4)), "dtype"},
		{"truncated", trunc, "complete"},
		{"out of range", write("out.npy", npy.Int64, []int64{1}, out), "out of range"},
	} {
		_, err := tr.InferNodes(c.spec, 0)
		if !errors.Is(err, ErrNodeList) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrNodeList saying %q", c.name, err, c.want)
		}
	}
	big := write("big.npy", npy.Int64, []int64{1 << 20}, make([]byte, 8<<20))
	if _, err := tr.InferNodes(big, 1<<20); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "infer: memory budget too small") {
		t.Errorf("a list --mem cannot hold: %v, want infer's ErrBudget", err)
	}
}

// TestRestoreExplicitZeros: a checkpoint of a training with an option
// whose 0 New reads as its default (--dropout 0, --weight-decay 0: -1 in
// Options, stored resolved as 0) restores for inference with that 0, not
// the default. The model trained with dropout 0 was refused as another
// model's (dropout 0.5).
func TestRestoreExplicitZeros(t *testing.T) {
	d := smallSynth(t)
	for _, c := range []struct {
		name string
		set  func(*Options)
		get  func(*Options) float64
	}{
		{"dropout", func(o *Options) { o.Dropout = -1 }, func(o *Options) float64 { return o.Dropout }},
		{"weight-decay", func(o *Options) { o.WeightDecay = -1 }, func(o *Options) float64 { return o.WeightDecay }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := synthOpts()
			o.Epochs, o.CheckpointDir = 1, dir
			c.set(o)
			rep := run(t, d, o)
			if got := c.get(&rep.Options); got != 0 {
				t.Fatalf("trained with %s %v, want 0", c.name, got)
			}
			tr, err := NewFromCheckpoint(context.Background(), d, dir, nil)
			if err != nil {
				t.Fatalf("restoring a checkpoint trained with %s 0: %v", c.name, err)
			}
			defer tr.Close()
			if got := c.get(&tr.o); got != 0 {
				t.Errorf("restored with %s %v, want the checkpoint's 0", c.name, got)
			}
		})
	}
}

// TestInferReportsCheckpointPosition: Infer's report says what training
// the restored model had (the checkpoint's epochs and batches), for a
// checkpoint of a whole run and one of a run interrupted inside an epoch:
// infer predicted with a part-trained model without a word.
func TestInferReportsCheckpointPosition(t *testing.T) {
	d := smallSynth(t)
	whole, cut := wholeAndCutCheckpoints(t, d)
	for _, dir := range []string{whole, cut} {
		info, err := ReadCheckpointInfo(dir)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := NewFromCheckpoint(context.Background(), d, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := tr.Infer(context.Background(), d.TestIdx(), nil)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rep.CheckpointEpochs != info.Epoch || rep.CheckpointBatches != info.BatchDone || info.Epoch == 0 {
			t.Errorf("%s: report says %d epochs %d batches, the checkpoint holds %d and %d", dir, rep.CheckpointEpochs, rep.CheckpointBatches, info.Epoch, info.BatchDone)
		}
	}
	for _, c := range []struct {
		e, b int
		want string
	}{{2, 0, "epoch 1"}, {1, 3, "epoch 0 and 3 batches of epoch 1"}, {0, 2, "2 batches of epoch 0"}} {
		if got := ModelAfter(c.e, c.b); got != c.want {
			t.Errorf("ModelAfter(%d, %d) = %q, want %q", c.e, c.b, got, c.want)
		}
	}
}

// TestTrainEvalMemWithinBudget: under a budget, an EvalMemBytes above the
// chunk bound the budget gives evaluation (three quarters of the working
// set) is refused by New, naming --eval-mem and the most; at that bound,
// and without a budget, it is taken. It was taken as given, and train
// --mem 160MiB --eval-mem 1GiB was OOM-killed in a 160 MiB cgroup.
func TestTrainEvalMemWithinBudget(t *testing.T) {
	d := smallSynth(t)
	mem := roomyBudget(d)
	o := synthOpts()
	o.MemBytes = mem
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	most := tr.mem.WorkingSetBytes * 3 / 4
	tr.Close()
	for _, tc := range []struct {
		name      string
		mem, eval int64
		refused   bool
	}{
		{"above the bound", mem, 1 << 40, true},
		{"one byte above", mem, most + 1, true},
		{"at the bound", mem, most, false},
		{"no budget", 0, 1 << 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := synthOpts()
			o.MemBytes, o.EvalMemBytes = tc.mem, tc.eval
			tr, err := New(context.Background(), d, o)
			if err == nil {
				tr.Close()
			}
			if refused := errors.Is(err, ErrBudget) && strings.Contains(err.Error(), "--eval-mem "+ibytes(tc.eval)+" exceeds"); refused != tc.refused || (!tc.refused && err != nil) {
				t.Errorf("--eval-mem %d under --mem %d: %v; want refused %v", tc.eval, tc.mem, err, tc.refused)
			}
		})
	}
}

// TestInferOutputsTogether: a logits write that fails at the end (a full
// disk) leaves both outputs of an earlier infer as they were. Before, the
// predictions were committed first: this run's preds.npy beside the
// earlier run's logits (the file-system sweep's F6, on a full tmpfs).
func TestInferOutputsTogether(t *testing.T) {
	d := smallSynth(t)
	tr := restoredAfterOneEpoch(t, d, synthOpts())
	out := t.TempDir()
	opt := &InferOptions{PredPath: filepath.Join(out, "preds.npy"), LogitsPath: filepath.Join(out, "logits.npy")}
	// An earlier run's pair, for other nodes.
	if _, err := tr.Infer(context.Background(), d.TestIdx()[:10], opt); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, p := range []string{opt.PredPath, opt.LogitsPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = b
	}
	full := errors.New("no space left on device")
	testLogitsFlush = func() error { return full }
	defer func() { testLogitsFlush = nil }()
	if _, err := tr.Infer(context.Background(), d.TestIdx(), opt); !errors.Is(err, full) {
		t.Fatalf("a failing logits write: %v", err)
	}
	for p, b := range before {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s changed (%d bytes, was %d; %v): the outputs are no longer a pair", filepath.Base(p), len(got), len(b), err)
		}
	}
}

// restoredAfterOneEpoch trains d with o for one epoch into a temporary
// checkpoint directory and restores a trainer from it (one sampling
// worker), closed when the test ends.
func restoredAfterOneEpoch(t *testing.T, d *storage.Dataset, o *Options) *Trainer {
	t.Helper()
	dir := t.TempDir()
	o.Epochs, o.CheckpointDir = 1, dir
	run(t, d, o)
	tr, err := NewFromCheckpoint(context.Background(), d, dir, &RestoreOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
