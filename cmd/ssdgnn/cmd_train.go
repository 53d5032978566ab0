package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/histcache"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newTrainCmd) }

func newTrainCmd(g *globals) *cobra.Command {
	var o train.Options
	var fanouts, evalFanouts, selection, partName, histPolicy, featPolicy, metrics, plotPath, device string
	var source sourceFlag
	var planFile, profileName string
	var reprofile bool
	var seed int64
	var reads readFlags
	var featCache, histCache, nbrCache, mem, memLimit byteSize
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "train DIR",
		Short: "Train a GNN (GraphSAGE, GCN or GAT) on a dataset",
		Long: `train runs mini-batch training as a four-stage pipeline (sample, gather,
transfer, compute; OUTRE §2.2) with historical second-layer embeddings
(OUTRE §4.3; --no-hist turns them off) and prints one row per epoch: loss,
train/valid/test accuracy, busy seconds of each stage (Sa Ga Tr Co), their
overlap (sum / wall), rows and bytes read from storage, /proc read_bytes and
cache hit rates.

Checkpoints go to --checkpoint DIR (default DIR/checkpoints) every
--checkpoint-every epochs and at the end; Ctrl-C writes one and exits 0.
--resume continues from one.

--mem B sizes the feature, history and neighbour caches with the memory
planner: from --plan FILE when given, otherwise from the profile saved
under DIR/profile/--profile-name when it matches this training (dataset,
partitioning, batches, read options), else after a profiling epoch that
saves it there; plan.json goes beside it. Reusing the profile keeps its
measured beta, so runs with the same flags and seed plan the same caches;
--reprofile profiles again. An explicit
--feat-cache, --hist-cache or --neighbor-cache overrides that cache's planned
size (0 turns it off). The caches, tables included, must fit --mem, or train
fails before the first epoch. After training it prints the plan's predicted
I/O savings per epoch next to the measured ones. --mem also covers the
training working set: --in-flight batches of the largest batch the profile
saw are reserved first, and the caches get the rest; train fails early,
suggesting a smaller --batch-size or --fanouts, when one batch does not
fit. Without --in-flight (and without --spill) the budget chooses it: 2,
so that one batch is gathered while one is computed, or 1 when two would
cut batches into more micro-batches (each cut reads more than the overlap
saves).

--spill decouples the sample stage (OUTRE §4.1, Ginex): each epoch's batches
are sampled ahead into a file under --spill-dir (default DIR/spill) in chunks
of --spill-chunk batches, at most --spill-ahead chunks waiting, and read back
by the gather stage; the file is deleted after the epoch. With history on,
batch i's reuse set is then decided after compute of batch i−D with
D = chunk·(ahead+1) + 4 + min(in-flight, 3) instead of i−2, so --staleness
must exceed D for any reuse (train warns otherwise). See docs/train.md.

--mem M is the memory the whole process may use (default: the limit of
the memory cgroup train runs in, when there is one; --mem-limit is a
deprecated alias). It is divided into a runtime reserve (M/8, at least
24 MiB), fixed state, the in-flight batches' working set
(cut into micro-batches when it does not fit) and the caches, and train
prints that arithmetic. The Go runtime's soft memory limit
(runtime/debug.SetMemoryLimit) is set to M less half the reserve, and the
collector's target (GOGC) to 10 %, so garbage does not take the memory
the caches and the page cache could use; the other half of the reserve
is headroom for memory outside the Go runtime and for the page cache
that mmap reads need. See docs/train.md.`,
		Example: `  ssdgnn train demo-data/cora --model gcn --hidden 64 --fanouts -1,-1 --batch-size 140 --epochs 100
  ssdgnn partition data/synth --parts 100
  ssdgnn train data/synth --selection partition --partition fennel --epochs 10 --metrics m.jsonl --plot curves.png
  ssdgnn train data/synth --selection partition --mem 2GiB --epochs 10
  ssdgnn train data/synth --spill --spill-chunk 16 --spill-ahead 1 --epochs 10`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			// 0 means nothing for these: refuse it rather than take the
			// default silently (--epochs 0 used to train 100 epochs).
			if err := requirePositive(cmd, "epochs", "hidden", "heads", "layers", "batch-size", "in-flight", "staleness",
				"eval-every", "spill-chunk", "spill-ahead"); err != nil {
				return err
			}
			var err error
			if o.Fanouts, err = parseInts("fanouts", fanouts); err != nil {
				return err
			}
			if evalFanouts != "" {
				if o.EvalFanouts, err = parseInts("eval-fanouts", evalFanouts); err != nil {
					return err
				}
			}
			if len(o.Fanouts) != o.Layers && cmd.Flags().Changed("layers") && !cmd.Flags().Changed("fanouts") {
				o.Fanouts = make([]int, o.Layers)
				for i := range o.Fanouts {
					o.Fanouts[i] = 10
				}
			}
			if o.Selection, err = sample.ParseMode(selection); err != nil {
				return err
			}
			if o.Selection == sample.ModeAuto {
				var note string
				o.Selection, note = train.AutoSelection(dir, partName)
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			if o.HistPolicy, err = histcache.ParsePolicy(histPolicy); err != nil {
				return err
			}
			if o.FeatPolicy, err = featurecache.ParsePolicy(featPolicy); err != nil {
				return err
			}
			if err := source.check(); err != nil {
				return err
			}
			ro, err := reads.options()
			if err != nil {
				return err
			}
			o.FeatRead, o.FeatIO, o.FeatCoalesceGap, o.FeatMaxReadAmp = ro.Mode, ro.IO, ro.CoalesceGap, ro.MaxReadAmplification
			if o.Dropout < 0 || o.Dropout >= 1 {
				return fmt.Errorf("--dropout %v: want a probability in [0, 1)", o.Dropout)
			}
			if o.Dropout == 0 {
				o.Dropout = -1 // an explicit 0 means no dropout
			}
			if o.WeightDecay == 0 {
				o.WeightDecay = -1
			}
			o.Seed = uint64(seed)
			// An explicit size overrides the plan's; an explicit 0 means none.
			explicit := func(name string, b byteSize) int64 {
				if cmd.Flags().Changed(name) && b == 0 {
					return -1
				}
				return int64(b)
			}
			o.FeatCacheBytes, o.HistCacheBytes, o.NeighborCacheBytes = explicit("feat-cache", featCache), explicit("hist-cache", histCache), explicit("neighbor-cache", nbrCache)
			o.Progress, o.Logger = g.progress(), g.logger()
			if o.CheckpointDir == "" {
				o.CheckpointDir = filepath.Join(dir, "checkpoints")
			}
			ckLock, err := dirlock.Acquire(o.CheckpointDir) // one trainer per checkpoint directory
			if err != nil {
				return err
			}
			defer ckLock.Release()
			be, err := newBackend(device)
			if err != nil {
				return err
			}
			defer be.Close()
			o.Backend = be
			d, err := storage.Open(dir, nil)
			if err != nil {
				return err
			}
			defer d.Close()
			if o.FeatRead == storage.ReadAuto {
				var note string
				o.FeatRead, note = train.AutoFeatRead(d)
				o.Logger.Info(note)
			}
			var mo train.MemPlanOptions
			if o.Selection == sample.ModePartition {
				pt, pf, closeParts, err := openPartitionFiles(d, dir, partName)
				if err != nil {
					return err
				}
				defer closeParts()
				o.Partitions = pf
				mo.Part, mo.Partition, mo.Cross = pt.Part(), partName, pt.Cross()
			}
			memNote := train.DefaultMem(cmd.Flags().Changed("mem"), (*int64)(&mem), cmd.Flags().Changed("mem-limit"), int64(memLimit))
			if memNote != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), memNote)
			}
			if o.Source, err = source.resolve(d, int64(mem), o.Logger); err != nil {
				return err
			}
			if mem > 0 || planFile != "" {
				mo.MemBytes, mo.PlanFile, mo.ProfileName, mo.Reprofile = int64(mem), planFile, profileName, reprofile
				mp, err := train.PlanMemory(cmd.Context(), d, &o, &mo)
				if err != nil {
					return err
				}
				mp.Apply(&o, &mo)
				how := "read"
				switch {
				case mp.Reused:
					how = "written from the saved profile, which matches this training; --reprofile profiles again"
				case mp.Created:
					how = "profiled and written"
				case mp.Replanned:
					how = "read; its caches exceeded what --mem leaves them, so re-divided from its profile"
				case mp.Remodeled:
					how = "read; re-predicted for the micro-batches --mem cuts batches into"
				}
				if mp.Warning != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", mp.Warning)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "memory plan %s (%s): feature %s, history %s, neighbour %s of %s\n", mp.PlanPath, how,
					ibytes(mp.Plan.Feature.Bytes()), ibytes(mp.Plan.History.Bytes()), ibytes(mp.Plan.Neighbor.Bytes()), ibytes(mp.MemBytes))
				if mp.Budget != nil {
					if err := train.WriteBudget(cmd.ErrOrStderr(), mp.Budget); err != nil {
						return err
					}
				}
			}
			out := cmd.OutOrStdout()
			var mf *os.File
			if metrics != "" {
				if mf, err = os.Create(metrics); err != nil {
					return err
				}
				defer mf.Close()
			}
			tw := tabwriter.NewWriter(out, 9, 0, 2, ' ', tabwriter.AlignRight)
			if !asJSON {
				if err := train.WriteEpochHeader(tw); err != nil {
					return err
				}
				tw.Flush()
			}
			var cbErr error
			o.OnEpoch = func(e train.EpochStats) {
				if mf != nil {
					b, err := json.Marshal(e)
					if err == nil {
						_, err = mf.Write(append(b, '\n'))
					}
					cbErr = errors.Join(cbErr, err)
				}
				if !asJSON {
					cbErr = errors.Join(cbErr, train.WriteEpochRow(tw, e), tw.Flush())
				}
			}
			defer train.TuneGC(int64(mem))()
			if soft := train.SoftMemoryLimit(int64(mem)); soft > 0 {
				o.Logger.Info("Go runtime tuned for the budget", "soft_limit_bytes", soft, "gc_percent", train.BudgetGCPercent)
			}
			ctx := cmd.Context()
			tr, err := train.New(ctx, d, &o)
			if err != nil {
				return err
			}
			defer tr.Close()
			rep, err := tr.Run(ctx)
			if err != nil {
				return err
			}
			if cbErr != nil {
				return cbErr
			}
			if plotPath != "" && len(rep.Epochs) > 0 {
				if err := train.Plot(rep, plotPath); err != nil {
					return err
				}
			}
			if asJSON {
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "model %s, %d layers, %d parameters; final valid %.2f%% test %.2f%%; best valid %.2f%% (test %.2f%%); %.1fs\n",
					rep.Model.Kind, rep.Model.Layers, rep.Params, 100*rep.FinalValid, 100*rep.FinalTest, 100*rep.BestValid, 100*rep.TestAtBest, rep.ElapsedSec)
				if rep.TargetValid > 0 {
					if rep.ReachedValid {
						fmt.Fprintf(out, "valid %.2f%% reached after %d epochs, %.1fs\n", 100*rep.TargetValid, rep.EpochsToTarget, rep.SecondsToTarget)
					} else {
						fmt.Fprintf(out, "valid %.2f%% not reached in %d epochs\n", 100*rep.TargetValid, len(rep.Epochs))
					}
				}
				m := rep.Memory
				dyn := ""
				if m.DynamicBytes > 0 {
					dyn = ", macro-batch neighbour caches " + ibytes(m.DynamicBytes)
				}
				hist := ibytes(m.HistoryBytes)
				if m.HistoryBytes > 0 {
					hist += fmt.Sprintf(" (staleness %d batches)", rep.Options.Staleness)
				}
				fmt.Fprintf(out, "caches: feature %s, history %s, neighbour %s; working set %s (%d in flight × %s, up to %d input rows%s); fixed state %s; total %s",
					ibytes(m.FeatureBytes), hist, ibytes(m.NeighborBytes), ibytes(m.WorkingSetBytes), m.InFlight, ibytes(m.BatchBytes), m.BatchRows, dyn, ibytes(m.FixedBytes), ibytes(m.TotalBytes))
				if m.LimitBytes > 0 {
					fmt.Fprintf(out, " of --mem %s", ibytes(m.LimitBytes))
				}
				fmt.Fprintln(out)
				if z := rep.ZeroCopy; z.Enabled || z.Mode != train.ZeroCopyAuto {
					if z.Enabled {
						var zc, up int64
						if n := len(rep.Epochs); n > 0 {
							zc, up = rep.Epochs[n-1].InputRowsZeroCopy, rep.Epochs[n-1].InputRowsUploaded
						}
						fmt.Fprintf(out, "zero-copy: on; last epoch %d input rows zero-copy, %d uploaded\n", zc, up)
					} else {
						fmt.Fprintf(out, "zero-copy: off (%s)\n", z.Reason)
					}
				}
				if ro := rep.Options; ro.Spill {
					fmt.Fprintf(out, "spill: chunks of %d batches, %d ahead; reuse depth %d (staleness %d)\n",
						ro.SpillChunk, ro.SpillAhead, train.ReuseDepth(&ro), ro.Staleness)
				}
				if rep.PlanComparison != nil {
					fmt.Fprintln(out, "planner prediction vs measured I/O saved per epoch:")
					if err := planner.WriteComparison(out, *rep.PlanComparison); err != nil {
						return err
					}
				}
			}
			if rep.Interrupted {
				if rep.Checkpoint != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "interrupted: checkpoint written to %s\nresume with: ssdgnn train %s --resume %s (and the same flags)\n", rep.Checkpoint, dir, rep.Checkpoint)
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), "interrupted (no checkpoint directory)")
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", train.DefaultModel, "model: sage, gcn or gat")
	f.IntVar(&o.Layers, "layers", train.DefaultLayers, "number of layers")
	f.IntVar(&o.Hidden, "hidden", train.DefaultHidden, "hidden width (per head for gat)")
	f.IntVar(&o.Heads, "heads", train.DefaultHeads, "attention heads (gat)")
	f.Float64Var(&o.Dropout, "dropout", train.DefaultDropout, "dropout probability on every layer's input")
	f.Float64Var(&o.LR, "lr", train.DefaultLR, "Adam learning rate")
	f.Float64Var(&o.WeightDecay, "weight-decay", train.DefaultWeightDecay, "L2 weight decay added to the gradient")
	f.IntVar(&o.Epochs, "epochs", train.DefaultEpochs, "epochs to train")
	f.IntVar(&o.BatchSize, "batch-size", train.DefaultBatchSize, "training nodes per batch")
	f.StringVar(&fanouts, "fanouts", defaultFanouts, "neighbours sampled per layer, input layer first (-1: all)")
	f.StringVar(&evalFanouts, "eval-fanouts", "", "fanouts of sampled inference on valid/test (default --fanouts; -1,-1 is exact)")
	f.IntVar(&o.EvalEvery, "eval-every", 1, "evaluate every N epochs (and after the last)")
	f.StringVar(&o.EvalMode, "eval", train.EvalLayerwise, "evaluation of valid/test: layerwise (exact, full neighbourhoods, one pass) or sampled (--eval-fanouts)")
	f.Var((*byteSize)(&o.EvalMemBytes), "eval-mem", "bound on a layer-wise evaluation chunk (default: three quarters of the training working set)")
	f.Float64Var(&o.UntilValid, "until-valid", 0, "stop after the first evaluation whose valid accuracy reaches this fraction (e.g. 0.5)")
	f.StringVar(&selection, "selection", "auto", "batch construction: auto (partition when DIR has --partition, else random), random or partition")
	f.StringVar(&partName, "partition", string(partition.Fennel), "partitioning name under DIR/partitions (partition selection)")
	f.IntVar(&o.PartsPerBatch, "parts-per-batch", 0, "partitions per macro batch (0: --batch-size / the partitioning's mean training nodes per partition)")
	f.Int64Var(&seed, "seed", 1, "random seed (same seed, same result)")
	f.IntVar(&o.Workers, "workers", 0, "sampler goroutines (0: one per core)")
	f.StringVar(&device, "device", "cpu", "compute backend: cpu, or cuda (bin/ssdgnn-cuda, built with make build-cuda)")
	source.register(f)
	f.BoolVar(&o.NoFeatureBlock, "no-feature-block", false, "on a partition-major dataset ('ssdgnn relabel'), do not load each macro batch's feature rows with sequential reads")
	reads.register(f)
	f.IntVar(&o.FeatIODepth, "io-depth", 0, fmt.Sprintf("feature reads in flight per batch (0: %d)", featurecache.DefaultIODepth))
	f.BoolVar(&o.NormalizeFeatures, "normalize-features", false, "scale every feature row to unit L1 norm")
	f.StringVar(&o.ZeroCopy, "zero-copy", train.ZeroCopyAuto, "feature-cache hits read by the backend straight from host memory: auto (on for GPU backends), on or off")
	f.StringVar(&o.StreamInput, "stream-input", train.StreamInputAuto, "aggregate the input layer on the host as its rows are read, so a batch holds its destinations, not its input rows: auto (when --mem would otherwise cut batches into micro-batches), on or off (SAGE and GCN)")
	f.BoolVar(&o.NoHist, "no-hist", false, "disable historical embeddings")
	f.Int64Var(&o.Staleness, "staleness", 0, "iterations a historical embedding stays usable (default: one epoch of batches past the reuse depth, at most 100; with --plan, what its profile assumed; 1: never reused)")
	f.StringVar(&histPolicy, "hist-policy", "staleness", "history admission: staleness or grad (FreshGNN)")
	f.Float64Var(&o.PGrad, "pgrad", histcache.DefaultPGrad, "fraction admitted by --hist-policy grad")
	f.Var(&histCache, "hist-cache", "history cache size (overrides the plan; default: 20% of nodes; 0: none)")
	f.Var(&featCache, "feat-cache", "feature cache size (overrides the plan; default none)")
	f.StringVar(&featPolicy, "feat-policy", "auto", "feature cache policy: auto (profiled with --mem/--plan, else degree), degree, profiled or dynamic")
	f.Var(&nbrCache, "neighbor-cache", "global neighbour cache size (overrides the plan; 0: none)")
	f.Var(&mem, "mem", "memory budget of the whole process (e.g. 2GiB; default: the memory cgroup's limit, if any): divided into runtime reserve, model and fixed state, in-flight batches (cut into micro-batches when they do not fit) and the planned caches")
	f.Var(&memLimit, "mem-limit", "deprecated alias of --mem")
	f.IntVar(&o.InFlight, "in-flight", 0, "batches whose input features may be in memory at once (default 2; with --mem, 1 when two would cut batches into more micro-batches; 1: no gather/compute overlap)")
	f.BoolVar(&o.Spill, "spill", false, "decouple the sample stage: sample batches ahead into a spill file and read them back (OUTRE §4.1)")
	f.IntVar(&o.SpillChunk, "spill-chunk", train.DefaultSpillChunk, "batches per spill chunk (--spill)")
	f.IntVar(&o.SpillAhead, "spill-ahead", train.DefaultSpillAhead, "written chunks that may wait unread (--spill)")
	f.StringVar(&o.SpillDir, "spill-dir", "", "directory of the spill file (--spill; default DIR/spill)")
	f.StringVar(&planFile, "plan", "", "size the caches from this plan.json (from 'ssdgnn plan') instead of profiling")
	f.StringVar(&profileName, "profile-name", train.DefaultProfileName, "name of the profile --mem plans from under DIR/profile (reused when it matches this training, else profiled and written)")
	f.BoolVar(&reprofile, "reprofile", false, "with --mem and no --plan: run the profiling epoch even when the saved profile matches (new timings, so a new beta)")
	f.StringVar(&o.CheckpointDir, "checkpoint", "", "checkpoint directory (default DIR/checkpoints)")
	f.IntVar(&o.CheckpointEvery, "checkpoint-every", 0, "write a checkpoint every N epochs (0: at the end and on interrupt)")
	f.StringVar(&o.Resume, "resume", "", "continue from this checkpoint (file or directory)")
	f.BoolVar(&asJSON, "json", false, "print the final report as JSON instead of the table")
	f.StringVar(&metrics, "metrics", "", "append one JSON line per epoch to this file")
	f.StringVar(&plotPath, "plot", "", "plot loss and accuracy against time to this PNG")
	return cmd
}

// ibytes formats a byte count (IEC units).
func ibytes(b int64) string { return humanize.IBytes(uint64(max(b, 0))) }
