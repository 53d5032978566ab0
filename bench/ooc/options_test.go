package ooc

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
)

func TestOptionsValidate(t *testing.T) {
	ok := func() Options { return Options{Bin: "b", Dir: "d", OutDir: "o"} }
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		ok   bool
	}{
		{"defaults", func(*Options) {}, true},
		{"no bin", func(o *Options) { o.Bin = "" }, false},
		{"no dir", func(o *Options) { o.Dir = "" }, false},
		{"negative size", func(o *Options) { o.DataSize = -1 }, false},
		{"cache budget over limit", func(o *Options) { o.MemLimit = 1 << 20; o.CacheBudget = 2 << 20 }, false},
		{"bad frac", func(o *Options) { o.CacheFrac = 1.5 }, false},
		{"bad train frac", func(o *Options) { o.TrainFrac = 0.95 }, false},
		{"unknown config", func(o *Options) { o.Configs = []string{"pyg"} }, false},
		{"one config", func(o *Options) { o.Configs = []string{"ssdgnn"} }, true},
		{"tiny data", func(o *Options) { o.DataSize = 1000 }, false},
		{"resume needs 2 epochs", func(o *Options) { o.CheckResume = true; o.ResumeEpochs = 1 }, false},
		{"in-flight 1", func(o *Options) { o.InFlight = 1 }, true},
		{"negative in-flight", func(o *Options) { o.InFlight = -1 }, false},
		// NaN compares false with everything: each float field must
		// still be refused before a child starts.
		{"NaN avg degree", func(o *Options) { o.AvgDegree = math.NaN() }, false},
		{"infinite avg degree", func(o *Options) { o.AvgDegree = math.Inf(1) }, false},
		{"NaN train frac", func(o *Options) { o.TrainFrac = math.NaN() }, false},
		{"NaN cache frac", func(o *Options) { o.CacheFrac = math.NaN() }, false},
		{"NaN neighbour frac", func(o *Options) { o.NeighborFrac = math.NaN() }, false},
		{"NaN lr", func(o *Options) { o.LR = math.NaN() }, false},
		{"infinite lr", func(o *Options) { o.LR = math.Inf(1) }, false},
		{"NaN dropout", func(o *Options) { o.Dropout = math.NaN() }, false},
		{"NaN target factor", func(o *Options) { o.TargetFactor = math.NaN() }, false},
		// The training children's flags, refused before the dataset is
		// generated (before: after gen, partition and profile of 6 GiB,
		// in the first child; sweep 28, P9).
		{"bad fanouts", func(o *Options) { o.Fanouts = "10,x" }, false},
		{"fanouts for other layers", func(o *Options) { o.Layers = 2 }, false},
		{"fanouts for the layers", func(o *Options) { o.Layers, o.Fanouts = 2, "10,10" }, true},
		{"in-flight 99", func(o *Options) { o.InFlight = 99 }, false},
		{"config twice", func(o *Options) { o.Configs = []string{"ssdgnn", "dual-cache", "ssdgnn"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok()
			tc.mod(&o)
			err := o.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrOptions) {
				t.Fatalf("error %v does not wrap ErrOptions", err)
			}
		})
	}
	var nilOpts *Options
	if err := nilOpts.Validate(); !errors.Is(err, ErrOptions) {
		t.Fatalf("nil options: %v", err)
	}
}

func TestNodesFor(t *testing.T) {
	n, err := NodesFor(DefaultDataSize, DefaultFeatDim, DefaultAvgDegree)
	if err != nil {
		t.Fatal(err)
	}
	if got := float64(n) * BytesPerNode(DefaultFeatDim, DefaultAvgDegree); got > DefaultDataSize || got < 0.99*DefaultDataSize {
		t.Fatalf("%d nodes make %g bytes, want about %d", n, got, DefaultDataSize)
	}
}

// TestShareArgs: the options the cache share is computed with are the
// ssdgnn child's, parsed from its whole argument list by train's flag
// set, less only what planning gives the child (--mem, --plan and the
// plan's cache sizes). A flag added to the configuration reaches both.
func TestShareArgs(t *testing.T) {
	for _, inFlight := range []int{0, 1} {
		h := &harness{o: (&Options{Bin: "ssdgnn", Dir: "data", OutDir: "out", InFlight: inFlight}).withDefaults()}
		ds := &Dataset{Dir: "data", PlanFile: "out/plan.json", CacheBudget: 400 << 20, Plan: &Plan{
			Feature: CacheSplit{BudgetBytes: 300 << 20}, History: CacheSplit{BudgetBytes: 20 << 20}, Neighbor: CacheSplit{BudgetBytes: 80 << 20}}}
		_, cfg := h.configArgs("ssdgnn", ds)
		child := append(h.trainArgs(ds.Dir, h.o.Epochs, "m.jsonl", "ckpt")[1:], cfg...)
		full, _, err := cliflags.ParseTrain(child)
		if err != nil {
			t.Fatal(err)
		}
		share, dir, err := cliflags.ParseTrain(h.shareArgs(ds))
		if err != nil {
			t.Fatal(err)
		}
		if dir != ds.Dir || full.PlanFile != ds.PlanFile || int64(full.Mem) != h.o.MemLimit {
			t.Errorf("dir %q, plan %q, mem %d: not the child's", dir, full.PlanFile, full.Mem)
		}
		if full.Options.FeatCacheBytes != 300<<20 || full.Options.HistCacheBytes != 20<<20 || full.Options.NeighborCacheBytes != 80<<20 {
			t.Errorf("the child's caches %d %d %d, not the plan's", full.Options.FeatCacheBytes, full.Options.HistCacheBytes, full.Options.NeighborCacheBytes)
		}
		a, b := full.Options, share.Options
		a.FeatCacheBytes, a.HistCacheBytes, a.NeighborCacheBytes = 0, 0, 0
		b.FeatCacheBytes, b.HistCacheBytes, b.NeighborCacheBytes = 0, 0, 0
		a.CheckpointDir, b.CheckpointDir = "", ""
		if !reflect.DeepEqual(a, b) {
			t.Errorf("in flight %d: share options\n%+v\nchild's\n%+v", inFlight, b, a)
		}
		if full.Source != share.Source || full.Partition != share.Partition || full.Options.InFlight != inFlight {
			t.Errorf("source %q/%q, partition %q/%q, in flight %d", full.Source, share.Source, full.Partition, share.Partition, full.Options.InFlight)
		}
	}
}

// TestDeviceArgs: --device reaches every training child (cuda only when
// asked; cpu is the trainer's default and is not passed), and Validate
// accepts cpu and cuda only.
func TestDeviceArgs(t *testing.T) {
	for _, tc := range []struct{ device, want string }{{"", "cpu"}, {"cpu", "cpu"}, {"cuda", "cuda"}} {
		h := &harness{o: (&Options{Bin: "ssdgnn", Dir: "data", OutDir: "out", Device: tc.device}).withDefaults()}
		if err := h.o.Validate(); err != nil {
			t.Fatalf("%q: %v", tc.device, err)
		}
		args := h.trainArgs("data", 1, "m.jsonl", "ckpt")
		full, _, err := cliflags.ParseTrain(args[1:])
		if err != nil {
			t.Fatal(err)
		}
		if full.Device != tc.want || (tc.want == "cpu" && slices.Contains(args, "--device")) {
			t.Errorf("Device %q: child args %v give --device %q, want %q", tc.device, args, full.Device, tc.want)
		}
	}
	bad := (&Options{Bin: "ssdgnn", Dir: "data", OutDir: "out", Device: "tpu"}).withDefaults()
	if err := bad.Validate(); !errors.Is(err, ErrOptions) {
		t.Errorf("Device tpu: %v, want ErrOptions", err)
	}
}
