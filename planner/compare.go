package planner

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Measured are the storage savings one training epoch actually achieved,
// filled in by the trainer from the caches' and sampler's counters.
type Measured struct {
	// FeatRows: feature-cache hits; HistGatherRows: Σ over reused nodes
	// of min(fanout, degree), the hop-2 draws the history skipped (0 if
	// unknown). It is no bound on the input rows not gathered: it counts
	// draws of nodes the batch holds anyway (a 50k-node gen graph, SAGE
	// 10,10: 112,170 draws against 27,123 fewer input rows than the same
	// seed's --no-hist epoch) and leaves out deeper hops.
	FeatRows       float64 `json:"feat_rows"`
	HistGatherRows float64 `json:"hist_gather_rows"`
	// HistReusedNodes: hop-1 nodes whose embedding was reused (the
	// history cache's hits); compared with Predicted.HistReusedNodes.
	HistReusedNodes float64 `json:"hist_reused_nodes"`
	// FeatureBytesSaved: the feature cache's hit bytes (the history's
	// rows not gathered are not countable per epoch: Compare measures
	// them against the profile's rows). NeighborBytesSaved: the global
	// neighbour cache's list bytes plus HistGatherRows ids.
	FeatureBytesSaved  float64 `json:"feature_bytes_saved"`
	NeighborBytesSaved float64 `json:"neighbor_bytes_saved"`
	// GatherReads and GatherBytesRead: the gather stage's storage read
	// calls and bytes read (the dynamic feature block's loads not
	// included, as in the read model).
	GatherReads     float64 `json:"gather_reads"`
	GatherBytesRead float64 `json:"gather_bytes_read"`
	// GatherRows: the rows the feature cache was asked for, hits and
	// misses (the dynamic feature block's rows not included, as in the
	// read model's Rows); 0 if unknown.
	GatherRows float64 `json:"gather_rows,omitempty"`
	// SampledIDs: the neighbours the epoch drew from lists the dynamic
	// cache did not serve (the neighbour cache's and storage's:
	// sample.LevelStats.Sampled), and NeighborCacheBytes the list bytes
	// the neighbour cache served; IDBytes is the width of a neighbour id.
	// 0 if unknown.
	SampledIDs         float64 `json:"sampled_ids,omitempty"`
	NeighborCacheBytes float64 `json:"neighbor_cache_bytes,omitempty"`
	IDBytes            float64 `json:"id_bytes,omitempty"`
}

// ComparisonRow is one quantity, predicted against measured.
type ComparisonRow struct {
	Quantity  string  `json:"quantity"`
	Unit      string  `json:"unit"`
	Predicted float64 `json:"predicted"`
	Measured  float64 `json:"measured"`
	// Ratio is Measured/Predicted (0 when nothing was predicted).
	Ratio float64 `json:"ratio"`
}

// Comparison is the planner's prediction next to one or more measured
// epochs (averaged).
type Comparison struct {
	Epochs int             `json:"epochs"`
	Rows   []ComparisonRow `json:"rows"`
	// Note qualifies the comparison (which epochs it leaves out, and
	// why); empty when nothing needs saying.
	Note string `json:"note,omitempty"`
}

// Compare lines pred's per-epoch prediction up against the mean of the
// measured epochs.
func Compare(pred *PlanResult, measured ...Measured) Comparison {
	var m Measured
	for _, x := range measured {
		m.FeatRows += x.FeatRows
		m.HistGatherRows += x.HistGatherRows
		m.HistReusedNodes += x.HistReusedNodes
		m.FeatureBytesSaved += x.FeatureBytesSaved
		m.NeighborBytesSaved += x.NeighborBytesSaved
		m.GatherReads += x.GatherReads
		m.GatherBytesRead += x.GatherBytesRead
		m.GatherRows += x.GatherRows
		m.SampledIDs += x.SampledIDs
		m.NeighborCacheBytes += x.NeighborCacheBytes
		m.IDBytes = x.IDBytes
	}
	if k := float64(len(measured)); k > 0 {
		m.FeatRows /= k
		m.HistGatherRows /= k
		m.HistReusedNodes /= k
		m.FeatureBytesSaved /= k
		m.NeighborBytesSaved /= k
		m.GatherReads /= k
		m.GatherBytesRead /= k
		m.SampledIDs /= k
		m.NeighborCacheBytes /= k
		m.GatherRows /= k
	}
	pr := pred.Predicted
	row := func(q, u string, p, x float64) ComparisonRow {
		r := ComparisonRow{Quantity: q, Unit: u, Predicted: p, Measured: x}
		if p != 0 {
			r.Ratio = x / p
		}
		return r
	}
	c := Comparison{Epochs: len(measured), Rows: []ComparisonRow{
		row("feature-cache hits", "rows", pr.FeatRows, m.FeatRows),
		row("history: reused hop-1 nodes", "nodes", pr.HistReusedNodes, m.HistReusedNodes),
		row("history: hop-2 draws skipped", "rows", pr.HistSkippedDraws, m.HistGatherRows),
	}}
	if base := pr.NoHistGatherRows; base > 0 && m.GatherRows > 0 {
		// The rows the history kept from the gather, measured as the
		// profile's rows an epoch less the epoch's: a difference of two
		// samples of the batches, not a count of pruned subtrees.
		notGathered := base - m.GatherRows
		c.Rows = append(c.Rows,
			row("rows asked of the feature cache", "rows", pr.GatherRows, m.GatherRows),
			row("history: rows not gathered (the profile's rows less the epoch's)", "rows", base-pr.GatherRows, notGathered),
			row("feature bytes saved", "bytes", pr.FeatureBytesSaved, (m.FeatRows+notGathered)*float64(pred.FeatRowBytes)))
	} else {
		// Without the rows asked on both sides the history's rows not
		// gathered are measured as the hop-2 draws skipped: an estimate
		// that is no bound (Measured.HistGatherRows).
		c.Rows = append(c.Rows,
			row("history: rows not gathered (measured: hop-2 draws skipped, no bound)", "rows", pr.HistGatherRows, m.HistGatherRows),
			row("feature bytes saved (history's part measured as hop-2 draws)", "bytes", pr.FeatureBytesSaved, m.FeatureBytesSaved+m.HistGatherRows*float64(pred.FeatRowBytes)))
	}
	// The history's part of the neighbour bytes: the plan counts the ids
	// drawn in the reused nodes' whole subtrees. Measured as the profile's
	// draws an epoch less the epoch's (a difference of two samples, like
	// the rows not gathered) where both were counted; else the trainer's
	// count of the first hop below them (the rest are never sampled), a
	// lower bound.
	if base := pr.NoHistSampledIDs; base > 0 && m.SampledIDs > 0 && m.IDBytes > 0 {
		notSampled := base - m.SampledIDs
		if pr.NeighborCacheBytes > 0 {
			c.Rows = append(c.Rows, row("neighbour cache: list bytes served", "bytes", pr.NeighborCacheBytes, m.NeighborCacheBytes))
		}
		c.Rows = append(c.Rows,
			row("history: neighbour ids not drawn (the profile's draws less the epoch's)", "ids", pr.HistSampledNeighbors, notSampled),
			row("neighbour bytes saved", "bytes", pr.NeighborBytesSaved, m.NeighborCacheBytes+notSampled*m.IDBytes))
	} else {
		nq := "neighbour bytes saved"
		if pr.HistSampledNeighbors > 0 {
			nq += " (history's part measured one hop deep: a lower bound)"
		}
		c.Rows = append(c.Rows, row(nq, "bytes", pr.NeighborBytesSaved, m.NeighborBytesSaved))
	}
	if rm := pred.Reads; rm.usable() {
		c.Rows = append(c.Rows,
			row("gather read calls", "reads", pr.GatherReads, m.GatherReads),
			row("gather bytes read", "bytes", pr.GatherBytesRead, m.GatherBytesRead),
			row("gather device time at the profile's costs", "s", pr.GatherSeconds, rm.Seconds(m.GatherReads, m.GatherBytesRead)))
	}
	return c
}

// WriteComparison prints c as a table.
func WriteComparison(w io.Writer, c Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "quantity\tpredicted/epoch\tmeasured/epoch (%d epochs)\tmeasured/predicted\t\n", c.Epochs)
	for _, r := range c.Rows {
		p, m := fmt.Sprintf("%.0f", r.Predicted), fmt.Sprintf("%.0f", r.Measured)
		switch r.Unit {
		case "bytes":
			p, m = fmtBytes(r.Predicted), fmtBytes(r.Measured)
		case "s":
			p, m = fmt.Sprintf("%.2fs", r.Predicted), fmt.Sprintf("%.2fs", r.Measured)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t\n", r.Quantity, p, m, r.Ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.Note != "" {
		_, err := fmt.Fprintf(w, "note: %s\n", c.Note)
		return err
	}
	return nil
}
