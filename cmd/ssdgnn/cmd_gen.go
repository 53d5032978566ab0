package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

func init() { extraCommands = append(extraCommands, newGenCmd) }

// genReport is the JSON shape of `ssdgnn gen --json`.
type genReport struct {
	Dir               string  `json:"dir"`
	Nodes             int64   `json:"num_nodes"`
	Edges             int64   `json:"num_edges"`
	Communities       int     `json:"communities"`
	SelfLoopsDropped  int64   `json:"self_loops_dropped"`
	DuplicatesDropped int64   `json:"duplicates_dropped"`
	BytesWritten      int64   `json:"bytes_written"`
	Workers           int     `json:"workers"`
	SortBytes         int64   `json:"sort_buffer_bytes"`
	SortRuns          int64   `json:"sort_runs"`
	SpilledBytes      int64   `json:"spilled_bytes"`
	WallSeconds       float64 `json:"wall_seconds"`
	EdgesPerSecond    float64 `json:"edges_per_second"`
	MBPerSecond       float64 `json:"mb_per_second"`
	PeakRSS           int64   `json:"peak_rss_bytes"`
}

func newGenCmd(g *globals) *cobra.Command {
	var cfg synth.Config
	var force, asJSON bool
	var mem byteSize
	var workers int
	cmd := &cobra.Command{
		Use:   "gen DIR",
		Short: "Generate a synthetic community-structured dataset of any size",
		Long: `gen writes a synthetic dataset to DIR: a degree-corrected stochastic block
model with power-law degrees and planted communities scattered over the node
ids, labels derived from communities, and features that are a class signal
plus noise (so a GNN that averages neighbours beats an MLP on features alone).
Generation streams: peak memory stays within --mem whatever the size;
without --mem under a memory cgroup, --mem is its limit (when lower). The
same flags and --seed give byte-identical files (whatever --workers and
--mem). It refuses before writing when the file system cannot hold the
features, labels and indptr.npy (sizes the flags fix).`,
		Example: `  ssdgnn gen data/small --nodes 100000
  ssdgnn gen data/big --nodes 20000000 --avg-degree 20 --feat-dim 128 --classes 32 --seed 7`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "nodes", "avg-degree", "feat-dim", "classes", "homophily", "degree-exp", "feat-noise", "mem"); err != nil {
				return err
			}
			// The flags default to the splits' defaults, so an explicit 0
			// means an empty split; all three empty would be read by
			// synth as "the defaults" (--valid-frac 0 --test-frac 0 with
			// the flags' old 0 defaults gave 5 % and 5 %).
			if cfg.TrainFrac == 0 && cfg.ValidFrac == 0 && cfg.TestFrac == 0 {
				return fmt.Errorf("--train-frac, --valid-frac and --test-frac are all 0: no node would be in any split; omit them for %g/%g/%g", synth.DefaultTrainFrac, synth.DefaultValidFrac, synth.DefaultTestFrac)
			}
			// A split left to its default adds to the ones given:
			// --train-frac 0.9 --valid-frac 0.1 sums to 1.05 with the
			// test split's 0.05, which synth's refusal does not say.
			if sum := cfg.TrainFrac + cfg.ValidFrac + cfg.TestFrac; sum > 1+1e-12 { // synth's tolerance
				var left []string
				for _, fl := range []string{"train-frac", "valid-frac", "test-frac"} {
					if !cmd.Flags().Changed(fl) {
						left = append(left, fmt.Sprintf("--%s %s", fl, cmd.Flags().Lookup(fl).DefValue))
					}
				}
				if len(left) > 0 && len(left) < 3 {
					return fmt.Errorf("--train-frac + --valid-frac + --test-frac is %g, want at most 1: the defaults %s count beside the fractions given; give them too (0 for an empty split)",
						sum, strings.Join(left, " and "))
				}
			}
			if err := cliflags.StreamingMem(cmd.Flags(), cmd.ErrOrStderr(), &mem, synth.DefaultMemBytes, synth.MinMemBytes, synth.MinMemHolds()); err != nil {
				return err
			}
			lk, err := dirlock.Acquire(args[0])
			if err != nil {
				return err
			}
			defer lk.Release()
			opts := &synth.Options{Force: force, MemBytes: int64(mem), Progress: g.progress(), Workers: workers}
			rep, err := synth.GenerateContext(cmd.Context(), args[0], cfg, opts)
			if err != nil {
				return err
			}
			secs := rep.Wall.Seconds()
			r := genReport{
				Dir: args[0], Nodes: rep.Nodes, Edges: rep.Edges, Communities: rep.Config.Communities,
				SelfLoopsDropped: rep.SelfLoopsDropped, DuplicatesDropped: rep.DuplicatesDropped,
				BytesWritten: rep.BytesWritten, Workers: rep.Workers, SortBytes: rep.SortBytes, SortRuns: rep.SortRuns, SpilledBytes: rep.SpilledBytes,
				WallSeconds: secs, PeakRSS: rep.PeakRSS,
			}
			if secs > 0 {
				r.EdgesPerSecond = float64(rep.Edges) / secs
				r.MBPerSecond = float64(rep.BytesWritten) / 1e6 / secs
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "generated %s: %s nodes, %s edges, %d communities, %s in %s (%s edges/s, %.0f MB/s, peak RSS %s)\n",
				args[0], humanize.Comma(rep.Nodes), humanize.Comma(rep.Edges), rep.Config.Communities,
				humanize.IBytes(uint64(rep.BytesWritten)), rep.Wall.Round(time.Millisecond),
				perSecond(r.EdgesPerSecond), r.MBPerSecond, humanize.IBytes(uint64(rep.PeakRSS)))
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Nodes, "nodes", 100000, "number of nodes")
	f.Float64Var(&cfg.AvgDegree, "avg-degree", synth.DefaultAvgDegree, "average directed degree before dropping duplicates")
	f.IntVar(&cfg.Communities, "communities", 0, "planted communities (0: about one per 1000 nodes, a multiple of --classes)")
	f.IntVar(&cfg.FeatDim, "feat-dim", synth.DefaultFeatDim, "feature dimension")
	f.IntVar(&cfg.Classes, "classes", synth.DefaultClasses, "number of classes")
	f.Float64Var(&cfg.TrainFrac, "train-frac", synth.DefaultTrainFrac, "fraction of nodes in the training split (0: none)")
	f.Float64Var(&cfg.ValidFrac, "valid-frac", synth.DefaultValidFrac, "fraction of nodes in the validation split (0: none)")
	f.Float64Var(&cfg.TestFrac, "test-frac", synth.DefaultTestFrac, "fraction of nodes in the test split (0: none)")
	f.Float64Var(&cfg.Homophily, "homophily", synth.DefaultHomophily, "fraction of edges inside a node's community")
	f.Float64Var(&cfg.DegreeExp, "degree-exp", synth.DefaultDegreeExp, "power-law exponent of the degrees (> 2)")
	f.Float64Var(&cfg.FeatNoise, "feat-noise", 0, "feature noise relative to the class signal (0: 0.75*sqrt(feat-dim))")
	f.StringVar(&cfg.FeatDType, "feat-dtype", "float32", "feature dtype: float32 or float16")
	f.Int64Var(&cfg.Seed, "seed", 1, "random seed; the same seed gives byte-identical output")
	f.StringVar(&cfg.Name, "name", "", "dataset name (default synth-<nodes>)")
	f.BoolVar(&force, "force", false, "replace an existing dataset in DIR (it stays whole until the new one is complete, so this needs room for both)")
	f.Var(&mem, "mem", fmt.Sprintf("memory budget of the whole generation (default %s, or a memory cgroup's limit when that is lower): %s for the runtime and writers, %s per generator worker, the rest for the edge sort; peak RSS stays within --mem",
		humanize.IBytes(synth.DefaultMemBytes), humanize.IBytes(synth.ReserveBytes), humanize.IBytes(uint64(synth.WorkerBytes))))
	f.IntVar(&workers, "workers", 0, "generator goroutines (0: one per core; fewer run when their chunks would take more than half of what --mem leaves beside the reserve)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
