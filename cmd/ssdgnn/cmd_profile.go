package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/neighborcache"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newProfileCmd) }

func newProfileCmd(g *globals) *cobra.Command {
	var o planner.ProfileOptions
	var fanouts, selection, partName string
	var seed int64
	var ncache byteSize
	var asJSON bool
	var reads cliflags.ReadFlags
	var source cliflags.SourceFlag
	cmd := &cobra.Command{
		Use:   "profile DIR",
		Short: "Run the profiling epoch that the memory planner needs",
		Long: `profile runs OUTRE's profiling epoch (sample, then gather, with the feature
and history caches off) and records, per node, how much I/O caching it would
save: saved_IO_feat, saved_IO_hist_sample, saved_IO_hist_gather and the
neighbour lookups, plus the measured sample and gather times and beta (Eq. 3).
Each batch's storage reads are planned as train's gather plans them (the
--feat-read, --coalesce-gap and --max-read-amp flags are train's) and priced
at DIR/device.json's costs (ssdgnn probe), so the plan values a row read on
its own above one that rides in a merged read.
With --presample-epochs K the counts are summed over K epochs (GNNLab
PreSC#K). Output: DIR/profile/NAME/ (see docs/planner.md); then run
'ssdgnn plan'. Inside a memory cgroup the epoch must fit its limit: with
fewer sampling workers when one per core does not (and --workers is not
given), else it is refused before it starts, naming the least limit (the
bound train's minimum counts for its own profiling epoch). train reuses the
profile only with the same read mode: --feat-read auto resolves in each
process (direct inside a memory cgroup), so run profile where train will
run, or give both the same --feat-read.`,
		Example: `  ssdgnn partition data/synth --parts 1000
  ssdgnn profile data/synth --partition fennel --neighbor-cache 64MiB
  ssdgnn plan data/synth --mem 4GiB`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "batch-size", "parts-per-batch", "presample-epochs", "reuse-depth", "staleness"); err != nil {
				return err
			}
			var err error
			if o.Fanouts, err = cliflags.ParseInts("fanouts", fanouts); err != nil {
				return err
			}
			if o.Mode, err = sample.ParseMode(selection); err != nil {
				return err
			}
			if err := cliflags.RandomBatches(cmd.Flags(), o.Mode); err != nil {
				return err
			}
			o.Seed, o.Progress, o.Logger = uint64(seed), g.progress(), g.logger()
			lk, err := dirlock.Acquire(args[0])
			if err != nil {
				return err
			}
			defer lk.Release()
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := train.Trainable(d); err != nil { // profiles a training epoch
				return err
			}
			o.Fanouts = sample.FanoutsFor(d, o.Fanouts) // as train reads them, so that it reuses the profile
			if o.Mode == sample.ModeAuto {
				var note string
				o.Mode, partName, note = train.AutoSelection(args[0], partName, cmd.Flags().Changed("partition"))
				if err := cliflags.RandomBatches(cmd.Flags(), o.Mode); err != nil { // before the note, as train's
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			} else if o.Mode == sample.ModePartition {
				partName, _, _, _ = train.PartitionFor(args[0], partName, cmd.Flags().Changed("partition"))
			}
			ro, err := reads.Options()
			if err != nil {
				return err
			}
			if ro.Mode == storage.ReadAuto {
				var note string
				ro.Mode, note = train.AutoFeatRead(d)
				o.Logger.Info(note)
			}
			o.Gather = &ro
			// The source train would take by default: its --mem defaults
			// to the memory cgroup's limit.
			var trainMem int64
			train.DefaultMem(false, &trainMem, false, 0)
			// Under a memory cgroup, the collector keeps to its limit as
			// train's does (untuned, garbage doubled the heap).
			defer train.TuneGC(trainMem)()
			if o.Source, err = source.Resolve(d, trainMem, o.Logger); err != nil {
				return err
			}
			var parts sample.Partitions
			var cross []int32
			if o.Mode == sample.ModePartition {
				pf, err := sample.OpenPartitionFiles(d, args[0], partName)
				if err != nil {
					return err
				}
				defer pf.Close()
				pt := pf.Partitioning()
				parts, o.Part, o.Partition, cross = pf, pt.Part(), partName, pt.Cross()
			}
			// Under a memory cgroup too small for the epoch, refuse now
			// rather than be OOM-killed part way (train refuses the same).
			w, note, err := train.ProfileFit(d, &train.Options{Fanouts: o.Fanouts, BatchSize: o.BatchSize, Selection: o.Mode,
				PartsPerBatch: o.PartsPerBatch, Workers: o.Workers, Source: o.Source, Partitions: parts, NeighborCacheBytes: int64(ncache)}, o.PresampleEpochs)
			if err != nil {
				return err
			}
			if w > 0 {
				o.Workers = w
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			if ncache > 0 {
				no := &neighborcache.Options{Budget: int64(ncache), Policy: neighborcache.PolicyDegree, Progress: o.Progress}
				if cross != nil {
					no.Policy, no.Cross = neighborcache.PolicyCross, cross
				}
				if o.NeighborCache, err = neighborcache.Build(d, no); err != nil {
					return err
				}
			}
			p, err := planner.RunProfile(cmd.Context(), d, parts, &o)
			if err != nil {
				return err
			}
			if err := p.Save(args[0]); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), p.Meta)
			}
			return planner.WriteProfileSummary(cmd.OutOrStdout(), p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fanouts, "fanouts", defaultFanouts, "neighbours sampled per layer, input layer first (-1: all)")
	f.IntVar(&o.BatchSize, "batch-size", 1000, cliflags.BatchSizeUsage)
	f.StringVar(&selection, "selection", "auto", "batch selection: auto (partition when DIR has --partition, or without --partition its only partitioning; else random), partition or random")
	f.IntVar(&o.PartsPerBatch, "parts-per-batch", 0, "partitions per macro batch (0: --batch-size / the partitioning's mean training nodes per partition)")
	f.StringVar(&partName, "partition", string(partition.Fennel), "name of the partitioning under DIR/partitions (partition selection)")
	f.IntVar(&o.PresampleEpochs, "presample-epochs", 1, "epochs whose counts are summed (GNNLab PreSC#K)")
	f.Var(&ncache, "neighbor-cache", "global neighbour cache active while profiling (e.g. 64MiB; 0: none)")
	f.Int64Var(&seed, "seed", 1, "random seed; the same seed gives the same profile (except timings)")
	f.StringVar(&o.Name, "name", planner.DefaultProfileName, "profile name under DIR/profile")
	f.IntVar(&o.Workers, "workers", 0, "sampler and gather goroutines (0: one per core)")
	source.Register(f)
	f.Int64Var(&o.Staleness, "staleness", 0, "history staleness the validity estimate assumes (default: one epoch of batches past --reuse-depth, at most 100; train then uses the plan's)")
	f.Int64Var(&o.ReuseDepth, "reuse-depth", train.PipelineDepth, "batches between a reuse decision and the batch it is for (train's, more with --spill)")
	f.BoolVar(&asJSON, "json", false, "print profile.json's content")
	reads.Register(f) // the reads the profile models are train's
	return cmd
}
