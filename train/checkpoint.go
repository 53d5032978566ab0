package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Checkpoint format constants (see docs/train.md).
const (
	CheckpointMagic   = "SSDGCKPT"
	CheckpointVersion = 1
	// CheckpointFile is the file name written into Options.CheckpointDir.
	CheckpointFile = "checkpoint.ssdc"
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
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("train: bad checkpoint %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCheckpoint.
func (e *CheckpointError) Unwrap() error { return ErrCheckpoint }

// checkpointMeta is the META section (JSON).
type checkpointMeta struct {
	Dataset  string `json:"dataset"`
	NumNodes int64  `json:"num_nodes"`
	// IDSpace names the node numbering the history section's ids are in:
	// empty for a dataset's own ids, idSpace(d) for a relabelled one.
	IDSpace    string       `json:"id_space,omitempty"`
	Model      ModelConfig  `json:"model"`
	Options    Options      `json:"options"`
	Epoch      int          `json:"epoch"`      // epoch in progress (== epochs done when BatchDone is 0)
	BatchDone  int          `json:"batch_done"` // batches of Epoch already trained
	Step       int64        `json:"step"`       // Adam steps done
	Elapsed    float64      `json:"elapsed_s"`
	History    bool         `json:"history"`
	EpochStats []EpochStats `json:"epoch_stats"`
	Written    time.Time    `json:"written"`
}

// SaveCheckpoint writes the trainer's state atomically to
// dir/CheckpointFile and returns the path.
func (t *Trainer) SaveCheckpoint(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, CheckpointFile)
	meta := checkpointMeta{Dataset: t.d.Manifest().Name, NumNodes: t.d.NumNodes(), IDSpace: idSpace(t.d), Model: t.model.cfg, Options: t.o,
		Epoch: t.epoch, BatchDone: t.batchDone, Step: t.step, Elapsed: t.elapsed + time.Since(t.start).Seconds(),
		History: t.hc != nil, EpochStats: t.epochStats, Written: time.Now().UTC()}
	mj, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	t.beMu.Lock()
	parm, err1 := t.downloadParams(func(p *Param) kernels.Tensor { return p.W })
	m, err2 := t.downloadParams(func(p *Param) kernels.Tensor { return p.M })
	v, err3 := t.downloadParams(func(p *Param) kernels.Tensor { return p.V })
	t.beMu.Unlock()
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", err
	}
	var hist bytes.Buffer
	if t.hc != nil {
		if _, err := t.hc.WriteTo(&hist); err != nil {
			return "", err
		}
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
	secs := []struct {
		tag string
		b   []byte
	}{{secMeta, mj}, {secParm, parm}, {secAdam, append(m, v...)}}
	if t.hc != nil {
		secs = append(secs, struct {
			tag string
			b   []byte
		}{secHist, hist.Bytes()})
	}
	secs = append(secs, struct {
		tag string
		b   []byte
	}{secEnd, nil})
	for _, s := range secs {
		var h [12]byte
		copy(h[:4], s.tag)
		binary.LittleEndian.PutUint64(h[4:], uint64(len(s.b)))
		if _, err := w.Write(h[:]); err != nil {
			return "", err
		}
		if _, err := w.Write(s.b); err != nil {
			return "", err
		}
		var c [8]byte
		binary.LittleEndian.PutUint64(c[:], xxhash.Sum64(s.b))
		if _, err := w.Write(c[:]); err != nil {
			return "", err
		}
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	if err := f.Commit(); err != nil {
		return "", err
	}
	return path, nil
}

// downloadParams concatenates one tensor of every parameter as float32 LE.
func (t *Trainer) downloadParams(pick func(*Param) kernels.Tensor) ([]byte, error) {
	var out []byte
	for _, p := range t.model.params {
		buf := make([]float32, p.Rows*p.Cols)
		if err := t.be.Download(buf, pick(p)); err != nil {
			return nil, err
		}
		for _, x := range buf {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
		}
	}
	return out, nil
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
}

// ResolveCheckpoint returns path, or path/CheckpointFile when path is a
// directory.
func ResolveCheckpoint(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, CheckpointFile)
	}
	return path
}

// readCheckpoint reads and verifies a whole checkpoint.
func readCheckpoint(path string) (*checkpoint, error) {
	path = ResolveCheckpoint(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseCheckpoint(bufio.NewReaderSize(f, 1<<20), path)
}

// parseCheckpoint decodes a checkpoint stream; name labels errors.
func parseCheckpoint(r io.Reader, name string) (*checkpoint, error) {
	ck := &checkpoint{file: name}
	bad := func(off int64, format string, args ...any) error {
		return &CheckpointError{File: name, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, bad(0, "short header: %v", err)
	}
	if string(hdr[:8]) != CheckpointMagic {
		return nil, bad(0, "bad magic %q", hdr[:8])
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != CheckpointVersion {
		return nil, bad(8, "unsupported version %d", v)
	}
	off := int64(12)
	seen := map[string]bool{}
	for {
		var sh [12]byte
		if _, err := io.ReadFull(r, sh[:]); err != nil {
			return nil, bad(off, "short section header: %v", err)
		}
		tag := string(sh[:4])
		n := binary.LittleEndian.Uint64(sh[4:])
		if n > 1<<40 {
			return nil, bad(off+4, "section %q length %d too large", tag, n)
		}
		if seen[tag] {
			return nil, bad(off, "duplicate section %q", tag)
		}
		seen[tag] = true
		body := make([]byte, 0, min(n, 1<<26))
		bb := bytes.NewBuffer(body)
		if _, err := io.CopyN(bb, r, int64(n)); err != nil {
			return nil, bad(off+12, "section %q truncated: %v", tag, err)
		}
		body = bb.Bytes()
		var c [8]byte
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return nil, bad(off+12+int64(n), "section %q: short checksum: %v", tag, err)
		}
		if got, want := xxhash.Sum64(body), binary.LittleEndian.Uint64(c[:]); got != want {
			return nil, bad(off+12+int64(n), "section %q checksum %016x, want %016x", tag, got, want)
		}
		bodyOff := off + 12
		off += 12 + int64(n) + 8
		switch tag {
		case secMeta:
			if err := json.Unmarshal(body, &ck.meta); err != nil {
				return nil, bad(bodyOff, "META: %v", err)
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
					return nil, bad(off, "missing section %q", need)
				}
			}
			if ck.meta.History && !seen[secHist] {
				return nil, bad(off, "missing section %q", secHist)
			}
			return ck, nil
		default:
			return nil, bad(off-int64(n)-20, "unknown section %q", tag)
		}
	}
}

// loadCheckpoint restores the trainer's state from a checkpoint written by a
// trainer with the same model, dataset and history setting.
func (t *Trainer) loadCheckpoint(path string) error {
	ck, err := readCheckpoint(path)
	if err != nil {
		return err
	}
	if ck.meta.Model != t.model.cfg {
		return fmt.Errorf("%w: %s holds model %+v, options give %+v", ErrMismatch, ck.file, ck.meta.Model, t.model.cfg)
	}
	if ck.meta.NumNodes != t.d.NumNodes() {
		return fmt.Errorf("%w: %s is for %d nodes, dataset has %d", ErrMismatch, ck.file, ck.meta.NumNodes, t.d.NumNodes())
	}
	if ck.meta.History != (t.hc != nil) {
		return fmt.Errorf("%w: %s history cache %v, options %v", ErrMismatch, ck.file, ck.meta.History, t.hc != nil)
	}
	if ck.meta.History && ck.meta.IDSpace != idSpace(t.d) {
		return fmt.Errorf("%w: %s holds history for node ids %q, the dataset numbers its nodes %q (relabelled?)",
			ErrMismatch, ck.file, ck.meta.IDSpace, idSpace(t.d))
	}
	if err := t.restoreParams(ck); err != nil {
		return err
	}
	if t.hc != nil {
		if _, err := t.hc.ReadFrom(bytes.NewReader(ck.hist)); err != nil {
			return fmt.Errorf("%s: history section at offset %d: %w", ck.file, ck.histOff, err)
		}
	}
	t.epoch, t.batchDone, t.step = ck.meta.Epoch, ck.meta.BatchDone, ck.meta.Step
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
	return &CheckpointInfo{Model: ck.meta.Model, Options: ck.meta.Options, Epoch: ck.meta.Epoch, BatchDone: ck.meta.BatchDone, Step: ck.meta.Step}, nil
}

// NewFromCheckpoint builds a trainer for inference from a checkpoint: the
// model and options it was trained with (history disabled), its parameters
// restored. workers overrides the sampling goroutines (0: default).
func NewFromCheckpoint(ctx context.Context, d *storage.Dataset, path string, workers int) (*Trainer, error) {
	ck, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	o := ck.meta.Options
	o.NoHist, o.Resume, o.CheckpointDir, o.Workers = true, "", "", workers
	o.Selection, o.Partitions = sample.ModeRandom, nil
	t, err := New(ctx, d, &o)
	if err != nil {
		return nil, err
	}
	if t.model.cfg != ck.meta.Model {
		t.Close()
		return nil, fmt.Errorf("%w: %s holds model %+v, dataset gives %+v", ErrMismatch, ck.file, ck.meta.Model, t.model.cfg)
	}
	if err := t.restoreParams(ck); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Options returns the trainer's options with defaults filled in.
func (t *Trainer) Options() Options { return t.o }

// idSpace names d's node numbering: "" for a dataset's own ids, and for a
// partition-major copy (storage.Manifest.RelabelledFrom) the partitioning
// and source that define it. Model weights do not depend on it; the
// history cache, keyed by node id, does.
func idSpace(d *storage.Dataset) string {
	r := d.Manifest().RelabelledFrom
	if r == nil {
		return ""
	}
	return fmt.Sprintf("relabel:%s:%s", r.Partitioning, r.ManifestChecksum)
}
