package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/storage"
)

func init() { extraCommands = append(extraCommands, newProbeCmd) }

func newProbeCmd(g *globals) *cobra.Command {
	var (
		asJSON, dryRun, buffered bool
		dur                      time.Duration
		depth, gatherDepth, rnds int
		seqBytes                 byteSize
	)
	cmd := &cobra.Command{
		Use:   "probe DIR",
		Short: "Measure the disk's random and sequential read costs on a dataset's features",
		Long: `probe reads the features file of the dataset in DIR for a short time: single
rows at random ids (--depth in flight, O_DIRECT where the file system allows
it), the same at the feature gather's depth (--gather-depth), then long
sequential reads. It writes the figures to DIR/device.json
(docs/format.md), where train reads them to choose how far apart two missed
rows may lie and still be read with one call (--coalesce-gap overrides).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "depth", "gather-depth", "seq-read", "rounds"); err != nil {
				return err
			}
			if dur <= 0 {
				return fmt.Errorf("--duration %v: want a positive length", dur)
			}
			if !dryRun {
				lk, err := dirlock.Acquire(args[0]) // a writer into DIR (device.json)
				if errors.Is(err, dirlock.ErrNotWritable) {
					return fmt.Errorf("%w: probe writes device.json there; --dry-run measures without writing", err)
				}
				if err != nil {
					return err
				}
				defer lk.Release()
			}
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			p, err := d.ProbeDevice(cmd.Context(), &storage.ProbeOptions{Duration: dur, Depth: depth, GatherDepth: gatherDepth, SeqReadBytes: int64(seqBytes), Buffered: buffered, Rounds: rnds})
			if err != nil {
				return err
			}
			if !dryRun {
				if err := storage.WriteDeviceProfile(args[0], p); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				// The device profile and the merge gap the table prints.
				return writeJSON(out, struct {
					*storage.DeviceProfile
					GapRows int64 `json:"merge_gap_rows"`
				}{p, p.GapRows(p.RowBytes)})
			}
			// Each figure is the median of the rounds, whose range
			// follows it.
			span := func(rs []float64, f func(float64) string) string {
				if len(rs) < 2 {
					return ""
				}
				return fmt.Sprintf(" (median of %d rounds, %s to %s)", len(rs), f(slices.Min(rs)), f(slices.Max(rs)))
			}
			reads := func(x float64) string { return fmt.Sprintf("%.0f", x) }
			// 1/throughput: at depth d each read takes about d times as long.
			fmt.Fprintf(out, "random %s rows (%s): %.0f reads/s at depth %d (one per %.1f µs)%s\n",
				humanize.IBytes(uint64(p.RowBytes)), p.ReadMode, p.RandomReadsPerSec, p.RandomDepth, 1e6*p.RandomReadSec(), span(p.RandomRoundsPerS, reads))
			if p.GatherDepth != p.RandomDepth {
				fmt.Fprintf(out, "random %s rows at the gather's depth: %.0f reads/s at depth %d%s\n",
					humanize.IBytes(uint64(p.RowBytes)), p.GatherReadsPerSec, p.GatherDepth, span(p.GatherRoundsPerS, reads))
			}
			whole := ""
			if p.SeqReadBytes < int64(seqBytes) {
				whole = fmt.Sprintf(" (the whole features file, smaller than --seq-read %s: the rate is as much the calls' cost as the disk's)", humanize.IBytes(uint64(seqBytes)))
			}
			fmt.Fprintf(out, "sequential %s reads%s: %s/s%s\n", humanize.IBytes(uint64(p.SeqReadBytes)), whole, humanize.IBytes(uint64(p.SeqBytesPerSec)),
				span(p.SeqRoundsBytesPerS, func(x float64) string { return humanize.IBytes(uint64(x)) + "/s" }))
			fmt.Fprintf(out, "merge gap: %d rows\n", p.GapRows(p.RowBytes))
			if sp := p.Spread(); sp > probeSpreadWarn {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the device's rate moved %.1f× between rounds (other I/O on the device?): probe again when it is idle, or with more --rounds\n", sp)
			}
			if !dryRun {
				fmt.Fprintf(out, "wrote %s/%s\n", args[0], storage.FileDevice)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the profile as JSON")
	f.BoolVar(&dryRun, "dry-run", false, "measure and print, but do not write device.json")
	f.BoolVar(&buffered, "buffered", false, "read through the page cache (measures the cache, not the disk)")
	f.DurationVar(&dur, "duration", time.Second, "length of each phase (random, random at --gather-depth, sequential), divided among its --rounds (at least one batch of reads each)")
	f.IntVar(&depth, "depth", storage.DefaultScatterDepth, "random reads in flight (prices the merge gap)")
	f.IntVar(&gatherDepth, "gather-depth", storage.DefaultGatherDepth, "random reads in flight of the second random phase: the feature gather's depth, which bench ooc prices the device limit at")
	seqBytes = 1 << 20
	f.Var(&seqBytes, "seq-read", "size of one sequential read")
	f.IntVar(&rnds, "rounds", 3, "times each phase runs, interleaved, for --duration / rounds each (the figures are the medians)")
	return cmd
}

// probeSpreadWarn is the largest/smallest round rate over which probe
// warns that the device's rate moved while it was probed.
const probeSpreadWarn = 1.5
