package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

func init() { extraCommands = append(extraCommands, newPartitionCmd) }

func newPartitionCmd(g *globals) *cobra.Command {
	var o partition.Options
	var method string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "partition DIR",
		Short: "Split the graph into min-cut parts for partition-based batches",
		Long: `partition streams the graph of the dataset in DIR once (or --passes times)
and assigns every node to one of --parts parts with a two-level FENNEL: first
--first-level parts over the whole graph, then the rest inside each. Every
final part holds at most ceil((1+epsilon) x the average) nodes and training
nodes, after refinement too (level 1 gets sqrt(1+epsilon)-1 of the slack).
Methods:
  fennel        Bloom-filter membership (FENNEL as OUTRE runs it); it saves
                no memory here, since the assignment array the filters stand
                in for is kept anyway (part.npy and refinement read it):
                measured on 1M nodes, 3-4x the time and 16-31 MiB more
                peak RSS than fennel-exact for the same cut (docs/partition.md)
  fennel-exact  exact membership from the assignment array: the faster,
                smaller choice at every size measured
  random        balanced random assignment, the baseline
  metis         runs gpmetis (Debian package metis) for quality comparison
random and metis read --parts, --seed and --workers only; fennel-exact all
but --false-positive; a flag the method does not read is an error.
Output goes to DIR/partitions/NAME/ (name defaults to the method), written
atomically with a manifest; see docs/format.md.`,
		Example: `  ssdgnn partition data/synth --parts 10000
  ssdgnn partition data/cora --parts 100 --method fennel-exact --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "parts"); err != nil {
				return err
			}
			o.Method = partition.Method(method)
			if err := cliflags.Inapplicable(cmd.Flags(), o.NoLambda, "with --no-lambda", "lambda"); err != nil {
				return err
			}
			// A flag the method does not read is an error, not a value
			// recorded in stats.json as if used.
			by := "with --method " + method
			if err := cliflags.Inapplicable(cmd.Flags(), o.Method != partition.Fennel, by+" (only fennel has Bloom filters)",
				"false-positive"); err != nil {
				return err
			}
			if err := cliflags.Inapplicable(cmd.Flags(), !o.Method.Streams(), by+" (only fennel and fennel-exact read it)",
				"first-level", "gamma", "epsilon", "lambda", "no-lambda", "passes", "refine", "order"); err != nil {
				return err
			}
			o.Progress, o.Logger = g.progress(), g.logger()
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
			st, err := partition.RunContext(cmd.Context(), d, &o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "partitioning\t%s (%s), k = %d = %d x %d\n", st.Name, st.Method, st.K, st.K1, st.K2)
			switch {
			case st.OrderWhy != "":
				fmt.Fprintf(tw, "stream order\t%s (auto: %s; --order %s gives this partition whatever the memory)\n", st.Order, st.OrderWhy, st.Order)
			case st.Order != "":
				fmt.Fprintf(tw, "stream order\t%s\n", st.Order)
			}
			fmt.Fprintf(tw, "edge cut\t%.4f (%s of %s directed edges)\n", st.EdgeCut, humanize.Comma(st.CutEdges), humanize.Comma(st.NumEdges))
			fmt.Fprintf(tw, "nodes per part\tmax %d, avg %.1f (%d empty parts)\n", st.MaxNodes, st.AvgNodes, st.EmptyParts)
			fmt.Fprintf(tw, "train per part\tmax %d, avg %.1f\n", st.MaxTrain, st.AvgTrain)
			passes := ""
			if st.Passes > 1 {
				passes = fmt.Sprintf(" over %d passes", st.Passes) // the rate counts every pass's edges
			}
			fmt.Fprintf(tw, "time\t%.2fs (assignment %.2fs, %s edges/s%s)\n", st.WallSeconds, st.AssignSeconds,
				perSecond(float64(st.NumEdges*int64(max(st.Passes, 1)))/max(st.AssignSeconds, 1e-9)), passes)
			if st.Level1Seconds > 0 {
				fmt.Fprintf(tw, "phases\torder %.2fs, level 1 %.2fs, level 2 %.2fs, refinement %.2fs, cut count and files %.2fs\n",
					st.OrderSeconds, st.Level1Seconds, st.Level2Seconds, st.RefineSeconds, st.WriteSeconds)
			}
			fmt.Fprintf(tw, "peak RSS\t%s (filters %s)\n", humanize.IBytes(uint64(st.PeakRSSBytes)), humanize.IBytes(uint64(st.FilterBytes)))
			if st.ExternalSeconds > 0 {
				fmt.Fprintf(tw, "gpmetis\t%.2fs, peak RSS %s\n", st.ExternalSeconds, humanize.IBytes(uint64(st.ExternalPeakRSSBytes)))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Parts, "parts", 0, fmt.Sprintf("number of parts k (default: one per %d training nodes, at most %d and the nodes)", partition.TrainNodesPerPart, partition.DefaultParts))
	f.IntVar(&o.FirstLevel, "first-level", 0, "fennel methods: first-level parts k1, a divisor of --parts (0: the divisor closest to sqrt(parts)); equal to --parts means one level")
	f.StringVar(&method, "method", string(partition.Fennel), "fennel, fennel-exact, random or metis")
	f.StringVar(&o.Name, "name", "", "output name under DIR/partitions (default: the method)")
	f.Float64Var(&o.Gamma, "gamma", 0, "fennel methods: size-penalty exponent (0: default 1.5)")
	f.Float64Var(&o.Epsilon, "epsilon", 0, "fennel methods: balance slack: every final part holds at most ceil((1+epsilon) x average) nodes and training nodes; at most 1 (0: default 0.1)")
	f.Float64Var(&o.Lambda, "lambda", 0, "fennel methods: weight of the training-load penalty (0: default 1)")
	f.BoolVar(&o.NoLambda, "no-lambda", false, "fennel methods: disable the training-load penalty")
	f.Float64Var(&o.FalsePositive, "false-positive", 0, "fennel only: Bloom filter false-positive rate (0: default 0.01)")
	f.IntVar(&o.Passes, "passes", 0, "fennel methods: streaming passes; later passes restream with the previous assignment (0: default)")
	f.IntVar(&o.Refine, "refine", 0, "fennel methods: greedy refinement rounds after the streaming passes (0: default, -1: none)")
	f.StringVar(&o.Order, "order", "", "fennel methods: stream order: auto (bfs when the CSR fits in memory, else id, read in storage order), bfs, id or random (seeded)")
	f.Int64Var(&o.Seed, "seed", 1, "random seed; the same seed and stream order give the same partition (--order auto picks by the memory it finds, and the report names its pick)")
	f.IntVar(&o.Workers, "workers", 0, "worker goroutines (0: one per core; at most four per core, at least 8)")
	f.BoolVar(&o.Force, "force", false, "overwrite an existing partitioning of the same name")
	f.BoolVar(&asJSON, "json", false, "print the stats as JSON")
	return cmd
}
