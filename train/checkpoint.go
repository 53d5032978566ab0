package train

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"

	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/decbuf"
	"github.com/ssdgnn/ssdgnn/internal/memacct"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Checkpoint format constants (see docs/train.md).
const (
	CheckpointMagic   = "SSDGCKPT"
	CheckpointVersion = 1
	// CheckpointFile is the file name written into Options.CheckpointDir.
	CheckpointFile = "checkpoint.ssdc"
	// PrevCheckpointFile is where a run that did not resume the
	// checkpoint already in Options.CheckpointDir keeps it when it writes
	// its own (one generation: an older one is replaced).
	PrevCheckpointFile = "checkpoint.prev.ssdc"
	// DefaultCheckpointDir is where train writes its checkpoint and infer
	// reads it when neither is told (under the dataset's directory).
	DefaultCheckpointDir = "checkpoints"
)

// Section tags.
const (
	secMeta = "META"
	secParm = "PARM"
	secAdam = "ADAM"
	secHist = "HIST"
	secEnd  = "END "
)

// CheckpointError reports a damaged checkpoint: the file, the byte offset of
// the field that failed and why.
type CheckpointError struct {
	File   string
	Offset int64
	Reason string
	// Err is the section decoder's own error, when one failed (a
	// *histcache.CorruptError, whose offset is relative to its section).
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("train: bad checkpoint %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCheckpoint and the section decoder's error, if any.
func (e *CheckpointError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCheckpoint, e.Err}
	}
	return []error{ErrCheckpoint}
}

// checkpointMeta is the META section (JSON).
type checkpointMeta struct {
	Dataset  string `json:"dataset"`
	NumNodes int64  `json:"num_nodes"`
	// DatasetSums name the contents trained on (datasetSums): the
	// dataset.json checksum, and a relabelled copy's source's. Absent in
	// checkpoints written before the field existed.
	DatasetSums []string `json:"dataset_checksums,omitempty"`
	// IDSpace names the node numbering the history section's ids are in:
	// empty for a dataset's own ids, idSpace(d) for a relabelled one.
	IDSpace   string      `json:"id_space,omitempty"`
	Model     ModelConfig `json:"model"`
	Options   Options     `json:"options"`
	Epoch     int         `json:"epoch"`      // epoch in progress (== epochs done when BatchDone is 0)
	BatchDone int         `json:"batch_done"` // batches of Epoch already trained
	Step      int64       `json:"step"`       // Adam steps done
	Elapsed   float64     `json:"elapsed_s"`
	History   bool        `json:"history"`
	// Partial holds the loss and train-accuracy sums of Epoch's first
	// BatchDone batches (absent when BatchDone is 0, and in checkpoints
	// written before the field existed: the resumed epoch then reports
	// its remaining batches only).
	Partial *epochPartial `json:"partial,omitempty"`
	// Partitioning names the partitioning the batches came from
	// (partitioningOf): "" for random batches, and in checkpoints
	// written before the field existed.
	Partitioning string       `json:"partitioning,omitempty"`
	EpochStats   []EpochStats `json:"epoch_stats"`
	Written      time.Time    `json:"written"`
}

// SaveCheckpoint writes the trainer's state atomically to
// dir/CheckpointFile and returns the path.
func (t *Trainer) SaveCheckpoint(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, CheckpointFile)
	meta := checkpointMeta{Dataset: t.d.Manifest().Name, NumNodes: t.d.NumNodes(), DatasetSums: datasetSums(t.d), IDSpace: idSpace(t.d), Model: t.model.cfg, Options: t.o,
		Epoch: t.epoch, BatchDone: t.batchDone, Step: t.step, Elapsed: t.elapsed + time.Since(t.start).Seconds(),
		History: t.hc != nil, Partitioning: partitioningOf(&t.o), EpochStats: t.epochStats, Written: time.Now().UTC()}
	if t.batchDone > 0 {
		p := t.partial
		meta.Partial = &p
	}
	if meta.EpochStats == nil {
		meta.EpochStats = []EpochStats{} // [], not null, before any epoch
	}
	mj, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Abort()
	w := bufio.NewWriterSize(f, 1<<20)
	hdr := make([]byte, 0, 16)
	hdr = append(hdr, CheckpointMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, CheckpointVersion)
	if _, err := w.Write(hdr); err != nil {
		return "", err
	}
	// section writes one section: its tag and size, what body writes
	// (size bytes, checked) and the checksum of those bytes.
	section := func(tag string, size int64, body func(io.Writer) (int64, error)) error {
		var h [12]byte
		copy(h[:4], tag)
		binary.LittleEndian.PutUint64(h[4:], uint64(size))
		if _, err := w.Write(h[:]); err != nil {
			return err
		}
		d := xxhash.New()
		n, err := body(io.MultiWriter(w, d))
		if err != nil {
			return err
		}
		if n != size {
			return fmt.Errorf("train: checkpoint section %s: %d bytes written, %d announced", tag, n, size)
		}
		var c [8]byte
		binary.LittleEndian.PutUint64(c[:], d.Sum64())
		_, err = w.Write(c[:])
		return err
	}
	put := func(b []byte) func(io.Writer) (int64, error) {
		return func(w io.Writer) (int64, error) { n, err := w.Write(b); return int64(n), err }
	}
	if err := section(secMeta, int64(len(mj)), put(mj)); err != nil {
		return "", err
	}
	// The parameters and Adam's moments stream into the file a parameter
	// at a time: downloaded whole, they were five copies of the model
	// outside every budget (W, M and V, then M and V joined), and
	// train --hidden 20000 on Cora (57 M parameters) was OOM-killed in a
	// cgroup of its --mem while writing them (the review's R8).
	t.beMu.Lock()
	defer t.beMu.Unlock()
	total, largest := t.paramBytes()
	buf := make([]float32, largest/4) // ModelConfig.CheckpointScratchBytes, counted in the budget
	memacct.Add(memacct.Checkpoint, largest)
	defer memacct.Add(memacct.Checkpoint, -largest)
	w1 := func(p *Param) kernels.Tensor { return p.W }
	if err := section(secParm, total, t.writeParams(buf, w1)); err != nil {
		return "", err
	}
	mv := t.writeParams(buf, func(p *Param) kernels.Tensor { return p.M }, func(p *Param) kernels.Tensor { return p.V })
	if err := section(secAdam, 2*total, mv); err != nil {
		return "", err
	}
	// The history snapshot streams into the file: buffered, it was a
	// second copy of the cache's embeddings outside every budget (a
	// 256 MiB cgroup OOM-killed the checkpoint after the epoch).
	if t.hc != nil {
		if err := section(secHist, t.hc.SnapshotBytes(), t.hc.WriteTo); err != nil {
			return "", err
		}
	}
	if err := section(secEnd, 0, put(nil)); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	if t.keepPrev {
		// Another run's checkpoint: kept by a second link, so the
		// directory always holds a whole checkpoint.ssdc.
		prev := filepath.Join(dir, PrevCheckpointFile)
		if err := os.Remove(prev); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if err := linkFile(path, prev); err != nil && !errors.Is(err, os.ErrNotExist) {
			// A file system without hard links: move it aside (until
			// the commit below the directory holds only the kept one).
			if rerr := os.Rename(path, prev); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return "", fmt.Errorf("train: keep the checkpoint this run replaces: %w", errors.Join(err, rerr))
			}
		}
	}
	if err := f.Commit(); err != nil {
		return "", err
	}
	t.keepPrev = false
	return path, nil
}

// PlanFile is the memory plan a budgeted training writes beside its
// checkpoint (train --mem).
const PlanFile = "plan.json"

// CleanCheckpointDir removes from dir the temporary files of the
// checkpoint and plan writes that a killed train left (kill -9 while it
// wrote a checkpoint left checkpoint.ssdc.tmp-N, as large as the
// checkpoint, which no later run removed), and returns how many. Other
// files' temporaries stay. The caller must be the directory's only
// trainer (train holds its lock).
func CleanCheckpointDir(dir string) (int, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return atomicfile.CleanTempsOf(dir, CheckpointFile, PlanFile)
}

// linkFile is os.Link; tests replace it to act as a file system without
// hard links.
var linkFile = os.Link

// othersCheckpoint reports whether Options.CheckpointDir holds a
// checkpoint this run did not resume, which its first checkpoint would
// replace: it says so, and SaveCheckpoint keeps it as PrevCheckpointFile
// (a one-epoch test run in the default directory silently replaced a
// long run's checkpoint).
func (t *Trainer) othersCheckpoint() bool {
	if t.o.CheckpointDir == "" {
		return false
	}
	path := filepath.Join(t.o.CheckpointDir, CheckpointFile)
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	if t.o.Resume != "" {
		if rs, err := os.Stat(ResolveCheckpoint(t.o.Resume)); err == nil && os.SameFile(st, rs) {
			return false // resumed: this run continues it
		}
	}
	what := "an unreadable checkpoint"
	if info, err := ReadCheckpointInfo(path); err == nil {
		what = fmt.Sprintf("%s, %d epochs", info.Model.Kind, info.Epoch)
		if info.BatchDone > 0 {
			what += fmt.Sprintf(" and %d batches", info.BatchDone)
		}
	}
	t.o.Logger.Warn("the checkpoint directory holds a checkpoint this run does not resume: it is kept as "+PrevCheckpointFile+" when this run writes its own (--resume it to continue it, or give --checkpoint another directory)",
		"checkpoint", path, "holds", what)
	return true
}

// paramBytes is one tensor of every parameter as float32 (a checkpoint
// section's share per tensor kind) and of the largest parameter alone
// (the host copy writeParams streams through), from the model's own
// parameters.
func (t *Trainer) paramBytes() (total, largest int64) {
	for _, p := range t.model.params {
		b := 4 * int64(p.Rows) * int64(p.Cols)
		total, largest = total+b, max(largest, b)
	}
	return total, largest
}

// writeParams returns a section body that writes, for each pick in turn,
// that tensor of every parameter as float32 LE: one parameter's host copy
// at a time in buf (ModelConfig.CheckpointScratchBytes: room for the
// largest), encoded through a 64 KiB buffer. The caller holds beMu.
func (t *Trainer) writeParams(buf []float32, picks ...func(*Param) kernels.Tensor) func(io.Writer) (int64, error) {
	return func(w io.Writer) (int64, error) {
		enc := make([]byte, 0, 64<<10)
		var n int64
		for _, pick := range picks {
			for _, p := range t.model.params {
				buf := buf[:p.Rows*p.Cols]
				if err := t.be.Download(buf, pick(p)); err != nil {
					return n, err
				}
				for i := 0; i < len(buf); {
					enc = enc[:0]
					for ; i < len(buf) && len(enc)+4 <= cap(enc); i++ {
						enc = binary.LittleEndian.AppendUint32(enc, math.Float32bits(buf[i]))
					}
					k, err := w.Write(enc)
					n += int64(k)
					if err != nil {
						return n, err
					}
				}
			}
		}
		return n, nil
	}
}

// checkpoint is a parsed checkpoint file.
type checkpoint struct {
	meta    checkpointMeta
	parm    []byte
	adam    []byte
	hist    []byte
	file    string
	parmOff int64
	adamOff int64
	histOff int64
	// release unmaps the file the sections alias (readCheckpoint); nil
	// for a parsed byte slice.
	release func()
}

// close releases what ck's sections alias; they must not be used after.
func (ck *checkpoint) close() {
	if ck != nil && ck.release != nil {
		ck.release()
		ck.release = nil
	}
}

// ResolveCheckpoint returns path, or path/CheckpointFile when path is a
// directory.
func ResolveCheckpoint(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, CheckpointFile)
	}
	return path
}

// readCheckpoint reads and verifies a whole checkpoint, mapped rather than
// read into the heap: the history section can be most of the file (tens of
// MiB), which infer never uses and resume copies into its cache, and as
// file pages it is the page cache's to reclaim, not memory outside the
// budget (a 48 MiB cgroup OOM-killed infer reading a 46 MiB checkpoint).
// The caller closes the checkpoint when done with its sections.
func readCheckpoint(path string) (*checkpoint, error) {
	path = ResolveCheckpoint(path)
	if err := storage.CheckRegular(path); err != nil { // a named pipe would block the open
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 || st.Size() != int64(int(st.Size())) {
		return parseCheckpoint(nil, path)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("train: map %s: %w", path, err)
	}
	untrack := storage.TrackMapping(b, path) // a truncation under the reader: a named error (storage.CatchFault)
	ck, err := parseCheckpoint(b, path)
	if err != nil {
		untrack()
		_ = unix.Munmap(b)
		return nil, err
	}
	ck.release = func() { untrack(); _ = unix.Munmap(b) }
	return ck, nil
}

// parseCheckpoint decodes a whole checkpoint; name labels errors. The
// sections it returns alias b.
func parseCheckpoint(b []byte, name string) (*checkpoint, error) {
	ck := &checkpoint{file: name}
	bad := func(off int64, format string, args ...any) error {
		return &CheckpointError{File: name, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	d := decbuf.New(b, 0)
	magic := d.Bytes(len(CheckpointMagic))
	version := d.U32()
	if d.Err() != nil {
		return nil, bad(d.ErrOffset(), "short header: %v", d.Err())
	}
	if string(magic) != CheckpointMagic {
		return nil, bad(0, "bad magic %q", magic)
	}
	if version != CheckpointVersion {
		return nil, bad(8, "unsupported version %d", version)
	}
	seen := map[string]bool{}
	for {
		off := d.Offset()
		tag := string(d.Bytes(4))
		n := d.U64()
		if d.Err() != nil {
			return nil, bad(d.ErrOffset(), "short section header: %v", d.Err())
		}
		if n > uint64(d.Len()) {
			return nil, bad(off+4, "section %q length %d exceeds the %d bytes left", tag, n, d.Len())
		}
		if seen[tag] {
			return nil, bad(off, "duplicate section %q", tag)
		}
		seen[tag] = true
		bodyOff := d.Offset()
		body := d.Bytes(int(n))
		sum := d.U64()
		if d.Err() != nil {
			return nil, bad(d.ErrOffset(), "section %q: short checksum: %v", tag, d.Err())
		}
		if got := xxhash.Sum64(body); got != sum {
			return nil, bad(bodyOff+int64(n), "section %q checksum %016x, want %016x", tag, got, sum)
		}
		switch tag {
		case secMeta:
			if err := json.Unmarshal(body, &ck.meta); err != nil {
				return nil, bad(bodyOff, "META: %v", err)
			}
			// The position indexes the epoch's batches and steps the
			// optimiser: a negative one panicked in the pipeline.
			for _, f := range []struct {
				name string
				v    int64
			}{{"epoch", int64(ck.meta.Epoch)}, {"batch_done", int64(ck.meta.BatchDone)}, {"step", ck.meta.Step}} {
				if f.v < 0 {
					return nil, bad(bodyOff, "META: %s %d is negative", f.name, f.v)
				}
			}
		case secParm:
			ck.parm, ck.parmOff = body, bodyOff
		case secAdam:
			ck.adam, ck.adamOff = body, bodyOff
		case secHist:
			ck.hist, ck.histOff = body, bodyOff
		case secEnd:
			for _, need := range []string{secMeta, secParm, secAdam} {
				if !seen[need] {
					return nil, bad(d.Offset(), "missing section %q", need)
				}
			}
			if ck.meta.History && !seen[secHist] {
				return nil, bad(d.Offset(), "missing section %q", secHist)
			}
			if d.Len() != 0 {
				return nil, bad(d.Offset(), "%d bytes after the end section", d.Len())
			}
			return ck, nil
		default:
			return nil, bad(off, "unknown section %q", tag)
		}
	}
}

// match reports, as an error wrapping ErrMismatch, why a checkpoint cannot
// be used with dataset d and model configuration cfg (nil: the
// checkpoint's own model, for inference, checked against d's feature
// width and classes).
func (ck *checkpoint) match(d *storage.Dataset, cfg *ModelConfig) error {
	if ck.meta.NumNodes != d.NumNodes() {
		return fmt.Errorf("%w: %s is for %d nodes, dataset %s has %d", ErrMismatch, ck.file, ck.meta.NumNodes, d.Dir(), d.NumNodes())
	}
	if cfg != nil {
		if ck.meta.Model != *cfg {
			return modelMismatch(ck.file, &ck.meta.Model, cfg)
		}
		return nil
	}
	m := ck.meta.Model
	if m.InDim != d.FeatDim() || int64(m.Classes) != d.Manifest().NumClasses {
		return fmt.Errorf("%w: %s holds a model of %d features and %d classes, dataset %s has %d and %d",
			ErrMismatch, ck.file, m.InDim, m.Classes, d.Dir(), d.FeatDim(), d.Manifest().NumClasses)
	}
	// Before a model is allocated from META: every layer has at least one
	// parameter and the first a weight of InDim × its output width, so a
	// model that needs more than PARM holds cannot be this checkpoint's
	// (a damaged META would otherwise allocate without bound).
	out := int64(m.Classes)
	if m.Layers > 1 {
		out = int64(m.Hidden)
		if m.Kind == ModelGAT {
			out *= int64(max(m.Heads, 1))
		}
	}
	if have := int64(len(ck.parm) / 4); int64(m.Layers) > have || int64(m.InDim)*out > have {
		return &CheckpointError{File: ck.file, Offset: ck.parmOff, Reason: fmt.Sprintf(
			"PARM holds %d parameters, fewer than META's model %+v needs", have, m)}
	}
	return nil
}

// modelMismatch is the error for a checkpoint (file) of model was resumed
// with options giving model now: each difference as the option that sets
// it (an opterr.Field, which the CLI names as its flag) or the dataset's
// shape, with both values. It printed both configurations whole
// ("holds model {Kind:sage ... Hidden:32 ...}, options give {...}"),
// naming no flag.
func modelMismatch(file string, was, now *ModelConfig) error {
	var parts []string
	var args []any
	opt := func(f opterr.Field, w, n any) {
		if fmt.Sprint(w) != fmt.Sprint(n) {
			parts = append(parts, "%s %v (checkpoint: %v)")
			args = append(args, f, n, w)
		}
	}
	data := func(what string, w, n int) {
		if w != n {
			parts = append(parts, "the dataset's %s %d (checkpoint: %d)")
			args = append(args, what, n, w)
		}
	}
	opt("Model", was.Kind, now.Kind)
	opt("Layers", was.Layers, now.Layers)
	opt("Hidden", was.Hidden, now.Hidden)
	if was.Kind == ModelGAT || now.Kind == ModelGAT {
		opt("Heads", was.Heads, now.Heads)
	}
	opt("Dropout", was.Dropout, now.Dropout)
	data("feature width", was.InDim, now.InDim)
	data("classes", was.Classes, now.Classes)
	if len(parts) == 0 { // a field this list lacks: the whole configurations
		parts, args = []string{"model %+v (checkpoint: %+v)"}, []any{*now, *was}
	}
	return opterr.Errorf(ErrMismatch, "%s holds another model: "+strings.Join(parts, ", ")+"; --resume needs the model it was trained with",
		append([]any{file}, args...)...)
}

// CheckResume reads and verifies the checkpoint o.Resume names (nil when
// it names none) and checks it against dataset d and the model o
// describes, as New does before it restores it. Train calls it before it
// prints anything about the run, so that a missing, corrupt or
// mismatched checkpoint is the first thing said (its "selection:" line
// came before, review C4).
func CheckResume(d *storage.Dataset, o *Options) error {
	if o.Resume == "" {
		return nil
	}
	ck, err := openResume(o.Resume)
	if err != nil {
		return err
	}
	defer ck.close()
	wd := o.withDataset(d, o.Profile) // as New completes it
	cfg := modelConfig(d, &wd)
	return ck.match(d, &cfg)
}

// loadCheckpoint restores the trainer's state from a checkpoint written by a
// trainer with the same model, dataset and history setting.
func (t *Trainer) loadCheckpoint(path string) error {
	ck, err := openResume(path)
	if err != nil {
		return err
	}
	defer ck.close()
	return t.restore(ck)
}

// openResume is readCheckpoint for --resume: a missing file is said as
// what it is.
func openResume(path string) (*checkpoint, error) {
	ck, err := readCheckpoint(path)
	if errors.Is(err, os.ErrNotExist) {
		// Said as what it is ("open X: no such file or directory" named
		// no checkpoint), with the usual place when path is a dataset's
		// directory holding one.
		hint := ""
		if usual := filepath.Join(path, DefaultCheckpointDir, CheckpointFile); usual != ResolveCheckpoint(path) {
			if _, serr := os.Stat(usual); serr == nil {
				hint = "; " + usual + " is one"
			}
		}
		return nil, fmt.Errorf("train: no checkpoint to resume at %s%s: %w", ResolveCheckpoint(path), hint, err)
	}
	return ck, err
}

// restore is loadCheckpoint's second half: ck, parsed, into the trainer.
func (t *Trainer) restore(ck *checkpoint) error {
	if err := ck.match(t.d, &t.model.cfg); err != nil {
		return err
	}
	// The model's weights carry over whatever the history setting: a
	// checkpoint's history section is dropped under --no-hist, and a
	// history cache without one starts empty (both said).
	useHist := ck.meta.History && t.hc != nil
	switch {
	case ck.meta.History && t.hc == nil:
		t.o.Logger.Warn("resuming without the checkpoint's historical embeddings (history off): the model's weights carry over", "checkpoint", ck.file)
	case !ck.meta.History && t.hc != nil:
		t.o.Logger.Warn("the checkpoint holds no historical embeddings: the history cache starts empty", "checkpoint", ck.file)
	}
	if useHist && !sameIDSpace(&ck.meta, t.d) {
		return fmt.Errorf("%w: %s holds history for %s, the dataset numbers its nodes as %s: resume with --no-hist to carry the model's weights over without it",
			ErrMismatch, ck.file, idSpaceName(ck.meta.IDSpace), idSpaceName(idSpace(t.d)))
	}
	if err := t.restoreParams(ck); err != nil {
		return err
	}
	if was, now := ck.meta.Partitioning, partitioningOf(&t.o); was != now && (was != "" || ck.meta.Options.Selection == sample.ModeRandom) {
		// Resuming is still training, but not the run the checkpoint
		// was cut from: the batches change (mid-epoch, the rest of the
		// epoch's too).
		t.o.Logger.Warn("the checkpoint's batches came from another partitioning: training goes on, but not as the interrupted run would have",
			"checkpoint", ck.file, "then", cmp.Or(was, "random batches"), "now", cmp.Or(now, "random batches"), "mid_epoch", ck.meta.BatchDone > 0)
	}
	if changed := changedOptions(&ck.meta.Options, &t.o, t.hc != nil); len(changed) > 0 {
		// Resuming is still training, but not the run the checkpoint
		// was cut from; changed options used to be taken silently
		// (--normalize-features took valid accuracy from 60 % to 7 %).
		t.o.Logger.Warn("resuming with other training options than the checkpoint's: training goes on, but not as the interrupted run would have",
			"checkpoint", ck.file, "changed", strings.Join(changed, "; "))
	}
	t.trainedOn, t.trainedSums = ck.meta.Dataset, ck.meta.DatasetSums
	if useHist {
		if _, err := t.hc.ReadFrom(bytes.NewReader(ck.hist)); errors.Is(err, histcache.ErrOtherSize) && t.OtherData() == "" {
			// Another budget sized this run's cache (--mem, --hist-cache,
			// a plan): the history is a cache, so it starts empty, as
			// for a checkpoint without one (ReadFrom left it
			// unchanged). It was refused, after the profiling epoch.
			t.o.Logger.Warn("the checkpoint's history cache has another size than this run's (another --mem, --hist-cache or plan): the history cache starts empty; the model's weights and Adam's state carry over",
				"checkpoint", ck.file, "sizes", strings.TrimPrefix(err.Error(), histcache.ErrOtherSize.Error()+": "))
		} else if err != nil {
			var he *histcache.CorruptError
			if errors.As(err, &he) {
				// The snapshot's offsets are the section's; the
				// error names the checkpoint's own.
				return &CheckpointError{File: ck.file, Offset: ck.histOff + he.Offset,
					Reason: fmt.Sprintf("history section, field %s: %s", he.Field, he.Reason), Err: err}
			}
			if other := t.OtherData(); errors.Is(err, histcache.ErrMismatch) && other != "" {
				// Another graph's history: say that first.
				return fmt.Errorf("%s: history section: %w; %s", ck.file, err, other)
			}
			if errors.Is(err, histcache.ErrMismatch) && ck.meta.Options.MemBytes > 0 && ck.meta.Options.MemBytes != t.o.MemBytes {
				// The cache was sized by another budget: say which.
				return fmt.Errorf("%s: history section: %w; the checkpoint was trained with --mem %s, this run has %s: resume with --mem %s",
					ck.file, err, ibytes(ck.meta.Options.MemBytes), ibytes(t.o.MemBytes), ibytes(ck.meta.Options.MemBytes))
			}
			return fmt.Errorf("%s: history section at offset %d: %w", ck.file, ck.histOff, err)
		}
	}
	t.epoch, t.batchDone, t.step = ck.meta.Epoch, ck.meta.BatchDone, ck.meta.Step
	t.partial = epochPartial{}
	if ck.meta.Partial != nil && t.batchDone > 0 {
		t.partial = *ck.meta.Partial
	}
	t.elapsed, t.epochStats = ck.meta.Elapsed, ck.meta.EpochStats
	return nil
}

func (t *Trainer) restoreParams(ck *checkpoint) error {
	n := t.model.NumParams()
	if len(ck.parm) != 4*n || len(ck.adam) != 8*n {
		return &CheckpointError{File: ck.file, Offset: ck.parmOff, Reason: fmt.Sprintf("parameter sections hold %d and %d bytes, model needs %d and %d", len(ck.parm), len(ck.adam), 4*n, 8*n)}
	}
	floats := func(b []byte) []float32 {
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	w, mv := floats(ck.parm), floats(ck.adam)
	t.beMu.Lock()
	defer t.beMu.Unlock()
	o := 0
	for _, p := range t.model.params {
		k := p.Rows * p.Cols
		t.be.Upload(p.W, w[o:o+k])
		t.be.Upload(p.M, mv[o:o+k])
		t.be.Upload(p.V, mv[n+o:n+o+k])
		o += k
	}
	return t.be.Err()
}

// changedOptions lists, as "--flag now (checkpoint: was)", the options
// that change what training computes from here and differ between the
// checkpoint's (was) and this run's (now), both with defaults resolved;
// the model (ModelConfig) must match and the partitioning is compared
// apart. hist: this run keeps historical embeddings, which make the
// history options count.
func changedOptions(was, now *Options, hist bool) []string {
	var out []string
	diff := func(flag string, w, n any) {
		if ws, ns := fmt.Sprint(w), fmt.Sprint(n); ws != ns {
			out = append(out, fmt.Sprintf("%s %s (checkpoint: %s)", flag, ns, ws))
		}
	}
	diff("--seed", was.Seed, now.Seed)
	diff("--lr", was.LR, now.LR)
	diff("--weight-decay", was.WeightDecay, now.WeightDecay)
	diff("--batch-size", was.BatchSize, now.BatchSize)
	diff("--fanouts", ints(was.Fanouts), ints(now.Fanouts))
	diff("--selection", was.Selection, now.Selection)
	diff("--parts-per-batch", was.PartsPerBatch, now.PartsPerBatch)
	diff("--normalize-features", was.NormalizeFeatures, now.NormalizeFeatures)
	diff("--eval", cmp.Or(was.EvalMode, EvalLayerwise), cmp.Or(now.EvalMode, EvalLayerwise))
	if now.EvalMode == EvalSampled && was.EvalMode == EvalSampled {
		diff("--eval-fanouts", ints(was.EvalFanouts), ints(now.EvalFanouts))
	}
	if hist && !was.NoHist {
		// With history the spill buffering sets the reuse depth, and
		// with it the default staleness: name the cause, not only the
		// staleness it moved.
		diff("--spill", was.Spill, now.Spill)
		if was.Spill && now.Spill {
			diff("--spill-chunk", was.SpillChunk, now.SpillChunk)
			diff("--spill-ahead", was.SpillAhead, now.SpillAhead)
		}
		diff("--hist-policy", was.HistPolicy, now.HistPolicy)
		if now.HistPolicy == histcache.PolicyGrad {
			diff("--pgrad", was.PGrad, now.PGrad)
		}
		diff("--staleness", was.Staleness, now.Staleness)
	}
	return out
}

// ints formats a fanout list as its flag is written: "10,10".
func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// partitioningOf names the partitioning o's batches come from, for the
// checkpoint: its name, K and part.npy's checksum ("fennel k=1000
// xxhash64:…"); "" for random batches or partitions not from files.
func partitioningOf(o *Options) string {
	pf, ok := o.Partitions.(*sample.PartitionFiles)
	if !ok || o.Selection != sample.ModePartition {
		return ""
	}
	m := pf.Partitioning().Manifest()
	sum := ""
	if f := m.File(partition.FilePart); f != nil {
		sum = f.Checksum
	}
	return fmt.Sprintf("%s k=%d %s", m.Name, m.K, sum)
}

// CheckpointInfo is what a checkpoint says about itself.
type CheckpointInfo struct {
	Model     ModelConfig `json:"model"`
	Options   Options     `json:"options"`
	Epoch     int         `json:"epoch"`
	BatchDone int         `json:"batch_done"`
	Step      int64       `json:"step"`
}

// ReadCheckpointInfo reads and verifies a checkpoint and returns its META.
func ReadCheckpointInfo(path string) (*CheckpointInfo, error) {
	ck, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	defer ck.close()
	return &CheckpointInfo{Model: ck.meta.Model, Options: ck.meta.Options, Epoch: ck.meta.Epoch, BatchDone: ck.meta.BatchDone, Step: ck.meta.Step}, nil
}

// RestoreOptions are what a process restoring a checkpoint for inference
// sets of its own: the checkpoint holds the rest.
type RestoreOptions struct {
	// Workers overrides the sampling goroutines (0: one per core).
	Workers int
	// Progress shows a bar per layer-wise layer or sampled pass; Logger
	// receives the trainer's Info and Debug lines (infer -v). nil: none.
	Progress progress.Reporter
	Logger   *slog.Logger
	// MemBytes is the budget of the process that will infer (0: none),
	// which the neighbour source is chosen for (AutoSource).
	MemBytes int64
}

// NewFromCheckpoint builds a trainer for inference from a checkpoint: the
// model and options it was trained with (history and caches disabled),
// its parameters restored, with ro's process settings (nil: defaults).
// How it reads is chosen for this process as train's auto flags choose
// (neither is in the checkpoint): feature rows with AutoFeatRead (O_DIRECT
// under a memory cgroup or when the features exceed half of the memory
// available), neighbour lists with AutoSource for ro.MemBytes; the
// choices are logged.
func NewFromCheckpoint(ctx context.Context, d *storage.Dataset, path string, ro *RestoreOptions) (*Trainer, error) {
	if ro == nil {
		ro = &RestoreOptions{}
	}
	ck, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	defer ck.close()
	if err := ck.match(d, nil); err != nil {
		return nil, err
	}
	o := asGiven(ck.meta.Options)
	o.NoHist, o.Resume, o.CheckpointDir = true, "", ""
	o.Workers, o.Progress, o.Logger = ro.Workers, ro.Progress, ro.Logger
	o.Selection, o.Partitions = sample.ModeRandom, nil
	// Buffered reads through a small cgroup's page cache read 40 GiB from
	// the disk for 13 GiB of rows (1M nodes, 64 MiB: every row a page).
	var readNote, sourceNote string
	o.FeatRead, readNote = AutoFeatRead(d)
	o.Source, sourceNote = AutoSource(d, ro.MemBytes)
	if ro.Logger != nil {
		ro.Logger.Info("infer: " + readNote)
		ro.Logger.Info("infer: " + sourceNote)
	}
	// Inference gathers whole input rows (inferJob): no streamer.
	o.StreamInput = StreamInputOff
	// No caches: layer-wise inference reads each feature row once, and
	// the sizes training planned from its budget are not this process's
	// (InferOptions.MemBytes is).
	o.FeatCacheBytes, o.NeighborCacheBytes, o.MemBytes = -1, -1, 0
	// Nor is the training's --eval-mem this process's bound (InferOptions):
	// a checkpoint of a tightly budgeted training made infer read 27×
	// more in small chunks on a machine with room.
	o.EvalMemBytes = 0
	t, err := New(ctx, d, &o)
	if err != nil {
		return nil, err
	}
	if cfg := t.model.cfg; cfg != ck.meta.Model {
		t.Close()
		return nil, fmt.Errorf("%w: %s holds model %+v, dataset gives %+v", ErrMismatch, ck.file, ck.meta.Model, cfg)
	}
	if err := t.restoreParams(ck); err != nil {
		t.Close()
		return nil, err
	}
	t.trainedOn, t.trainedSums = ck.meta.Dataset, ck.meta.DatasetSums
	t.restored.epochs, t.restored.batches = ck.meta.Epoch, ck.meta.BatchDone
	return t, nil
}

// asGiven is o, options with their defaults resolved (a checkpoint's),
// as New takes them again: a resolved 0 that New reads as "the default"
// (dropout, weight decay) is written as the explicit "none" (-1). A model
// trained with --dropout 0 was restored with dropout 0.5, and infer
// refused its checkpoint as another model's.
func asGiven(o Options) Options {
	if o.Dropout == 0 {
		o.Dropout = -1
	}
	if o.WeightDecay == 0 {
		o.WeightDecay = -1
	}
	return o
}

// datasetSums names d's contents for a checkpoint: its dataset.json
// checksum and, for a relabelled copy, its source's and, for a copy of a
// copy, the original's (the same nodes, features and labels in other
// ids).
func datasetSums(d *storage.Dataset) []string {
	sums := []string{d.ManifestChecksum()}
	if r := d.Manifest().RelabelledFrom; r != nil {
		for _, s := range []string{r.ManifestChecksum, r.OriginalChecksum} {
			if s != "" {
				sums = append(sums, s)
			}
		}
	}
	return sums
}

// OtherData says, when the trainer was restored from a checkpoint trained
// on other data than its dataset, how they differ: another name, or the
// same name and shapes with other contents (neither the dataset nor the
// copy it was relabelled from, or was relabelled into). "" when they
// agree or the checkpoint predates the record.
func (t *Trainer) OtherData() string {
	if t.trainedOn == "" {
		return ""
	}
	if t.trainedOn != t.d.Manifest().Name {
		return fmt.Sprintf("it was trained on dataset %q; %s is %q", t.trainedOn, t.d.Dir(), t.d.Manifest().Name)
	}
	if len(t.trainedSums) == 0 {
		return ""
	}
	own := datasetSums(t.d)
	for _, a := range t.trainedSums {
		if slices.Contains(own, a) {
			return ""
		}
	}
	return fmt.Sprintf("it was trained on a dataset named %q with other contents than %s (dataset.json %s, trained on %s): regenerated or re-imported since?",
		t.trainedOn, t.d.Dir(), t.d.ManifestChecksum(), t.trainedSums[0])
}

// TrainedOn is the name (dataset.json "name") of the dataset the
// checkpoint the trainer was restored from was trained on, "" when it was
// not restored.
func (t *Trainer) TrainedOn() string { return t.trainedOn }

// EpochsDone is the epochs the trainer holds before Run: a resumed
// checkpoint's whole epochs (0 when it stopped inside one, or for a new
// trainer).
func (t *Trainer) EpochsDone() int {
	if t.batchDone != 0 {
		return 0
	}
	return t.epoch
}

// NothingToTrain says, for a trainer that resumed a checkpoint holding
// Options.Epochs epochs or more, that Run has nothing to train (only an
// interrupted evaluation to run); "" otherwise. A checkpoint cut inside
// an epoch at or past Options.Epochs counts too: resumed with --epochs 2,
// a checkpoint of 2 epochs and 4 batches trained nothing and said nothing,
// and the summary quoted epoch 1's accuracies for a model that had
// trained 4 batches more.
func (t *Trainer) NothingToTrain() string {
	if t.o.Resume == "" || t.epoch < t.o.Epochs {
		return ""
	}
	held := fmt.Sprintf("%d epochs", t.epoch)
	if t.batchDone > 0 {
		held += fmt.Sprintf(" and %d batches of epoch %d", t.batchDone, t.epoch)
	}
	note := fmt.Sprintf("%s already holds %s (--epochs %d): nothing to train; a larger --epochs continues it",
		ResolveCheckpoint(t.o.Resume), held, t.o.Epochs)
	if t.EvalPending() {
		note += "; its last epoch's evaluation was interrupted: it runs now"
	}
	return note
}

// EvalPending reports whether the last epoch restored from a checkpoint
// was interrupted in its evaluation, which Run then runs first.
func (t *Trainer) EvalPending() bool {
	n := len(t.epochStats)
	return n > 0 && t.epochStats[n-1].EvalPending
}

// Options returns the trainer's options with defaults filled in.
func (t *Trainer) Options() Options { return t.o }

// idSpace names d's node numbering: "" for a dataset's own ids, and for a
// partition-major copy (storage.Manifest.RelabelledFrom) the partitioning
// and source that define it. Model weights do not depend on it; the
// history cache, keyed by node id, does.
// idSpaceName is an id space (idSpace) in words.
func idSpaceName(s string) string {
	if s == "" {
		return "the original node ids"
	}
	return "the ids of a relabelled copy (" + s + ")"
}

// idSpace names d's node numbering: "" for a dataset's own ids; for a
// relabelled copy its partitioning, its source's checksum and the
// checksum of its orig_ids.npy, which is the numbering itself (two copies
// of one source and partitioning in other --order had shared a name, and
// one's history loaded onto the other's nodes).
func idSpace(d *storage.Dataset) string {
	r := d.Manifest().RelabelledFrom
	if r == nil {
		return ""
	}
	var ids string
	if e := d.Manifest().File(storage.FileOrigIDs); e != nil {
		ids = e.Checksum
	}
	return fmt.Sprintf("relabel:%s:%s:%s", r.Partitioning, r.ManifestChecksum, ids)
}

// sameIDSpace reports whether the history of a checkpoint with meta m is
// in d's numbering. A checkpoint of a relabelled copy written before the
// numbering's checksum was part of the name (relabel:PART:SUM) is taken
// only on the very copy it was trained on.
func sameIDSpace(m *checkpointMeta, d *storage.Dataset) bool {
	now := idSpace(d)
	if m.IDSpace == now {
		return true
	}
	r := d.Manifest().RelabelledFrom
	return r != nil && m.IDSpace == fmt.Sprintf("relabel:%s:%s", r.Partitioning, r.ManifestChecksum) &&
		len(m.DatasetSums) > 0 && m.DatasetSums[0] == d.ManifestChecksum()
}
