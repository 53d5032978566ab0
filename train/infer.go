package train

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/iostat"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/sample"
)

// InferOptions configures Trainer.Infer. A nil *InferOptions is layer-wise
// inference writing nothing.
type InferOptions struct {
	// Mode is EvalLayerwise (default: exact) or EvalSampled.
	Mode string
	// Fanouts of sampled inference (default Options.EvalFanouts).
	Fanouts []int
	// PredPath, when set, receives the predicted class of every node as an
	// int32 [n] .npy in the order of the nodes; LogitsPath their
	// log-softmax rows as a float32 [n, classes] .npy. Both are written
	// atomically.
	PredPath   string
	LogitsPath string
	// MemBytes, when positive, is the whole process's budget (ssdgnn
	// infer --mem). Layer-wise inference then bounds its chunks by three
	// quarters of what is left after the runtime reserve, the memory
	// counted so far (the model), the per-node output arrays and the
	// pass's per-node state; below minEvalMemBytes Infer fails with
	// ErrBudget before reading anything, naming the least budget.
	// ChunkBytes, when positive, is that bound instead (--eval-mem).
	// Without either, DefaultEvalMemBytes (NewFromCheckpoint drops the
	// training's own --eval-mem).
	// Sampled inference keeps the training's micro-batch cut.
	MemBytes   int64
	ChunkBytes int64
}

// Validate checks the options Infer reads before it reads a checkpoint
// or a node list: the mode, and the budgets' signs. "infer --mode bogus"
// loaded the checkpoint and the nodes first, then said "eval mode
// \"bogus\"", naming no flag.
func (o *InferOptions) Validate() error {
	switch o.Mode {
	case "", EvalLayerwise, EvalSampled:
	default:
		return opterr.Errorf(ErrInvalidOptions, "%s %q (want %s or %s)", opterr.Field("Mode"), o.Mode, EvalLayerwise, EvalSampled)
	}
	if o.MemBytes < 0 {
		return opterr.Errorf(ErrInvalidOptions, "%s %d is negative (0: none)", opterr.Field("MemBytes"), o.MemBytes)
	}
	if o.ChunkBytes < 0 {
		return opterr.Errorf(ErrInvalidOptions, "%s %d is negative (0: the default)", opterr.Field("ChunkBytes"), o.ChunkBytes)
	}
	return nil
}

// inferArrayBytes is Infer's memory per requested node: the ids it is
// given (the caller's, held for the whole pass: ssdgnn infer's --nodes
// list), the sort order, the sorted ids, the predictions and their
// encoded copy.
const inferArrayBytes = 8 + 8 + 8 + 4 + 4

// lwFixedBytes bounds a layer-wise pass's per-node state on a graph of n
// nodes and L layers: the receptive-field sets, the chunk scratch set and
// the stages' rank indexes, an eighth of a byte a node each. GCN's
// degrees are the trainer's, counted since New.
func lwFixedBytes(n int64, layers int) int64 {
	return int64(2*layers+3) * ((n + 63) / 64 * 8)
}

// inferChunkBytes is the layer-wise chunk bound for o (see
// InferOptions.MemBytes) when inferring nodes of the dataset, 0 to keep
// the trainer's.
//
// A ChunkBytes above what MemBytes leaves for chunks is refused: it was
// taken as given, and infer --mem 64MiB --eval-mem 1GiB in a 64 MiB
// cgroup was OOM-killed (g400, 400k nodes).
func (t *Trainer) inferChunkBytes(nodes int, o *InferOptions) (int64, error) {
	if o.ChunkBytes > 0 && o.ChunkBytes < minEvalMemBytes {
		return 0, fmt.Errorf("%w: chunk bound %d bytes (--eval-mem), want at least %d", ErrInvalidOptions, o.ChunkBytes, minEvalMemBytes)
	}
	if o.MemBytes <= 0 {
		return o.ChunkBytes, nil
	}
	rest := t.inferRest(nodes)
	used := RuntimeReserve(o.MemBytes) + rest
	left := (o.MemBytes - used) * 3 / 4
	if left < minEvalMemBytes {
		return 0, budgetErrorf("infer", "--mem %s: the runtime reserve, the model, %d nodes' outputs and the pass's per-node state take %s, leaving %s for layer-wise chunks (at least %s); --mem %s is the least",
			ibytes(o.MemBytes), nodes, ibytes(used), ibytes(max(left, 0)), ibytes(minEvalMemBytes), ibytesUp(inferLeast(rest)))
	}
	if o.ChunkBytes > left {
		return 0, budgetErrorf("infer", "--eval-mem %s exceeds what --mem %s leaves for layer-wise chunks, %s (three quarters of what the runtime reserve, the model, %d nodes' outputs and the pass's per-node state, %s, leave): give --eval-mem %s or less, or a larger --mem",
			ibytes(o.ChunkBytes), ibytes(o.MemBytes), ibytes(left), nodes, ibytes(used), ibytesDown(left))
	}
	if o.ChunkBytes > 0 {
		return o.ChunkBytes, nil
	}
	return left, nil
}

// CheckNodeList refuses, before a caller reads a list of n requested
// nodes into memory (ssdgnn infer's --nodes file), a budget of mem bytes
// (0: none) that the list's per-node arrays cannot fit beside the runtime
// reserve and what is counted now (the model): Infer's own refusal comes
// after the list is read, and a list larger than the budget was
// OOM-killed in its memory cgroup before it. What it names is a lower
// bound; Infer's refusal names the least for the mode.
func (t *Trainer) CheckNodeList(n, mem int64) error {
	if mem <= 0 {
		return nil
	}
	need := memacct.Read().Total + inferArrayBytes*n + (1 << 20)
	if least := need + RuntimeReserve(need+need/7); least > mem {
		return budgetErrorf("infer", "--mem %s: the runtime reserve, the model and the per-node arrays of %d requested nodes take at least %s: give --mem %s or more, or fewer nodes",
			ibytes(mem), n, ibytesUp(least), ibytesUp(least))
	}
	return nil
}

// inferRest is what layer-wise inference of nodes needs besides the
// runtime reserve and its chunks: the memory counted now (the model), the
// per-node output arrays, the logits writer's buffer, and the pass's
// per-node state.
func (t *Trainer) inferRest(nodes int) int64 {
	return memacct.Read().Total + inferArrayBytes*int64(nodes) + (1 << 20) +
		lwFixedBytes(t.d.NumNodes(), len(t.model.layers))
}

// sampledInferNeed is what sampled inference of nodes at fanouts takes
// when its (micro-)batches hold at most rows input rows (0: the
// evaluation cut, t.evalBound): what is counted now (the model, the
// trainer's state), the per-node arrays, the evaluation sampler's workers
// (their id maps and the batches they build), one (micro-)batch's input
// rows gathered whole (as evaluation does: unstreamed), the feature reads'
// slots and the runtime reserve; what says so in words.
func (t *Trainer) sampledInferNeed(nodes int, fanouts []int, rows int64) (need int64, what string) {
	o := t.sampledOptions(fanouts)
	d, n := t.d, t.d.NumNodes()
	snap := memacct.Read()
	counted := snap.Total + inferArrayBytes*int64(nodes) + (1 << 20)
	workers := int64(samplingWorkers(o.Workers))
	sampler := workers * (sample.IDMapBytes(n) + sample.WorkerBytesBound(batchTargets(&o), o.Fanouts, n, d.NumEdges(), o.Source))
	if rows <= 0 {
		rows = t.evalCutRows(&o)
	}
	batch := batchBytes(d, &o, rows) + gatherBytes(d, &o, rows)
	// The feature reads' slots, made at the first gather and kept
	// (training counts them in its fixed state): what of them is not
	// counted yet.
	slots := max(0, featurecache.GatherSlotBytes(d, o.featureOptions())-snap.Bytes[memacct.BatchBuffers])
	rest := counted + sampler + batch + slots
	need = max(rest+RuntimeReserve(0), (rest*8+6)/7) // rest + RuntimeReserve(need) <= need
	return need, fmt.Sprintf("model and state %s, %d sampling workers %s, one batch of up to %d input rows %s, feature read slots %s, runtime reserve %s",
		ibytes(counted), workers, ibytes(sampler), rows, ibytes(batch), ibytes(slots), ibytes(RuntimeReserve(need)))
}

// evalCutRows is the input rows of the largest (micro-)batch sampled
// inference with o makes under the evaluation cut: the fanouts' bound,
// at most the cut's rows.
func (t *Trainer) evalCutRows(o *Options) int64 {
	rows := fanoutRows(batchTargets(o), o.Fanouts, t.d.NumNodes())
	if r := int64(t.evalBound.rows); r > 0 {
		rows = min(rows, r)
	}
	return rows
}

// sampledOptions is t's options for sampled inference at fanouts.
func (t *Trainer) sampledOptions(fanouts []int) Options {
	o := t.o.withDefaults()
	o.Fanouts, o.StreamInput = sample.FanoutsFor(t.d, fanouts), StreamInputOff
	return o
}

// sampledInferBound fits sampled inference of nodes into mem: the
// evaluation cut when it fits, else the most input rows per micro-batch
// whose need does (a finer cut: each target's output is the whole
// batch's, so the predictions do not change), else ErrBudget naming the
// need of the finest cut (MaxMicroBatches pieces).
func (t *Trainer) sampledInferBound(nodes int, fanouts []int, mem int64) (splitBound, error) {
	o := t.sampledOptions(fanouts)
	n := t.d.NumNodes()
	if need, _ := t.sampledInferNeed(nodes, fanouts, 0); need <= mem {
		// The need assumed the destinations of the estimate for its rows
		// (batchDst), which a batch at these fanouts may exceed where
		// degrees are below them: cut to them too.
		return splitBound{rows: t.evalBound.rows, dst: int(batchDst(&o, t.evalCutRows(&o)))}, nil
	}
	least, whole := fanoutRows(microTargets(&o), o.Fanouts, n), fanoutRows(batchTargets(&o), o.Fanouts, n)
	fits := func(r int64) bool { need, _ := t.sampledInferNeed(nodes, fanouts, r); return need <= mem }
	if !fits(least) {
		need, what := t.sampledInferNeed(nodes, fanouts, least)
		return splitBound{}, budgetErrorf("infer", "--mem %s: sampled inference needs about %s even in micro-batches of %d input rows (%s): raise --mem to %s, or infer layer-wise (the default), which fits a budget by its chunks",
			ibytes(mem), ibytes(need), least, what, ibytesUp(need))
	}
	r := largestFitting(least, whole, fits)
	return splitBound{rows: int(r), dst: int(batchDst(&o, r))}, nil
}

// inferLeast is the least budget M whose chunk bound (M − reserve −
// rest)·3/4 reaches minEvalMemBytes.
func inferLeast(rest int64) int64 {
	need := rest + (minEvalMemBytes*4+2)/3
	least := need + RuntimeReserve(0)
	if RuntimeReserve(least) > RuntimeReserve(0) {
		least = (need*8 + 6) / 7 // the reserve is an eighth of M
	}
	// Integer rounding: settle on the exact least.
	ok := func(m int64) bool { return (m-RuntimeReserve(m)-rest)*3/4 >= minEvalMemBytes }
	for !ok(least) {
		least++
	}
	for ok(least - 1) {
		least--
	}
	return least
}

// InferReport is the result of Infer.
type InferReport struct {
	Mode  string `json:"mode"`
	Nodes int    `json:"nodes"`
	// Labelled nodes (label >= 0) among Nodes, and the accuracy on them.
	Labelled int     `json:"labelled"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	Seconds  float64 `json:"seconds"`
	// BytesRead are the bytes the pass asked storage for: feature rows
	// and neighbour lists (and, layer-wise, the temporary arrays);
	// IOReadBytes the process's /proc/self/io read_bytes delta, what the
	// disk delivered (-1 when unavailable).
	BytesRead   int64 `json:"bytes_read"`
	IOReadBytes int64 `json:"io_read_bytes"`
	// Layerwise describes the layer-wise pass (nil in sampled mode).
	Layerwise *LayerwiseStats `json:"layerwise,omitempty"`
	// CheckpointEpochs and CheckpointBatches are the training the model
	// had when its checkpoint was written (NewFromCheckpoint): whole
	// epochs, and batches of the next (a checkpoint of an interrupted
	// run). Both 0 for a trainer not restored from one.
	CheckpointEpochs  int `json:"checkpoint_epochs"`
	CheckpointBatches int `json:"checkpoint_batches"`
}

// ModelAfter says, as train's table numbers epochs, what training the
// checkpoint's model had: "epoch 4", "epoch 1 and 3 batches of epoch 2"
// or "2 batches of epoch 0".
func ModelAfter(epochs, batches int) string {
	switch {
	case batches > 0 && epochs > 0:
		return fmt.Sprintf("epoch %d and %d batches of epoch %d", epochs-1, batches, epochs)
	case batches > 0:
		return fmt.Sprintf("%d batches of epoch 0", batches)
	case epochs > 0:
		return fmt.Sprintf("epoch %d", epochs-1)
	}
	return "no training"
}

// Infer predicts the class of every node of nodes (any order, repeats
// allowed), counts the accuracy on the labelled ones, and writes the
// files InferOptions names.
func (t *Trainer) Infer(ctx context.Context, nodes []int64, o *InferOptions) (*InferReport, error) {
	var opt InferOptions
	if o != nil {
		opt = *o
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.Mode == "" {
		opt.Mode = EvalLayerwise
	}
	if opt.Fanouts == nil {
		opt.Fanouts = t.o.EvalFanouts
	} else if len(opt.Fanouts) != t.o.Layers {
		return nil, opterr.Errorf(ErrInvalidOptions, "%s has %d entries, want one per layer (the checkpoint's model has %d)", opterr.Field("Fanouts"), len(opt.Fanouts), t.o.Layers)
	}
	n := t.d.NumNodes()
	for _, v := range nodes {
		if v < 0 || v >= n {
			return nil, fmt.Errorf("%w: node %d out of range [0,%d)", ErrInvalidOptions, v, n)
		}
	}
	if opt.Mode == EvalSampled && opt.MemBytes > 0 {
		b, err := t.sampledInferBound(len(nodes), opt.Fanouts, opt.MemBytes)
		if err != nil {
			return nil, err
		}
		if b != t.evalBound {
			if b.rows != t.evalBound.rows {
				t.o.Logger.Info("sampled inference cut finer to fit --mem", "mem_bytes", opt.MemBytes, "micro_batch_rows", b.rows)
			}
			defer func(prev splitBound) { t.evalBound = prev }(t.evalBound)
			t.evalBound = b
		}
	}
	if opt.Mode == EvalLayerwise {
		b, err := t.inferChunkBytes(len(nodes), &opt)
		if err != nil {
			return nil, err
		}
		if b > 0 {
			defer func(prev int64) { t.o.EvalMemBytes = prev }(t.o.EvalMemBytes)
			t.o.EvalMemBytes = b
		}
	}
	// What an infer killed outright (kill -9) left beside the outputs: its
	// temporary files, as large as what it wrote (the sweep's T8).
	for _, p := range []string{opt.PredPath, opt.LogitsPath} {
		if p != "" {
			if n, err := atomicfile.CleanStale(p); err == nil && n > 0 {
				t.o.Logger.Info("removed the temporary files of a killed earlier write", "path", p, "files", n)
			}
		}
	}
	arrays := inferArrayBytes * int64(len(nodes))
	memacct.Add(memacct.Inference, arrays)
	defer memacct.Add(memacct.Inference, -arrays)
	t0 := time.Now()
	io0, ioErr := iostat.Self()
	acc0 := t.d.Accounting().Snapshot()
	c := t.model.cfg.Classes
	// Positions of each node in nodes: order sorts them by node.
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return nodes[order[a]] < nodes[order[b]] })
	sorted := make([]int64, len(nodes))
	for k, i := range order {
		sorted[k] = nodes[i]
	}
	pred := make([]int32, len(nodes))
	var lw *logitsWriter
	if opt.LogitsPath != "" {
		var err error
		if lw, err = newLogitsWriter(opt.LogitsPath, len(nodes), c); err != nil {
			return nil, err
		}
		defer lw.abort()
	}
	rep := &InferReport{Mode: opt.Mode, Nodes: len(nodes), CheckpointEpochs: t.restored.epochs, CheckpointBatches: t.restored.batches}
	labels := t.d.Labels()
	st, err := t.logits(ctx, opt.Mode, nodes, opt.Fanouts, func(ids []int64, logp []float32) error {
		for r, v := range ids {
			row := logp[r*c : (r+1)*c]
			p := int32(argmax(row))
			k, _ := slices.BinarySearch(sorted, v)
			for ; k < len(sorted) && sorted[k] == v; k++ {
				if lab := labels[v]; lab >= 0 {
					rep.Labelled++
					if lab == p {
						rep.Correct++
					}
				}
				pred[order[k]] = p
				if lw != nil {
					if err := lw.row(order[k], row); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Accuracy = ratio(int64(rep.Correct), int64(rep.Labelled))
	// The logits are written out and made durable before the predictions
	// are committed, and renamed after them: a full disk or a failing
	// device leaves both outputs as they were. Before, the predictions
	// were committed first, and a logits write that failed (ENOSPC)
	// left this run's predictions beside an earlier run's logits (the
	// file-system sweep's F6). A kill between the two renames still can.
	if lw != nil {
		if err := lw.finish(); err != nil {
			return nil, err
		}
	}
	if opt.PredPath != "" {
		if err := writeInt32Npy(opt.PredPath, pred); err != nil {
			return nil, err
		}
	}
	if lw != nil {
		if err := lw.commit(); err != nil {
			return nil, err
		}
	}
	rep.Seconds = time.Since(t0).Seconds()
	rep.Layerwise = st
	for _, s := range subStages(t.d.Accounting().Snapshot(), acc0) {
		rep.BytesRead += s.BytesRead
	}
	if st != nil {
		// Layer 0's feature rows are in the accounting already.
		rep.BytesRead += st.BytesRead() - st.Layers[0].InputBytes
	}
	rep.IOReadBytes = -1
	if io1, err := iostat.Self(); err == nil && ioErr == nil {
		rep.IOReadBytes = io1.Sub(io0).ReadBytes
	}
	return rep, nil
}

// writeInt32Npy writes v as an int32 [len(v)] .npy, atomically.
func writeInt32Npy(path string, v []int32) error {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	_, err := npy.WriteFile(path, npy.Int32, []int64{int64(len(v))}, b)
	return err
}

// logitsWriter writes float32 [n, c] rows at any position of an atomic
// .npy, coalescing rows that arrive at consecutive positions.
type logitsWriter struct {
	f     *atomicfile.File
	off   int64
	c     int
	start int    // position of buf's first row
	buf   []byte // pending consecutive rows
}

func newLogitsWriter(path string, n, c int) (*logitsWriter, error) {
	hdr, err := npy.EncodeHeader(npy.Float32, []int64{int64(n), int64(c)})
	if err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(hdr); err != nil {
		f.Abort()
		return nil, err
	}
	// Size the file now: rows may arrive in any order.
	if n > 0 && c > 0 {
		if _, err := f.WriteAt([]byte{0}, int64(len(hdr))+int64(n)*int64(c)*4-1); err != nil {
			f.Abort()
			return nil, err
		}
	}
	return &logitsWriter{f: f, off: int64(len(hdr)), c: c}, nil
}

func (w *logitsWriter) row(pos int, row []float32) error {
	rb := 4 * w.c
	if len(w.buf) > 0 && (pos != w.start+len(w.buf)/rb || len(w.buf) >= 1<<20) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(w.buf) == 0 {
		w.start = pos
	}
	for _, x := range row {
		w.buf = binary.LittleEndian.AppendUint32(w.buf, math.Float32bits(x))
	}
	return nil
}

// testLogitsFlush, set by tests, is called before each logitsWriter write
// (a full disk there).
var testLogitsFlush func() error

func (w *logitsWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if testLogitsFlush != nil {
		if err := testLogitsFlush(); err != nil {
			return err
		}
	}
	_, err := w.f.WriteAt(w.buf, w.off+int64(w.start)*int64(4*w.c))
	w.buf = w.buf[:0]
	return err
}

// finish writes the pending rows and makes the file durable, uncommitted.
func (w *logitsWriter) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.f.Sync()
}

func (w *logitsWriter) commit() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.f.Commit()
}

func (w *logitsWriter) abort() { w.f.Abort() }
