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
	var rows, bytesRead int64
	for _, s := range e.Storage {
		if s.Stage == "load" {
			continue
		}
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

// Plot draws loss and train/valid/test accuracy against elapsed time into
// path (the format follows the extension: .png, .svg, .pdf).
func Plot(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s training", rep.Model.Kind)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "loss / accuracy"
	var loss, tr, va, te plotter.XYs
	for _, e := range rep.Epochs {
		loss = append(loss, plotter.XY{X: e.ElapsedSec, Y: e.Loss})
		tr = append(tr, plotter.XY{X: e.ElapsedSec, Y: e.TrainAcc})
		if e.Evaluated {
			va = append(va, plotter.XY{X: e.ElapsedSec, Y: e.ValidAcc})
			te = append(te, plotter.XY{X: e.ElapsedSec, Y: e.TestAcc})
		}
	}
	var args []any
	for _, s := range []struct {
		name string
		xy   plotter.XYs
	}{{"loss", loss}, {"train acc", tr}, {"valid acc", va}, {"test acc", te}} {
		if len(s.xy) > 0 {
			args = append(args, s.name, s.xy)
		}
	}
	// Lines with their points: a series of one point (one epoch, or one
	// evaluation under --eval-every) drew nothing.
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	p.Legend.Top = true
	if err := plotfile.SavePNG(p, 8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}
