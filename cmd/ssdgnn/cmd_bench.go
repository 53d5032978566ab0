package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/bench/ooc"
	"github.com/ssdgnn/ssdgnn/internal/cliflags"
)

func init() { extraCommands = append(extraCommands, newBenchCmd) }

func newBenchCmd(g *globals) *cobra.Command {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks that drive ssdgnn end to end",
	}
	bench.AddCommand(newBenchOOCCmd(g), newBenchCappedCmd(g))
	return bench
}

func newBenchOOCCmd(g *globals) *cobra.Command {
	var o ooc.Options
	var dataSize, memLimit, cacheBudget byteSize
	var configs string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "ooc",
		Short: "Out-of-core benchmark: ten training configurations under a real memory limit",
		Long: `bench ooc generates (or reuses) a dataset --data-size bytes large in --dir,
at least 3x --mem-limit; partitions, profiles and plans it once; then runs
'ssdgnn train' once per configuration (--configs, default all ten: the
baselines mmap-baseline and dual-cache, ssdgnn, its ablations
ssdgnn-no-partition and ssdgnn-no-hist, ssdgnn without one of its read paths
each: ssdgnn-rowwise, ssdgnn-uring, ssdgnn-nbr-mmap, ssdgnn-nostream, and
ssdgnn-pm on a partition-major copy) as a child process inside a fresh
memory cgroup limited to --mem-limit (page cache included), dropping the page
cache before each. A run in which a configuration's child would refuse its
--mem is refused before the first, naming the configurations. It writes report.md, report.json, stages.png and
bytes.png to --out. Needs root and a cgroup memory controller to cap the
runs; without them every result is marked uncapped. See docs/ooc.md.`,
		Example: `  ssdgnn bench ooc                                   # 6 GiB against 2 GiB, 2 epochs
  ssdgnn bench ooc --data-size 1.5GiB --mem-limit 512MiB --epochs 1
  ssdgnn bench ooc --check-resume --check-small-limit --configs ssdgnn`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An explicit 0 would select the default: refused, as train's
			// (sweep 28, P9: --epochs 0 ran 2 epochs).
			if err := requirePositive(cmd, "data-size", "mem-limit", "cache-budget", "dual-neighbor-frac", "feat-dim", "avg-degree",
				"train-frac", "train-per-part", "epochs", "layers", "hidden", "batch-size", "resume-epochs"); err != nil {
				return err
			}
			o.DataSize, o.MemLimit, o.CacheBudget = int64(dataSize), int64(memLimit), int64(cacheBudget)
			o.ChildTimeout = timeout
			if configs != "" {
				o.Configs = strings.Split(configs, ",")
			}
			if o.Bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("cannot find this binary (%v): pass --bin", err)
				}
				o.Bin = exe
			}
			if o.OutDir == "" {
				o.OutDir = filepath.Join("bench", "results", time.Now().UTC().Format("20060102T150405Z"))
			}
			lvl := slog.LevelInfo
			if g.quiet {
				lvl = slog.LevelWarn
			}
			if g.verbose {
				lvl = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			if err := o.Validate(); err != nil {
				return err
			}
			if o.DataSize < 3*o.MemLimit {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: --data-size is less than 3x --mem-limit: the data may fit in memory\n")
			}
			rep, err := ooc.Run(cmd.Context(), &o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if err := rep.WriteMarkdown(out); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "\nreport written to %s\n", o.OutDir)
			return err
		},
	}
	f := cmd.Flags()
	dataSize, memLimit = ooc.DefaultDataSize, ooc.DefaultMemLimit
	f.StringVar(&o.Bin, "bin", "", "ssdgnn binary the children run (default: this one)")
	f.StringVar(&o.Dir, "dir", filepath.Join("bench", "results", "ooc-data"), "dataset directory (generated unless a matching one is there)")
	f.StringVar(&o.OutDir, "out", "", "report directory (default bench/results/<timestamp>)")
	f.Var(&dataSize, "data-size", "features + graph size to generate")
	f.Var(&memLimit, "mem-limit", "memory cgroup limit of every child (page cache included)")
	f.Var(&cacheBudget, "cache-budget", "memory for the caches (plan --mem; default: what a bare train --mem LIMIT with the ssdgnn configuration's flags leaves them)")
	f.Float64Var(&o.NeighborFrac, "dual-neighbor-frac", ooc.DefaultNeighborFrac, "dual-cache: neighbour cache share of the cache budget")
	f.IntVar(&o.FeatDim, "feat-dim", ooc.DefaultFeatDim, "feature dimension of the generated graph")
	f.Float64Var(&o.AvgDegree, "avg-degree", ooc.DefaultAvgDegree, "average degree of the generated graph")
	f.Float64Var(&o.TrainFrac, "train-frac", ooc.DefaultTrainFrac, "training fraction of the generated graph (valid and test get half each)")
	f.IntVar(&o.TrainPerPart, "train-per-part", ooc.DefaultTrainPerPart, "training nodes per partition (sets the part count)")
	f.IntVar(&o.Epochs, "epochs", ooc.DefaultEpochs, "epochs per configuration")
	f.IntVar(&o.Layers, "layers", ooc.DefaultLayers, "GraphSAGE layers")
	f.IntVar(&o.Hidden, "hidden", ooc.DefaultHidden, "hidden width (small: data preparation dominates, as next to a GPU)")
	f.IntVar(&o.BatchSize, "batch-size", ooc.DefaultBatchSize, cliflags.BatchSizeUsage)
	f.StringVar(&o.Fanouts, "fanouts", ooc.DefaultFanouts, "fanouts, input layer first")
	f.Int64Var(&o.Seed, "seed", ooc.DefaultSeed, "seed of the graph, partition and training")
	f.StringVar(&configs, "configs", "", "comma-separated configurations (default all: "+strings.Join(ooc.ConfigNames, ",")+")")
	f.BoolVar(&o.Uncapped, "uncapped", false, "run without a memory cgroup (every result is marked uncapped)")
	f.BoolVar(&o.RequireCgroup, "require-cgroup", false, "fail instead of running uncapped when no cgroup can be made")
	f.BoolVar(&o.NoDropCaches, "no-drop-caches", false, "do not drop the page cache between configurations")
	f.BoolVar(&o.CheckResume, "check-resume", false, "robustness: SIGKILL a run after its first epoch, --resume it, compare accuracy")
	f.IntVar(&o.ResumeEpochs, "resume-epochs", 3, "epochs of the --check-resume runs")
	f.BoolVar(&o.CheckSmallLimit, "check-small-limit", false, "robustness: a limit below the plan's tables must be refused before training")
	f.BoolVar(&o.NoDiskCheck, "no-disk-check", false, "skip probing the disk before the first and after the last configuration (the report then prices the gather's limit at device.json's rates only)")
	f.DurationVar(&timeout, "child-timeout", 0, "kill a child after this long (0: never)")
	f.StringVar(&o.Device, "device", "", "every training child's --device: cpu (default) or cuda (run bench from bin/ssdgnn-cuda on a GPU machine)")
	f.StringVar(&o.Eval, "eval", "", "every training child's --eval: layerwise (exact; the trainer's default) or sampled (cut to the budget like training batches)")
	f.IntVar(&o.InFlight, "in-flight", 0, "every training child's --in-flight (0: the trainer's default: 2, or 1 when two would cut batches into more micro-batches under the plan's budget)")
	return cmd
}
