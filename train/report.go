package train

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ssdgnn/ssdgnn/internal/plotfile"
)

// WriteEpochHeader writes the header of the per-epoch table.
func WriteEpochHeader(w io.Writer) error {
	_, err := fmt.Fprintln(w, "epoch\tloss\ttrain\tvalid\ttest\twall\tSa\tGa\tTr\tCo\toverlap\tread rows\tread bytes\tio read\tGa reads/s\tGa MB/s\tnbr hit\tdyn hit\tfeat hit\thist hit\treused\t")
	return err
}

// WriteEpochRow writes one row of the per-epoch table (tab-separated, for a
// tabwriter).
func WriteEpochRow(w io.Writer, e EpochStats) error {
	acc := func(x float64) string {
		if !e.Evaluated {
			return "-"
		}
		return fmt.Sprintf("%.2f%%", 100*x)
	}
	// Every stage of the epoch's accounting delta: its "load" stage holds
	// only what the epoch itself loaded (macro batches' neighbour lists,
	// the feature block's rows), read from storage like the rest; the
	// one-off cache fills happen before the first epoch's delta starts.
	var rows, bytesRead int64
	for _, s := range e.Storage {
		rows += s.Rows
		bytesRead += s.BytesRead
	}
	io := "-"
	if e.IOReadBytes >= 0 {
		io = humanize.IBytes(uint64(e.IOReadBytes))
	}
	_, err := fmt.Fprintf(w, "%d\t%.4f\t%.2f%%\t%s\t%s\t%.2fs\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\t%.0f\t%.1f\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%d\t\n",
		e.Epoch, e.Loss, 100*e.TrainAcc, acc(e.ValidAcc), acc(e.TestAcc), e.WallSec,
		e.Stages.Sample, e.Stages.Gather, e.Stages.Transfer, e.Stages.Compute, e.Overlap,
		rows, humanize.IBytes(uint64(bytesRead)), io, e.GatherReadsPerSec, e.GatherMBPerSec,
		100*e.NeighborHit, 100*e.DynamicHit, 100*e.FeatureHit, 100*e.HistHit, e.Reused)
	return err
}

// WriteTable writes the per-epoch table and a summary line of rep.
func WriteTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if err := WriteEpochHeader(tw); err != nil {
		return err
	}
	for _, e := range rep.Epochs {
		if err := WriteEpochRow(tw, e); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, Summary(rep))
	return err
}

// Summary is the line that ends the table: the model, the final and best
// accuracies, and the elapsed time. Accuracies are printed only when an
// epoch was evaluated (an interrupted run printed "final valid 0.00%").
func Summary(rep *Report) string {
	head := fmt.Sprintf("model %s, %d layers, %d parameters", rep.Model.Kind, rep.Model.Layers, rep.Params)
	evaluated := false
	for _, e := range rep.Epochs {
		evaluated = evaluated || e.Evaluated
	}
	switch {
	case len(rep.Epochs) == 0:
		// Interrupted in the first epoch, or resumed from a checkpoint
		// that already holds --epochs.
		return fmt.Sprintf("%s; no epoch completed (--epochs %d); %.1fs", head, rep.Options.Epochs, rep.ElapsedSec)
	case !evaluated:
		last := rep.Epochs[len(rep.Epochs)-1]
		why := fmt.Sprintf("no evaluation yet (--eval-every %d)", rep.Options.EvalEvery)
		if last.EvalPending {
			why = fmt.Sprintf("interrupted during epoch %d's evaluation, which --resume runs first", last.Epoch)
		}
		return fmt.Sprintf("%s; %d epochs trained, not evaluated: %s; %.1fs", head, len(rep.Epochs), why, rep.ElapsedSec)
	}
	return fmt.Sprintf("%s; final valid %.2f%% test %.2f%%; best valid %.2f%% (test %.2f%%); %.1fs",
		head, 100*rep.FinalValid, 100*rep.FinalTest, 100*rep.BestValid, 100*rep.TestAtBest, rep.ElapsedSec)
}

// CheckpointLine says what the checkpoint the run wrote last holds, as
// the table numbers epochs: the model after which epoch (and batches) and
// its accuracies, and, when the best valid epoch is another, that it is
// not kept: the checkpoint, which infer and --resume read, holds the last
// epoch's model, and the summary quoted the best epoch's test accuracy
// beside it without saying so. "" when no checkpoint was written.
func CheckpointLine(rep *Report) string {
	if rep.Checkpoint == "" {
		return ""
	}
	n, b := rep.CheckpointEpochs, rep.CheckpointBatches
	line := fmt.Sprintf("checkpoint %s: the model after %s", rep.Checkpoint, ModelAfter(n, b))
	var last *EpochStats
	for i := range rep.Epochs {
		if rep.Epochs[i].Epoch == n-1 {
			last = &rep.Epochs[i]
		}
	}
	if b == 0 && last != nil && last.Evaluated {
		line += fmt.Sprintf(" (valid %.2f%% test %.2f%%)", 100*last.ValidAcc, 100*last.TestAcc)
	}
	if rep.BestEpoch >= 0 && (rep.BestEpoch != n-1 || b > 0) {
		line += fmt.Sprintf("; the best valid epoch, %d (valid %.2f%% test %.2f%%), is not kept", rep.BestEpoch, 100*rep.BestValid, 100*rep.TestAtBest)
	}
	return line
}

// Plot draws two panels into path (PNG whatever the extension): the
// training loss against elapsed time, and train/valid/test accuracy in
// percent (0–100) against elapsed time, the epoch of best valid accuracy
// ringed. Loss and accuracy have scales of their own; on one axis the
// accuracies were a flat line near the bottom.
func Plot(rep *Report, path string) error {
	lp, ap, err := curvePanels(rep)
	if err != nil {
		return err
	}
	if err := plotfile.SaveGridPNG([][]*plot.Plot{{lp, ap}}, 11*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// curvePanels builds Plot's two panels: loss, and accuracy in percent.
func curvePanels(rep *Report) (lp, ap *plot.Plot, err error) {
	lp = plot.New()
	lp.Title.Text = fmt.Sprintf("%s training loss", rep.Model.Kind)
	lp.X.Label.Text = "time (s)"
	lp.Y.Label.Text = "loss"
	ap = plot.New()
	ap.Title.Text = "accuracy"
	ap.X.Label.Text = "time (s)"
	ap.Y.Label.Text = "accuracy (%)"
	var loss, tr, va, te plotter.XYs
	var best plotter.XYs
	for _, e := range rep.Epochs {
		loss = append(loss, plotter.XY{X: e.ElapsedSec, Y: e.Loss})
		tr = append(tr, plotter.XY{X: e.ElapsedSec, Y: 100 * e.TrainAcc})
		if e.Evaluated {
			va = append(va, plotter.XY{X: e.ElapsedSec, Y: 100 * e.ValidAcc})
			te = append(te, plotter.XY{X: e.ElapsedSec, Y: 100 * e.TestAcc})
			if len(best) == 0 || 100*e.ValidAcc > best[0].Y {
				best = plotter.XYs{{X: e.ElapsedSec, Y: 100 * e.ValidAcc}}
			}
		}
	}
	// Lines with their points: a series of one point (one epoch, or one
	// evaluation under --eval-every) drew nothing.
	if len(loss) > 0 {
		if err := plotutil.AddLinePoints(lp, "loss", loss); err != nil {
			return nil, nil, err
		}
	}
	var args []any
	for _, s := range []struct {
		name string
		xy   plotter.XYs
	}{{"train", tr}, {"valid", va}, {"test", te}} {
		if len(s.xy) > 0 {
			args = append(args, s.name, s.xy)
		}
	}
	if err := plotutil.AddLinePoints(ap, args...); err != nil {
		return nil, nil, err
	}
	if len(best) > 0 {
		ring, err := plotter.NewScatter(best)
		if err != nil {
			return nil, nil, err
		}
		ring.GlyphStyle.Shape = draw.RingGlyph{}
		ring.GlyphStyle.Radius = vg.Points(7)
		ap.Add(ring)
		ap.Legend.Add(fmt.Sprintf("best valid %.2f%%", best[0].Y), ring)
	}
	lp.Y.Min = 0
	ap.Y.Min, ap.Y.Max = 0, 100
	lp.Legend.Top = true  // the loss falls away from the top right
	ap.Legend.Top = false // accuracies rise towards the top right
	return lp, ap, nil
}
