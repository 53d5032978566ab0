package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newTrainCmd) }

func newTrainCmd(g *globals) *cobra.Command {
	var t cliflags.Train
	o := &t.Options
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
--checkpoint-every epochs and at the end (a checkpoint there that this run
does not resume is kept as checkpoint.prev.ssdc); Ctrl-C (or SIGTERM, SIGHUP) during
training writes one and exits 0, and prints the command that resumes it.
Interrupted earlier (during the profiling epoch that --mem may run) there
is nothing to keep: it exits 1, saving nothing. --resume continues from a
checkpoint.

--mem B sizes the feature, history and neighbour caches with the memory
planner: from --plan FILE when given, otherwise from the profile saved
under DIR/profile/--profile-name when it matches this training (dataset,
partitioning, batches, read options; without --profile-name, train's own
profile "train", else the one 'ssdgnn profile' saved), else after a
profiling epoch that saves it there. The plan goes to the checkpoint
directory's plan.json. Reusing the profile keeps its measured beta, so
runs with the same flags and seed plan the same caches; --reprofile
profiles again. A dataset that another command is writing, or that is
read-only, is not written to: the profile is then kept in memory only. An explicit
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
of --spill-chunk batches, at most --spill-ahead chunks waiting (with history,
the chunks of D + in-flight batches), and read back
by the gather stage; the file is deleted after the epoch. With history on,
batch i's reuse set is then decided after compute of batch i−D with
D = chunk·(ahead+1) + 4 + min(in-flight, 3) instead of i−2, so --staleness
must exceed D for reuse past each epoch's first batches (train warns otherwise). See docs/train.md.

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
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if _, err := t.Parse(cmd.Flags(), dir); err != nil {
				return err
			}
			o.Progress, o.Logger = g.progress(), g.logger()
			if err := cliflags.CheckOutputDir("--checkpoint", o.CheckpointDir, dir); err != nil {
				return err
			}
			ckLock, err := dirlock.Acquire(o.CheckpointDir) // one trainer per checkpoint directory
			if errors.Is(err, dirlock.ErrNotWritable) {
				return fmt.Errorf("checkpoint directory: %w; --checkpoint DIR names another", err)
			}
			if err != nil {
				return err
			}
			defer ckLock.Release()
			if n, err := train.CleanCheckpointDir(o.CheckpointDir); err != nil {
				return err
			} else if n > 0 {
				o.Logger.Info("removed the temporary files of an interrupted checkpoint write", "dir", o.CheckpointDir, "files", n)
			}
			be, err := newBackend(t.Device)
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
			if err := train.Trainable(d); err != nil { // before any output
				return err
			}
			// The checkpoint may be the one --resume reads (it is replaced
			// atomically after); the metrics and the plot may not, nor
			// may they replace the plan --plan reads.
			if err := cliflags.CheckOutputs(dir, d.Manifest(), []cliflags.Input{{Flag: "--resume", Path: train.ResolveCheckpoint(o.Resume)}, {Flag: "--plan", Path: t.PlanFile}},
				cliflags.Output{Flag: "--checkpoint", Path: filepath.Join(o.CheckpointDir, train.CheckpointFile), MayBeInput: true},
				cliflags.Output{Flag: "--checkpoint (its plan.json)", Path: planOut(o.CheckpointDir), MayBeInput: true},
				cliflags.Output{Flag: "--metrics", Path: t.Metrics, Appends: true}, cliflags.Output{Flag: "--plot", Path: t.Plot}); err != nil {
				return err
			}
			// The checkpoint to resume, and --until-valid's valid split, are
			// checked before anything is said about the run (review C4).
			if err := cmp.Or(train.CheckResume(d, o), train.CheckUntilValid(d, o)); err != nil {
				return err
			}
			memNote := train.DefaultMem(cmd.Flags().Changed("mem"), (*int64)(&t.Mem), cmd.Flags().Changed("mem-limit"), int64(t.MemLimit))
			if memNote != "" && t.Mem == 0 && t.PlanFile != "" {
				memNote = train.NoMemWithPlan
			}
			if err := t.NoProfile(cmd.Flags(), int64(t.Mem)); err != nil { // before the note: no budget is a refusal here
				return err
			}
			if memNote != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), memNote)
			}
			if err := train.MemWithinCgroup("train", int64(t.Mem)); err != nil {
				return err
			}
			if w := train.MemAboveMachine(int64(t.Mem)); w != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			if o.FeatPolicy == featurecache.PolicyProfiled && t.Mem == 0 && t.PlanFile == "" {
				// Its counts come from the profile a budget plans with.
				return fmt.Errorf("--feat-policy profiled needs a profile: give --mem (or --plan), or another --feat-policy")
			}
			mem, beNote, err := train.LessBackend(be, int64(t.Mem))
			if err != nil {
				return err
			}
			if beNote != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), beNote)
			}
			t.Mem = byteSize(mem)
			// Before the profiling epoch too: untuned, its garbage doubled
			// the heap, and a 128 MiB cgroup OOM-killed it.
			defer train.TuneGC(int64(t.Mem))()
			if soft := train.SoftMemoryLimit(int64(t.Mem)); soft > 0 {
				o.Logger.Info("Go runtime tuned for the budget", "soft_limit_bytes", soft, "gc_percent", train.BudgetGCPercent)
			}
			res, err := t.Resolve(d, dir, 0)
			if err != nil {
				return err
			}
			defer res.Close()
			if err := cliflags.RandomBatches(cmd.Flags(), o.Selection); err != nil { // auto resolved
				return err
			}
			if res.SelectionNote != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), res.SelectionNote)
			}
			for _, note := range []string{res.FeatReadNote, res.SourceNote} {
				if note != "" {
					o.Logger.Info(note)
				}
			}
			if err := o.Validate(); err != nil { // before the plan and the table
				return err
			}
			var mo train.MemPlanOptions
			if res.Parts != nil {
				pt := res.Parts.Partitioning()
				mo.Part, mo.Partition, mo.Cross = pt.Part(), t.Partition, pt.Cross()
			}
			if t.Mem > 0 || t.PlanFile != "" {
				mo.MemBytes, mo.PlanFile, mo.ProfileName, mo.Reprofile = int64(t.Mem), t.PlanFile, t.ProfileName, t.Reprofile
				mo.PlanOut = planOut(o.CheckpointDir)
				mo.SourceAuto = t.Source == "auto"
				mp, err := train.PlanMemory(cmd.Context(), d, o, &mo)
				if err != nil {
					return err
				}
				mp.Apply(o, &mo)
				if mp.SourceMmap {
					fmt.Fprintln(cmd.ErrOrStderr(), "neighbour reads: through the mapping, not batched: the batched reads' buffers do not fit --mem")
				}
				how := "read"
				switch {
				case mp.Reused:
					how = "written from the saved profile, which matches this training; --reprofile profiles again"
				case mp.Created:
					how = "profiled and written"
				case mp.Replanned && mp.Remodeled:
					how = "read; its caches exceeded what --mem leaves them, so re-divided from its profile, then re-predicted for the batches --mem lets training gather"
				case mp.Replanned:
					how = "read; its caches exceeded what --mem leaves them, so re-divided from its profile"
				case mp.Remodeled:
					how = "read; re-predicted for the batches --mem lets training gather"
				}
				if mp.Warning != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", mp.Warning)
				}
				hist := ibytes(mp.Plan.History.Bytes())
				if o.NoHist {
					hist = "off (--no-hist)" // a plan's history cache is not built
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "memory plan %s (%s): feature %s, history %s, neighbour %s of %s\n", cmp.Or(mp.PlanPath, "not saved"), how,
					ibytes(mp.Plan.Feature.Bytes()), hist, ibytes(mp.Plan.Neighbor.Bytes()), ibytes(mp.MemBytes))
				if mp.Budget != nil {
					if err := train.WriteBudget(cmd.ErrOrStderr(), mp.Budget); err != nil {
						return err
					}
				}
			}
			out := cmd.OutOrStdout()
			var mf *os.File
			if t.Metrics != "" {
				// Appended to, as --help says: a resumed run adds its
				// epochs after the first run's.
				if mf, err = openMetrics(t.Metrics); err != nil {
					return err
				}
				defer mf.Close()
			}
			tw := tabwriter.NewWriter(out, 9, 0, 2, ' ', tabwriter.AlignRight)
			// A metrics line that cannot be written is said at once, cut
			// from the file (no half line for a JSON-lines reader), and
			// the later epochs' lines are dropped; training goes on, and
			// the command fails after its report.
			var metricsErr, tableErr error
			o.OnEpoch = func(e train.EpochStats) {
				if mf != nil && metricsErr == nil {
					if err := appendLine(mf, e); err != nil {
						metricsErr = fmt.Errorf("--metrics %s: %w; the lines of epoch %d on were dropped", t.Metrics, err, e.Epoch)
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; training goes on\n", metricsErr)
					}
				}
				if !t.JSON && tableErr == nil {
					tableErr = errors.Join(train.WriteEpochRow(tw, e), tw.Flush())
				}
			}
			ctx := cmd.Context()
			tr, err := train.New(ctx, d, o)
			if err != nil {
				return err
			}
			defer tr.Close()
			if other := tr.OtherData(); other != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: --resume %s: %s\n", train.ResolveCheckpoint(o.Resume), other)
			}
			if note := tr.NothingToTrain(); note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			// The header once New has accepted the options and the
			// checkpoint: a refusal is not printed under it.
			if !t.JSON {
				if err := train.WriteEpochHeader(tw); err != nil {
					return err
				}
				tw.Flush()
			}
			rep, err := tr.Run(ctx)
			if err != nil {
				return err
			}
			if tableErr != nil {
				return tableErr
			}
			if t.Plot != "" && len(rep.Epochs) > 0 {
				if err := train.Plot(rep, t.Plot); err != nil {
					return err
				}
			}
			if t.JSON {
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(out, train.Summary(rep))
				if line := train.CheckpointLine(rep); line != "" {
					fmt.Fprintln(out, line)
				}
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
					fmt.Fprintf(cmd.ErrOrStderr(), "interrupted: checkpoint written to %s\nresume with: %s\n", rep.Checkpoint, resumeCommand(rep.Checkpoint))
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), "interrupted (no checkpoint directory)")
				}
			}
			return metricsErr
		},
	}
	t.Register(cmd.Flags())
	return cmd
}

// openMetrics opens the --metrics file for appending. A FIFO (or another
// file that is not a regular one, such as /dev/stdout on a pipe) is opened
// without blocking: open(2) of a FIFO without a reader waited forever,
// deaf to Ctrl-C and SIGTERM, which only cancel a context.
func openMetrics(path string) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		flags |= syscall.O_NONBLOCK
	}
	f, err := os.OpenFile(path, flags, 0o666)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("--metrics %s: a FIFO that no process reads: start its reader first", path)
	}
	return f, err
}

// appendLine writes v as one JSON line at the end of f, or, when the write
// fails, cuts f back to where it ended (a short write leaves no partial
// line). A FIFO or device is written to as it is: it cannot seek, and
// refused every line ("illegal seek").
func appendLine(f *os.File, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		_, err := f.Write(append(b, '\n'))
		return err
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		if fi, serr := f.Stat(); serr == nil && fi.Mode().IsRegular() {
			err = errors.Join(err, f.Truncate(end))
		}
		return err
	}
	return nil
}

// ibytes formats a byte count (IEC units).
func ibytes(b int64) string { return humanize.IBytes(uint64(max(b, 0))) }

// resumeCommand is this process's command line with --resume CK in place
// of any --resume it had: the same flags, which resuming needs (the
// history cache is sized by --mem).
func resumeCommand(ck string) string {
	args := []string{"ssdgnn"}
	in := os.Args[1:]
	for i := 0; i < len(in); i++ {
		switch a := in[i]; {
		case a == "--resume":
			i++ // and its value
		case strings.HasPrefix(a, "--resume="):
		default:
			args = append(args, a)
		}
	}
	args = append(args, "--resume", ck)
	for i, a := range args {
		// Quoted unless every character is one a shell takes as is
		// (a path with ';', '&', '*' or '(' was printed bare).
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r))
		}) {
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(args, " ")
}

// planOut is where a training with a memory plan writes it: beside the
// checkpoint. The outputs' check takes it whether or not a plan will be
// made (a cgroup's limit can make one after the check).
func planOut(checkpointDir string) string { return filepath.Join(checkpointDir, train.PlanFile) }
