package train

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Values of Options.ZeroCopy.
const (
	// ZeroCopyAuto (the default, also "") uses the zero-copy input path
	// when it qualifies and the backend is not the CPU backend (whose
	// adopted gather buffer is cheaper than a separate input tensor).
	ZeroCopyAuto = "auto"
	// ZeroCopyOn uses it whenever it qualifies, whatever the backend.
	ZeroCopyOn = "on"
	// ZeroCopyOff never uses it.
	ZeroCopyOff = "off"
)

// zcSplitRowBytes is the host memory per input row of the zero-copy split
// (hit positions and slots, miss positions: int32; miss ids: int64).
const zcSplitRowBytes = 4 + 4 + 4 + 8

// ZeroCopyReport says whether the zero-copy input path was used and, if
// not, why.
type ZeroCopyReport struct {
	Mode    string `json:"mode"`
	Enabled bool   `json:"enabled"`
	// Reason explains a disabled path (empty when enabled).
	Reason string `json:"reason,omitempty"`
	// RegisteredBytes is the feature-cache array registered with the
	// backend (the same bytes as Memory.FeatureBytes' rows, not extra).
	RegisteredBytes int64 `json:"registered_bytes,omitempty"`
}

// zeroCopyFeats is the registered static feature-cache array.
type zeroCopyFeats struct {
	hg       kernels.HostGatherer
	rows     kernels.HostRows
	slots    []int32 // node → slot or -1 (featurecache.Cache.Slots)
	rowBytes int64
	stage    *storage.StageCounters // the feature cache's Gather stage
	hits     atomic.Int64           // rows served zero-copy since New
}

// zcSplit is one batch's input rows split by where they come from: hits
// (gathered by the backend from the registered cache array) and misses
// (gathered on the host and uploaded). Positions are ascending.
type zcSplit struct {
	hitPos, hitSlot []int32
	missPos         []int32
	missIDs         []int64
}

// zeroCopyQualifies decides whether the zero-copy input path can be used
// and, when not, returns the reason.
func (t *Trainer) zeroCopyQualifies() (kernels.HostGatherer, string) {
	mode := t.o.ZeroCopy
	if mode == "" {
		mode = ZeroCopyAuto
	}
	if mode == ZeroCopyOff {
		return nil, "disabled (zero-copy off)"
	}
	hg, ok := t.be.(kernels.HostGatherer)
	switch {
	case !ok:
		return nil, fmt.Sprintf("backend %s cannot gather from host memory", t.be.Name())
	case mode == ZeroCopyAuto && t.be.Name() == "cpu":
		return nil, "auto: the cpu backend adopts the host gather buffer, which is cheaper"
	case t.fc.Policy() == featurecache.PolicyDynamic:
		return nil, "the dynamic feature cache has no fixed rows to register"
	case t.fc.RowBytes() != 4*int64(t.d.FeatDim()):
		return nil, "features are not float32 (rows are widened on the host)"
	case t.o.NormalizeFeatures:
		return nil, "normalize-features rescales rows on the host"
	case len(t.fc.Rows()) == 0 || t.fc.Slots() == nil:
		return nil, "no static feature cache rows"
	}
	return hg, ""
}

// setupZeroCopy registers the filled static feature cache with the backend
// when the zero-copy path qualifies, and logs the decision once.
func (t *Trainer) setupZeroCopy() error {
	mode := t.o.ZeroCopy
	if mode == "" {
		mode = ZeroCopyAuto
	}
	t.zcRep = ZeroCopyReport{Mode: mode}
	hg, reason := t.zeroCopyQualifies()
	if hg == nil {
		t.zcRep.Reason = reason
		t.o.Logger.Info("zero-copy input path off: every input row is gathered on the host and uploaded", "reason", reason)
		return nil
	}
	rows := t.fc.Rows()
	dim := t.d.FeatDim()
	// The cache's float32 rows, in native byte order (the dataset's .npy
	// is little-endian and so are the supported hosts).
	f32 := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(rows))), len(rows)/4)
	h, err := hg.RegisterHostRows(f32, dim)
	if err != nil {
		if mode == ZeroCopyOn {
			return fmt.Errorf("train: zero-copy: register the feature cache: %w", err)
		}
		t.zcRep.Reason = "register failed: " + err.Error()
		t.o.Logger.Info("zero-copy input path off", "reason", t.zcRep.Reason)
		return nil
	}
	t.zc = &zeroCopyFeats{hg: hg, rows: h, slots: t.fc.Slots(), rowBytes: t.fc.RowBytes(),
		stage: t.d.Accounting().Stage(storage.StageGather)}
	t.zcRep.Enabled = true
	t.zcRep.RegisteredBytes = int64(len(rows))
	t.o.Logger.Info("zero-copy input path on: feature-cache hits are gathered by the backend from host memory",
		"backend", t.be.Name(), "rows", h.Rows(), "bytes", len(rows))
	return nil
}

// closeZeroCopy unregisters the feature cache array (before the cache and
// the backend close).
func (t *Trainer) closeZeroCopy() error {
	if t.zc == nil {
		return nil
	}
	t.beMu.Lock()
	defer t.beMu.Unlock()
	err := t.zc.hg.UnregisterHostRows(t.zc.rows)
	t.zc = nil
	return err
}

// split fills j.zc for the zero-copy path and returns the number of rows
// the host gathers (all input rows without it).
func (t *Trainer) split(j *job) int {
	if t.zc == nil {
		return len(j.hb.nodes)
	}
	s := &zcSplit{}
	slots := t.zc.slots
	for k, v := range j.hb.nodes {
		if sl := slots[v]; sl >= 0 {
			s.hitPos = append(s.hitPos, int32(k))
			s.hitSlot = append(s.hitSlot, sl)
		} else {
			s.missPos = append(s.missPos, int32(k))
			s.missIDs = append(s.missIDs, v)
		}
	}
	j.zc = s
	return len(s.missIDs)
}

// featStats is the feature cache's Stats with the rows served zero-copy
// counted as the hits they are (the cache itself only sees the misses).
func (t *Trainer) featStats() featurecache.Stats {
	s := t.fc.Stats()
	if t.zc != nil {
		h := t.zc.hits.Load()
		s.Requests += h
		s.Hits += h
		s.BytesRequested += h * t.zc.rowBytes
	}
	return s
}

// uploadZeroCopy builds a batch's input tensor on the backend: hits
// gathered from the registered cache array, misses uploaded from j.feats,
// combined by scattering both into a tensor of negative zeros (−0 + x == x
// for every float32 x, signed zeros included, so the result is bit for bit
// the host-gathered input), then the input layer's dropout with the mask
// hostDropout would draw. Called with beMu held.
func (t *Trainer) uploadZeroCopy(j *job) (kernels.Tensor, error) {
	be, zc, s := t.be, t.zc, j.zc
	rows, dim := len(j.hb.nodes), t.d.FeatDim()
	x, err := be.Alloc(rows, dim)
	if err != nil {
		return nil, err
	}
	// scatter adds src (len(pos) rows) into x at pos and frees src.
	scatter := func(src kernels.Tensor, pos []int32) error {
		defer be.Free(src)
		p, err := be.AllocInts(len(pos))
		if err != nil {
			return err
		}
		defer be.FreeInts(p)
		be.UploadInts(p, pos)
		be.ScatterAddRows(x, src, p)
		return nil
	}
	nh, nm := len(s.hitPos), len(s.missPos)
	err = func() error {
		switch {
		case nm == 0: // hit positions are 0..rows-1
			zc.hg.GatherHostRows(x, zc.rows, s.hitSlot)
			return nil
		case nh == 0: // miss positions are 0..rows-1
			be.Upload(x, j.feats)
			return nil
		}
		be.Zero(x)
		be.Scale(x, -1)
		xh, err := be.Alloc(nh, dim)
		if err != nil {
			return err
		}
		zc.hg.GatherHostRows(xh, zc.rows, s.hitSlot)
		if err := scatter(xh, s.hitPos); err != nil {
			return err
		}
		xm, err := be.Alloc(nm, dim)
		if err != nil {
			return err
		}
		be.Upload(xm, j.feats)
		return scatter(xm, s.missPos)
	}()
	if err == nil && j.dropP > 0 {
		var mask kernels.Tensor
		if mask, err = be.Alloc(rows, dim); err == nil {
			be.Dropout(x, x, mask, j.dropP, j.dropSeed)
			be.Free(mask)
		}
	}
	if err != nil {
		be.Free(x)
		return nil, err
	}
	return x, nil
}
