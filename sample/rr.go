package sample

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ssdgnn/ssdgnn/internal/opterr"
	"github.com/ssdgnn/ssdgnn/internal/plotfile"
	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/storage"
)

// DefaultHistFrac is the default fraction of nodes (top by degree) whose
// historical embeddings are reused in the RR report (OUTRE Table 4).
const DefaultHistFrac = 0.2

// RROptions configures RRReport. A nil *RROptions means the defaults.
type RROptions struct {
	// Fanouts, BatchSize, PartsPerBatch, Seed and Workers are as in
	// Options (same defaults).
	Fanouts       []int
	BatchSize     int
	PartsPerBatch int
	Seed          uint64
	Workers       int
	// Epochs is the number of epochs to average over (default 1).
	Epochs int
	// HistFrac is the fraction of nodes, ranked by degree, whose
	// second-layer embeddings are reused in the third configuration
	// (0: the default, DefaultHistFrac; NoHist skips that configuration,
	// and a reuse of no node is that configuration's partition row). With
	// one layer nothing is reused, and the configuration is skipped.
	HistFrac float64
	NoHist   bool
	// NeighborCacheBytes, when positive, adds a global neighbour cache of
	// that budget: policy degree for random selection, cross for
	// partition-based selection (degree where the partitioning has no
	// cross counts).
	NeighborCacheBytes int64
	// Source is how lists missing every cache are read (default mmap).
	Source Source
	// Progress receives one task per configuration (nil: none).
	Progress progress.Reporter
}

// Validate reports whether o is usable. A nil receiver is valid.
func (o *RROptions) Validate() error {
	if o == nil {
		return nil
	}
	so := o.samplerOptions(ModeRandom, nil, nil)
	if err := so.Validate(); err != nil {
		return err
	}
	switch {
	case o.Epochs < 0:
		return opterr.Errorf(ErrInvalidOptions, "%s %d, want > 0", opterr.Field("Epochs"), o.Epochs)
	case o.HistFrac < 0 || o.HistFrac > 1 || o.HistFrac != o.HistFrac:
		return opterr.Errorf(ErrInvalidOptions, "%s %v, want in [0, 1]", opterr.Field("HistFrac"), o.HistFrac)
	case o.NeighborCacheBytes < 0:
		return fmt.Errorf("%w: NeighborCacheBytes %d, want >= 0", ErrInvalidOptions, o.NeighborCacheBytes)
	}
	return nil
}

func (o *RROptions) samplerOptions(mode Mode, nc *neighborcache.Cache, reuse NodeSet) Options {
	return Options{Fanouts: o.Fanouts, BatchSize: o.BatchSize, PartsPerBatch: o.PartsPerBatch, Seed: o.Seed,
		Workers: o.Workers, Mode: mode, NeighborCache: nc, Reuse: reuse, Source: o.Source}
}

// RRRow is one configuration's figures, averaged per epoch except RR.
type RRRow struct {
	Selection string `json:"selection"`
	// RR = SumNeighborhood / TrainNodes.
	RR float64 `json:"rr"`
	// Batches, TrainNodes (Σ|N_b|) and SumNeighborhood (Σ|Ñ_b|) per epoch.
	Batches         float64 `json:"batches"`
	TrainNodes      float64 `json:"train_nodes"`
	SumNeighborhood float64 `json:"sum_neighborhood"`
	// NeighborBytes is the neighbour-list bytes requested per epoch (each
	// expanded node's whole list once per batch), whatever served them;
	// StorageNeighborBytes the part no cache served.
	NeighborBytes        float64 `json:"neighbor_bytes_requested"`
	StorageNeighborBytes float64 `json:"neighbor_bytes_from_storage"`
	// DynamicLoadBytes is the partition adjacency loaded per epoch.
	DynamicLoadBytes float64 `json:"dynamic_load_bytes"`
	// FeatureBytes is Σ|Ñ_b| × feature row bytes per epoch.
	FeatureBytes float64 `json:"feature_bytes_requested"`
	// UniqueNodes is the number of distinct nodes in any Ñ_b of an epoch.
	UniqueNodes float64 `json:"unique_nodes_touched"`
	// CachePolicy is the global neighbour cache's policy ("" without one).
	CachePolicy string `json:"cache_policy,omitempty"`
	// GlobalHitRate and DynamicHitRate are each cache's hits per lookup
	// (the dynamic cache is asked first: they add up to at most 1).
	GlobalHitRate  float64 `json:"global_hit_rate"`
	DynamicHitRate float64 `json:"dynamic_hit_rate"`
	// Lookups are the summed lookup counters over all epochs.
	Lookups LookupStats `json:"lookups"`
}

// RRResult is the RR report.
type RRResult struct {
	Dataset            string  `json:"dataset"`
	NumNodes           int64   `json:"num_nodes"`
	NumTrain           int64   `json:"num_train"`
	Fanouts            []int   `json:"fanouts"`
	BatchSize          int     `json:"batch_size"`
	Partitions         int     `json:"partitions"`
	PartsPerBatch      int     `json:"parts_per_batch"`
	Epochs             int     `json:"epochs"`
	HistFrac           float64 `json:"hist_frac"`
	NeighborCacheBytes int64   `json:"neighbor_cache_bytes"`

	RRRandom        float64 `json:"rr_random"`
	RRPartition     float64 `json:"rr_partition,omitempty"`
	RRPartitionHist float64 `json:"rr_partition_hist,omitempty"`

	NeighborBytesRandom        float64 `json:"neighbor_bytes_random"`
	NeighborBytesPartition     float64 `json:"neighbor_bytes_partition,omitempty"`
	NeighborBytesPartitionHist float64 `json:"neighbor_bytes_partition_hist,omitempty"`
	FeatureBytesRandom         float64 `json:"feature_bytes_random"`
	FeatureBytesPartition      float64 `json:"feature_bytes_partition,omitempty"`
	FeatureBytesPartitionHist  float64 `json:"feature_bytes_partition_hist,omitempty"`

	// Rows holds every configuration: random, then (with a partitioning)
	// partition and partition+hist.
	Rows []RRRow `json:"rows"`
}

// Selection names used in RRRow.
const (
	SelRandom        = "random"
	SelPartition     = "partition"
	SelPartitionHist = "partition+hist"
)

// RRReport measures OUTRE's redundancy ratio on d for random selection
// and, when p is not nil, partition-based selection with and without
// historical-embedding reuse. It samples whole epochs, so it costs about
// as much as the Sample stage of training.
func RRReport(ctx context.Context, d *storage.Dataset, p Partitions, opts *RROptions) (*RRResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var o RROptions
	if opts != nil {
		o = *opts
	}
	if o.Epochs == 0 {
		o.Epochs = 1
	}
	if o.HistFrac == 0 {
		o.HistFrac = DefaultHistFrac
	}
	o.Progress = progress.Or(o.Progress)
	def := o.samplerOptions(ModeRandom, nil, nil)
	def = def.withDefaults()
	if len(def.Fanouts) < 2 {
		// One layer reuses nothing (a reused node is left unexpanded
		// only in blocks 0..L-2): partition+hist would be the
		// partition row again, labelled as reuse.
		o.NoHist = true
	}
	res := &RRResult{Dataset: d.Manifest().Name, NumNodes: d.NumNodes(), NumTrain: int64(len(d.TrainIdx())),
		Fanouts: def.Fanouts, BatchSize: def.BatchSize, PartsPerBatch: def.PartsPerBatch, Epochs: o.Epochs,
		HistFrac: o.HistFrac, NeighborCacheBytes: o.NeighborCacheBytes}
	if err := checkPartsPerBatch(o.PartsPerBatch, p); err != nil {
		return nil, err
	}
	if p != nil {
		res.Partitions = p.K()
		if res.PartsPerBatch == 0 {
			res.PartsPerBatch = PartsPerBatchFor(p, res.BatchSize)
		}
	}
	if o.NoHist {
		res.HistFrac = 0
	}

	cache := func(pol neighborcache.Policy) (*neighborcache.Cache, error) {
		if o.NeighborCacheBytes <= 0 {
			return nil, nil
		}
		var cross []int32
		if pol == neighborcache.PolicyCross {
			cross = p.Cross()
			if cross == nil {
				pol = neighborcache.PolicyDegree
			}
		}
		return neighborcache.Build(d, &neighborcache.Options{Budget: o.NeighborCacheBytes, Policy: pol, Cross: cross})
	}
	type config struct {
		name  string
		mode  Mode
		pol   neighborcache.Policy
		reuse bool
	}
	cfgs := []config{{SelRandom, ModeRandom, neighborcache.PolicyDegree, false}}
	if p != nil {
		cfgs = append(cfgs, config{SelPartition, ModePartition, neighborcache.PolicyCross, false})
		if !o.NoHist {
			cfgs = append(cfgs, config{SelPartitionHist, ModePartition, neighborcache.PolicyCross, true})
		}
	}
	var hist Bitmap
	for _, c := range cfgs {
		nc, err := cache(c.pol)
		if err != nil {
			return nil, err
		}
		var reuse NodeSet
		if c.reuse {
			if hist == nil {
				hist = TopDegree(d, o.HistFrac)
			}
			reuse = hist
		}
		so := o.samplerOptions(c.mode, nc, reuse)
		row, err := rrRow(ctx, d, p, &so, o.Epochs, c.name, o.Progress)
		if err != nil {
			return nil, err
		}
		if nc != nil {
			row.CachePolicy = string(nc.Stats().Policy)
		}
		res.Rows = append(res.Rows, row)
		switch c.name {
		case SelRandom:
			res.RRRandom, res.NeighborBytesRandom, res.FeatureBytesRandom = row.RR, row.NeighborBytes, row.FeatureBytes
		case SelPartition:
			res.RRPartition, res.NeighborBytesPartition, res.FeatureBytesPartition = row.RR, row.NeighborBytes, row.FeatureBytes
		case SelPartitionHist:
			res.RRPartitionHist, res.NeighborBytesPartitionHist, res.FeatureBytesPartitionHist = row.RR, row.NeighborBytes, row.FeatureBytes
		}
	}
	return res, nil
}

func rrRow(ctx context.Context, d *storage.Dataset, p Partitions, so *Options, epochs int, name string, rep progress.Reporter) (RRRow, error) {
	s, err := New(d, p, so)
	if err != nil {
		return RRRow{}, err
	}
	defer s.Close()
	row := RRRow{Selection: name}
	var batches, train, sum, unique int64
	for e := 0; e < epochs; e++ {
		pl, err := s.Plan(e)
		if err != nil {
			return RRRow{}, err
		}
		task := rep.Start(fmt.Sprintf("rr %s epoch %d", name, e), int64(len(pl.Batches)), progress.Items)
		seen := NewBitmap(d.NumNodes())
		it := s.Epoch(ctx, e)
		for {
			b, err := it.Next()
			if err == io.EOF { // the end; a wrapped io.EOF is a failed read
				break
			}
			if err != nil {
				it.Close()
				task.Done()
				return RRRow{}, err
			}
			batches++
			train += int64(len(b.Targets()))
			sum += int64(len(b.Nodes()))
			for _, v := range b.Nodes() {
				if !seen.Contains(v) {
					seen.Set(v)
					unique++
				}
			}
			b.Release()
			task.Add(1)
		}
		row.Lookups.Add(it.Stats())
		it.Close()
		task.Done()
	}
	ep := float64(epochs)
	row.Batches = float64(batches) / ep
	row.TrainNodes = float64(train) / ep
	row.SumNeighborhood = float64(sum) / ep
	if train > 0 {
		row.RR = float64(sum) / float64(train)
	}
	row.NeighborBytes = float64(row.Lookups.BytesRequested()) / ep
	row.StorageNeighborBytes = float64(row.Lookups.Storage.BytesRead) / ep
	row.DynamicLoadBytes = float64(row.Lookups.LoadBytes) / ep
	row.FeatureBytes = row.SumNeighborhood * float64(d.FeatRowBytes())
	row.UniqueNodes = float64(unique) / ep
	row.GlobalHitRate = row.Lookups.Share(row.Lookups.Global)
	row.DynamicHitRate = row.Lookups.Share(row.Lookups.Dynamic)
	return row, nil
}

// rrBatchSlack is how far (relative) a row's mean batch may be from the
// random row's before WriteRRTable notes it.
const rrBatchSlack = 0.05

// meanBatch is r's mean targets per batch (0 without batches).
func meanBatch(r RRRow) float64 {
	if r.Batches == 0 {
		return 0
	}
	return r.TrainNodes / r.Batches
}

// fmtBytes prints a byte count with a binary unit.
func fmtBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.2f %s", b, units[i])
}

// WriteRRTable writes res as an aligned text table.
func WriteRRTable(w io.Writer, res *RRResult) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "dataset %s: %d nodes, %d training nodes; fanouts %v, batch %d", res.Dataset, res.NumNodes, res.NumTrain, res.Fanouts, res.BatchSize)
	if res.Partitions > 0 {
		fmt.Fprintf(&buf, "; %d partitions, %d per macro batch", res.Partitions, res.PartsPerBatch)
	}
	if res.HistFrac > 0 && res.Partitions > 0 {
		fmt.Fprintf(&buf, "; hist reuse of top %.0f%% by degree", 100*res.HistFrac)
	}
	if res.NeighborCacheBytes > 0 {
		fmt.Fprintf(&buf, "; neighbour cache %s", fmtBytes(float64(res.NeighborCacheBytes)))
	}
	fmt.Fprintf(&buf, "\nper epoch, averaged over %d epoch(s)\n\n", res.Epochs)
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "selection\tRR\tvs random\tbatches\ttargets/batch\tΣ|Ñ_b|\tunique nodes\tnbr bytes\tnbr from storage\tmacro-batch loads\tfeature bytes\tcache hit\tdynamic hit\t")
	for _, r := range res.Rows {
		rel := "-"
		if r.Selection != SelRandom && res.RRRandom > 0 {
			rel = fmt.Sprintf("%+.1f%%", 100*(r.RR/res.RRRandom-1))
		}
		hit := "-"
		if r.CachePolicy != "" {
			hit = fmt.Sprintf("%.1f%% (%s)", 100*r.GlobalHitRate, r.CachePolicy)
		}
		dyn, load := "-", "-"
		if r.Selection != SelRandom {
			// The dynamic cache's hits were read from storage too,
			// by the macro batches' loads: without this column the
			// partition rows looked as if they read fewer list bytes
			// than random batches when they read more.
			dyn, load = fmt.Sprintf("%.1f%%", 100*r.DynamicHitRate), fmtBytes(r.DynamicLoadBytes)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%.1f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Selection, r.RR, rel,
			strconv.FormatFloat(r.Batches, 'f', -1, 64), meanBatch(r), r.SumNeighborhood, r.UniqueNodes,
			fmtBytes(r.NeighborBytes), fmtBytes(r.StorageNeighborBytes), load, fmtBytes(r.FeatureBytes), hit, dyn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// RR falls as batches grow (their neighbourhoods overlap more), and
	// partition batches are not --batch-size: a macro batch of
	// --parts-per-batch partitions is cut into batches of up to 1.25 × it.
	// Where the sizes differ, the "vs random" column mixes the two.
	if len(res.Rows) > 0 && res.Rows[0].Selection == SelRandom && res.Rows[0].Batches > 0 {
		rnd := meanBatch(res.Rows[0])
		for _, r := range res.Rows[1:] {
			if m := meanBatch(r); r.Batches > 0 && math.Abs(m/rnd-1) > rrBatchSlack {
				fmt.Fprintf(&buf, "note: %s batches average %.1f targets, random batches %.1f: RR falls as batches grow, so 'vs random' is not the partitioning's effect alone (the default --parts-per-batch makes a macro batch of about --batch-size)\n",
					r.Selection, m, rnd)
				break // the partition rows share one plan
			}
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// PlotRR writes a PNG bar chart of the RR of each configuration to path
// (atomically).
func PlotRR(res *RRResult, path string) error {
	p, err := rrPlot(res)
	if err != nil {
		return err
	}
	if err := plotfile.SavePNG(p, 6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	return nil
}

// rrLabelRoom is the headroom above the tallest bar, as a fraction of it,
// for the value printed above each bar: with the axis ending at the
// tallest bar, its label was drawn into the title (rr --plot, sweep 28).
const rrLabelRoom = 0.12

// rrPlot is PlotRR's chart.
func rrPlot(res *RRResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Redundancy ratio, %s (fanouts %v, batch %d)", res.Dataset, res.Fanouts, res.BatchSize)
	p.Y.Label.Text = "RR = Σ|Ñ_b| / Σ|N_b|"
	vals := make(plotter.Values, len(res.Rows))
	names := make([]string, len(res.Rows))
	for i, r := range res.Rows {
		vals[i] = r.RR
		names[i] = r.Selection
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(50))
	if err != nil {
		return nil, fmt.Errorf("sample: plot: %w", err)
	}
	bars.Color = plotter.DefaultLineStyle.Color
	p.Add(bars)
	if err := plotfile.BarLabels(p, vals, func(v float64) string { return fmt.Sprintf("%.1f", v) }); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max = max(p.Y.Max, (1+rrLabelRoom)*slices.Max(append([]float64{0}, vals...)))
	return p, nil
}
