package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newRRCmd) }

func newRRCmd(g *globals) *cobra.Command {
	var o sample.RROptions
	var fanouts, partName, plot string
	var source cliflags.SourceFlag
	var seed int64
	var ncache byteSize
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rr DIR",
		Short: "Report the redundancy ratio: how much data an epoch will request",
		Long: `rr samples one epoch (or --epochs) without training and reports the
redundancy ratio RR = sum over batches of |sampled L-hop neighbourhood| /
number of training nodes (OUTRE, eq. 2), with the neighbour-list and feature
bytes an epoch requests and the unique nodes it touches, for:
  random           training nodes shuffled into batches
  partition        batches built from --parts-per-batch random partitions
  partition+hist   partition batches, with the second-layer embeddings of the
                   top --hist-frac nodes by degree reused (not expanded below)
It needs a partitioning (run 'ssdgnn partition DIR' first): --partition, or
without it fennel, or the dataset's only partitioning. Inside a memory cgroup
the samplers must fit its limit: with fewer workers when one per core does
not (and --workers is not given), else rr is refused before it samples,
naming the least limit.`,
		Example: `  ssdgnn partition data/synth --parts 1000
  ssdgnn rr data/synth --partition fennel --plot rr.png`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "batch-size", "parts-per-batch", "epochs", "hist-frac"); err != nil {
				return err
			}
			if err := cliflags.Inapplicable(cmd.Flags(), o.NoHist, "with --no-hist", "hist-frac"); err != nil {
				return err
			}
			var err error
			if o.Fanouts, err = cliflags.ParseInts("fanouts", fanouts); err != nil {
				return err
			}
			// One layer reuses no embedding: the partition+hist row is
			// left out, and its flags mean nothing.
			if err := cliflags.Inapplicable(cmd.Flags(), len(o.Fanouts) == 1, "with one layer (--fanouts "+fanouts+"; the partition+hist row needs two)", "hist-frac", "no-hist"); err != nil {
				return err
			}
			if err := source.Check(); err != nil {
				return err
			}
			o.Seed, o.NeighborCacheBytes, o.Progress = uint64(seed), int64(ncache), g.progress()
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			if len(d.TrainIdx()) == 0 { // RR is per training node
				return fmt.Errorf("dataset %s has no training nodes (%s is empty): no batches to measure", d.Dir(), storage.FileTrain)
			}
			if err := cliflags.CheckOutputs(args[0], d.Manifest(), nil, cliflags.Output{Flag: "--plot", Path: plot}); err != nil {
				return err
			}
			// Under a memory cgroup the collector keeps to its limit, as
			// profile's and train's do: untuned, garbage doubled the heap
			// and a 500,000-node rr was OOM-killed under 64 MiB.
			var mem int64
			train.DefaultMem(false, &mem, false, 0)
			defer train.TuneGC(mem)()
			if o.Source, err = source.Resolve(d, 0, g.logger()); err != nil {
				return err
			}
			name, stood, _, _ := train.PartitionFor(args[0], partName, cmd.Flags().Changed("partition"))
			if stood != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), stood)
			}
			partName = name
			parts, err := sample.OpenPartitionFiles(d, args[0], partName)
			if err != nil {
				return err
			}
			defer parts.Close()
			// Under a memory cgroup too small for the samplers, refuse
			// now rather than be OOM-killed part way.
			w, note, err := train.SamplingFit(d, &train.Options{Fanouts: o.Fanouts, BatchSize: o.BatchSize, Selection: sample.ModePartition,
				PartsPerBatch: o.PartsPerBatch, Workers: o.Workers, Source: o.Source, Partitions: parts, NeighborCacheBytes: int64(ncache)})
			if err != nil {
				return err
			}
			if w > 0 {
				o.Workers = w
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			res, err := sample.RRReport(cmd.Context(), d, parts, &o)
			if err != nil {
				return err
			}
			if plot != "" {
				if err := sample.PlotRR(res, plot); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			return sample.WriteRRTable(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fanouts, "fanouts", defaultFanouts, "neighbours sampled per layer, input layer first (-1: all)")
	f.IntVar(&o.BatchSize, "batch-size", 1000, cliflags.BatchSizeUsage)
	f.IntVar(&o.PartsPerBatch, "parts-per-batch", 0, "partitions per macro batch (0: --batch-size / the partitioning's mean training nodes per partition)")
	f.StringVar(&partName, "partition", string(partition.Fennel), "name of the partitioning under DIR/partitions")
	f.Float64Var(&o.HistFrac, "hist-frac", 0.2, "fraction of nodes (top by degree) whose second-layer embeddings are reused, in (0, 1] (--no-hist skips the partition+hist configuration)")
	f.BoolVar(&o.NoHist, "no-hist", false, "skip the partition+hist configuration")
	f.IntVar(&o.Epochs, "epochs", 1, "epochs to average")
	f.Var(&ncache, "neighbor-cache", "add a global neighbour cache of this size (e.g. 64MiB)")
	source.Register(f)
	f.Int64Var(&seed, "seed", 1, "random seed")
	f.IntVar(&o.Workers, "workers", 0, "sampler goroutines (0: one per core)")
	f.StringVar(&plot, "plot", "", "write a bar chart PNG to this file")
	f.BoolVar(&asJSON, "json", false, "print JSON (keys rr_random, rr_partition, rr_partition_hist, byte counts)")
	return cmd
}
