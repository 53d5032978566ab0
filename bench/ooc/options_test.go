package ooc

import (
	"errors"
	"testing"
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
