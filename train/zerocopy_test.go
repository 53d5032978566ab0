package train

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/kernels"
	"github.com/ssdgnn/ssdgnn/kernels/cpu"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

// zcBudget caches about a third of smallSynth's 3000 rows (64 bytes each)
// after the 4-byte-per-node address table.
const zcBudget = 4*3000 + 1000*64

// trainWeights trains with o and returns the report and every parameter's
// final weights.
func trainWeights(t *testing.T, d *storage.Dataset, o *Options) (*Report, [][]float32) {
	t.Helper()
	var ws [][]float32
	rep := runThen(t, d, o, func(tr *Trainer) {
		for _, p := range tr.Model().Params() {
			w := make([]float32, p.Rows*p.Cols)
			if err := tr.be.Download(w, p.W); err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
	})
	return rep, ws
}

// TestZeroCopyBitIdentical: the zero-copy input path (hits gathered by the
// backend from the registered cache, misses uploaded, input dropout on the
// backend) trains bit for bit like the host path, for every model, with
// history on and off, and counts its rows.
func TestZeroCopyBitIdentical(t *testing.T) {
	t.Logf("seed %d", *seedFlag)
	d := smallSynth(t)
	for _, tc := range []struct {
		name   string
		model  string
		noHist bool
		policy featurecache.Policy
	}{
		{"sage-degree", ModelSAGE, false, featurecache.PolicyDegree},
		{"gcn-nohist", ModelGCN, true, featurecache.PolicyDegree},
		{"gat", ModelGAT, false, featurecache.PolicyDegree},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := func(mode string) *Options {
				o := synthOpts()
				o.Model, o.NoHist, o.Epochs = tc.model, tc.noHist, 2
				o.FeatCacheBytes, o.FeatPolicy, o.ZeroCopy = zcBudget, tc.policy, mode
				return o
			}
			offRep, offW := trainWeights(t, d, opts(ZeroCopyOff))
			onRep, onW := trainWeights(t, d, opts(ZeroCopyOn))
			if !onRep.ZeroCopy.Enabled || offRep.ZeroCopy.Enabled || offRep.ZeroCopy.Reason == "" {
				t.Fatalf("zero-copy report: on %+v, off %+v", onRep.ZeroCopy, offRep.ZeroCopy)
			}
			sameCurves(t, curves(offRep), curves(onRep), "zero-copy off vs on")
			for i := range offW {
				for k := range offW[i] {
					if math.Float32bits(offW[i][k]) != math.Float32bits(onW[i][k]) {
						t.Fatalf("param %d element %d: off %v, on %v", i, k, offW[i][k], onW[i][k])
					}
				}
			}
			for e := range onRep.Epochs {
				on, off := onRep.Epochs[e], offRep.Epochs[e]
				if on.InputRowsZeroCopy == 0 || on.InputRowsUploaded == 0 || on.InputRowsZeroCopy+on.InputRowsUploaded != on.InputNodes {
					t.Errorf("epoch %d: %d zero-copy + %d uploaded rows of %d", e, on.InputRowsZeroCopy, on.InputRowsUploaded, on.InputNodes)
				}
				if off.InputRowsZeroCopy != 0 || off.InputRowsUploaded != off.InputNodes {
					t.Errorf("epoch %d off: %d zero-copy + %d uploaded rows of %d", e, off.InputRowsZeroCopy, off.InputRowsUploaded, off.InputNodes)
				}
				// The cache's counts and the storage accounting do not
				// depend on where the hits were copied.
				if on.FeatureHit != off.FeatureHit || on.Measured != off.Measured {
					t.Errorf("epoch %d: feature hit %v / %v, measured %+v / %+v", e, on.FeatureHit, off.FeatureHit, on.Measured, off.Measured)
				}
				if on.InputRowsZeroCopy != int64(on.Measured.FeatRows) {
					t.Errorf("epoch %d: %d zero-copy rows, %v feature-cache hits", e, on.InputRowsZeroCopy, on.Measured.FeatRows)
				}
				for _, s := range on.Storage {
					for _, o := range off.Storage {
						if s.Stage == o.Stage && (s.Rows != o.Rows || s.BytesRequested != o.BytesRequested) {
							t.Errorf("epoch %d stage %s: on %+v, off %+v", e, s.Stage, s, o)
						}
					}
				}
			}
		})
	}
}

// TestZeroCopyWholeGraphCached: with a feature cache holding every row,
// every batch's input is zero-copy hits and no host rows at all. Training
// and sampled evaluation used to deadlock after --in-flight such batches
// (their empty host buffers did not go back to the ring).
func TestZeroCopyWholeGraphCached(t *testing.T) {
	d := smallSynth(t)
	o := synthOpts()
	o.Epochs, o.ZeroCopy, o.EvalMode = 2, ZeroCopyOn, EvalSampled
	o.FeatCacheBytes, o.FeatPolicy = 4*3000+3000*64, featurecache.PolicyDegree
	done := make(chan *Report, 1)
	go func() { done <- run(t, d, o) }()
	var rep *Report
	select {
	case rep = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("training with every row cached did not finish in 2 minutes (deadlock)")
	}
	if !rep.ZeroCopy.Enabled {
		t.Fatalf("zero-copy off: %+v", rep.ZeroCopy)
	}
	for _, e := range rep.Epochs {
		if e.InputRowsUploaded != 0 || e.InputRowsZeroCopy != e.InputNodes || e.InputNodes == 0 {
			t.Errorf("epoch %d: %d zero-copy + %d uploaded rows of %d, want all zero-copy", e.Epoch, e.InputRowsZeroCopy, e.InputRowsUploaded, e.InputNodes)
		}
	}
}

// hiddenBackend hides every optional capability of the CPU backend
// (HostGatherer, Adopt).
type hiddenBackend struct{ kernels.Backend }

// TestZeroCopyFallback: the path is used only where it qualifies, and the
// report and the log say why not.
func TestZeroCopyFallback(t *testing.T) {
	d := smallSynth(t)
	d16 := dataset(t, "synth-f16", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: 600, FeatDim: 8, Classes: 3, Seed: 7, FeatDType: "float16"}, nil)
		return err
	})
	plain, err := cpu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, tc := range []struct {
		name   string
		d      *storage.Dataset
		set    func(o *Options)
		on     bool
		reason string
	}{
		{"on", d, func(o *Options) { o.ZeroCopy = ZeroCopyOn }, true, ""},
		{"auto-cpu", d, func(o *Options) {}, false, "auto"},
		{"off", d, func(o *Options) { o.ZeroCopy = ZeroCopyOff }, false, "disabled"},
		{"dynamic", d, func(o *Options) { o.ZeroCopy, o.FeatPolicy = ZeroCopyOn, featurecache.PolicyDynamic }, false, "dynamic"},
		{"normalize", d, func(o *Options) { o.ZeroCopy, o.NormalizeFeatures = ZeroCopyOn, true }, false, "normalize"},
		{"no-cache", d, func(o *Options) { o.ZeroCopy, o.FeatCacheBytes = ZeroCopyOn, -1 }, false, "no static"},
		{"float16", d16, func(o *Options) { o.ZeroCopy = ZeroCopyOn }, false, "float32"},
		{"no-host-gather", d, func(o *Options) { o.ZeroCopy, o.Backend = ZeroCopyOn, hiddenBackend{plain} }, false, "cannot gather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			o := synthOpts()
			o.Epochs, o.NoHist = 1, true
			if tc.d == d {
				o.FeatCacheBytes = zcBudget
			} else {
				o.FeatCacheBytes = 4*600 + 100*16
			}
			o.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
			tc.set(o)
			rep := run(t, tc.d, o)
			z := rep.ZeroCopy
			if z.Enabled != tc.on || !strings.Contains(z.Reason, tc.reason) {
				t.Errorf("report %+v, want enabled %v, reason containing %q", z, tc.on, tc.reason)
			}
			if n := strings.Count(logBuf.String(), "zero-copy input path"); n != 1 {
				t.Errorf("%d log lines about the zero-copy path, want 1:\n%s", n, logBuf.String())
			}
			e := rep.Epochs[0]
			if (e.InputRowsZeroCopy > 0) != tc.on || e.InputRowsZeroCopy+e.InputRowsUploaded != e.InputNodes {
				t.Errorf("%d zero-copy + %d uploaded rows of %d", e.InputRowsZeroCopy, e.InputRowsUploaded, e.InputNodes)
			}
		})
	}
}

// TestZeroCopyOption: Validate accepts the three modes and "" and rejects
// anything else; WorkingSet is conservative for the modes that may use it.
func TestZeroCopyOption(t *testing.T) {
	d := smallSynth(t)
	ws := map[string]int64{}
	for _, tc := range []struct {
		mode string
		ok   bool
	}{{"", true}, {ZeroCopyAuto, true}, {ZeroCopyOn, true}, {ZeroCopyOff, true}, {"yes", false}, {"ON", false}} {
		o := &Options{ZeroCopy: tc.mode}
		err := o.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("ZeroCopy %q: Validate = %v", tc.mode, err)
		}
		if tc.ok {
			ws[tc.mode] = WorkingSet(d, o, nil).BatchBytes
		}
	}
	if !(ws[ZeroCopyOff] < ws[ZeroCopyAuto] && ws[ZeroCopyAuto] == ws[""] && ws[ZeroCopyAuto] < ws[ZeroCopyOn]) {
		t.Errorf("batch bytes by mode %v", ws)
	}
}
