package planner

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ssdgnn/ssdgnn/internal/topk"
)

// TopNodes returns the k nodes of largest a, ties towards the smaller id,
// in descending order of a.
func TopNodes(a []uint32, k int) []int64 {
	sel := topk.Slice(a, int64(k))
	// topk returns ascending ids; order by score.
	for i := 1; i < len(sel); i++ {
		for j := i; j > 0 && a[sel[j]] > a[sel[j-1]]; j-- {
			sel[j], sel[j-1] = sel[j-1], sel[j]
		}
	}
	return sel
}

// WriteProfileSummary prints the profile's counts, times, β and top nodes.
func WriteProfileSummary(w io.Writer, p *Profile) error {
	m := &p.Meta
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "profile\t%s of %s (%d nodes), %s batches of %d, fanouts %v, seed %d, %d epoch(s)\n",
		m.Name, m.Dataset, m.NumNodes, m.Mode, m.BatchSize, m.Fanouts, m.Seed, m.PresampleEpochs)
	if m.NeighborCacheBytes > 0 {
		fmt.Fprintf(tw, "neighbour cache\t%s (%s)\n", fmtBytes(float64(m.NeighborCacheBytes)), m.NeighborCachePolicy)
	}
	fmt.Fprintf(tw, "batches (epoch 0)\t%d\n", m.Batches)
	fmt.Fprintf(tw, "sampled neighbours\t%d\n", m.SampledNeighbors)
	fmt.Fprintf(tw, "gathered rows\t%d (%s)\n", m.GatheredRows, fmtBytes(float64(m.GatheredRows*m.FeatRowBytes)))
	fmt.Fprintf(tw, "t_sample\t%.3fs (%.1f ns/neighbour)\n", m.SampleSeconds, 1e9*m.SampleSeconds/float64(max(m.SampledNeighbors, 1)))
	fmt.Fprintf(tw, "t_gather\t%.3fs (%.1f ns/row)\n", m.GatherSeconds, 1e9*m.GatherSeconds/float64(max(m.GatheredRows, 1)))
	fmt.Fprintf(tw, "β (Eq. 3)\t%.4g\n", m.Beta)
	fmt.Fprintf(tw, "sums\tfeat %d, hist_sample %d, hist_gather %d, nbr lookups %d\n", m.SumFeat, m.SumHistSample, m.SumHistGather, m.SumNbr)
	if m.HeldOutEpoch > 0 {
		fmt.Fprintf(tw, "held-out epoch %d\tfeat %d\n", m.HeldOutEpoch, m.SumFeatHeldOut)
	}
	if r := m.Reads; r != nil {
		k := float64(max(m.PresampleEpochs, 1))
		// The feature block's rows are not among Rows, and its loads
		// (sequential reads of whole macro batches) are in neither the
		// reads nor the device time: say so rather than print them as a
		// part of the rows read.
		block := ""
		if r.BlockRows > 0 {
			block = fmt.Sprintf(" and %.0f from the feature block (its loads not counted here)", float64(r.BlockRows)/k)
		}
		fmt.Fprintf(tw, "reads per epoch\t%.0f rows from storage%s in %.0f reads (%.0f of one row), %s read for %s of rows; gap %d rows, cap %gx, %s\n",
			float64(r.Rows)/k, block, float64(r.Reads)/k, float64(r.SingleReads)/k,
			fmtBytes(float64(r.BytesRead)/k), fmtBytes(float64(r.Rows)*float64(m.FeatRowBytes)/k), r.GapRows, r.MaxAmplification, r.Mode)
		fmt.Fprintf(tw, "device time per epoch\t%.2fs at %.0f random reads/s and %s/s sequential (%s)\n",
			r.Seconds(float64(r.Reads)/k, float64(r.BytesRead)/k), r.RandomReadsPerSec, fmtBytes(r.SeqBytesPerSec), r.CostSource)
	}
	for _, e := range []struct {
		name string
		a    []uint32
	}{{"top saved_IO_feat", p.Feat}, {"top saved_IO_hist_sample", p.HistSample}, {"top saved_IO_hist_gather", p.HistGather}} {
		s := ""
		for i, v := range TopNodes(e.a, 5) {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%d (%d)", v, e.a[v])
		}
		fmt.Fprintf(tw, "%s\t%s\n", e.name, s)
	}
	return tw.Flush()
}

// WritePlan prints the split, the memory arithmetic, the predicted
// savings and the reason for α.
func WritePlan(w io.Writer, r *PlanResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "plan\tprofile %s of %s, budget %s, hidden %d, β %.4g, decoupled %v\n",
		r.Profile, r.Dataset, fmtBytes(float64(r.Memory.MemBytes)), r.Hidden, r.Beta, r.Decoupled)
	// A budget above what the caches can use: α is then only where the
	// search started (the history cache's leftover goes to the feature
	// cache, and what neither can use stays unused), so say so rather
	// than let α read as the feature cache's share (α 0.00 above a
	// feature cache of 24.6 MiB and a history cache of 3.0 MiB).
	split := ""
	// Room for one more feature row left over: the feature cache holds
	// all its candidates, and (the smallest α of equal benefit winning)
	// the history cache all those worth anything.
	if unused := r.Memory.MemBytes - r.Memory.GatherPhaseBytes; r.FeatRowBytes > 0 && unused >= r.FeatRowBytes {
		split = fmt.Sprintf("; every cache holds all its candidates, %s of the budget unused", fmtBytes(float64(unused)))
	}
	fmt.Fprintf(tw, "α\t%.2f (feature cache share of the memory after tables; history 1−α%s)\n", r.Alpha, split)
	fmt.Fprintf(tw, "feature cache\t%s budget, %d rows\n", fmtBytes(float64(r.Feature.BudgetBytes)), r.Feature.Entries)
	fmt.Fprintf(tw, "history cache\t%s budget, %d embeddings\n", fmtBytes(float64(r.History.BudgetBytes)), r.History.Entries)
	nb := "while sampling"
	if !r.Decoupled {
		nb = fmt.Sprintf("share %.2f", r.NeighborFrac)
	}
	fmt.Fprintf(tw, "neighbour cache\t%s budget, %d lists (%s)\n", fmtBytes(float64(r.Neighbor.BudgetBytes)), r.Neighbor.Entries, nb)
	fmt.Fprintf(tw, "\t\n")
	for _, it := range r.Memory.Items {
		fmt.Fprintf(tw, "  %s\t%d B\n", it.Name, it.Bytes)
	}
	fmt.Fprintf(tw, "  gather phase total\t%d B of %d B\n", r.Memory.GatherPhaseBytes, r.Memory.MemBytes)
	if r.Decoupled {
		fmt.Fprintf(tw, "  sample phase total\t%d B of %d B\n", r.Memory.SamplePhaseBytes, r.Memory.MemBytes)
	}
	fmt.Fprintf(tw, "\t\n")
	pr := r.Predicted
	fmt.Fprintf(tw, "predicted per epoch\tfeature bytes saved %s, neighbour bytes saved %s\n", fmtBytes(pr.FeatureBytesSaved), fmtBytes(pr.NeighborBytesSaved))
	if r.Reads != nil {
		fmt.Fprintf(tw, "predicted gather reads\t%.0f reads, %s read, %.2fs of device time (%.2fs with no cache)\n",
			pr.GatherReads, fmtBytes(pr.GatherBytesRead), pr.GatherSeconds, pr.NoCacheGatherSeconds)
	}
	fmt.Fprintf(tw, "why\t%s\n", r.Reason)
	return tw.Flush()
}
