package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newInferCmd) }

func newInferCmd(g *globals) *cobra.Command {
	var ckpt, outPath, logitsPath, nodesArg, fanouts, mode string
	var workers int
	var mem, evalMem byteSize
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "infer DIR",
		Short: "Predict classes with a trained checkpoint",
		Long: `infer loads a checkpoint written by 'ssdgnn train' (--checkpoint, default
DIR/checkpoints, where train writes it: the last epoch's model), runs
inference on the requested nodes and writes the predicted class of each as
an int32 .npy (in the order of --nodes), and optionally the log-softmax
rows as a float32 [n, classes] .npy. Both are written atomically.

The default --mode layerwise is exact: each layer is computed from full
neighbourhoods for the nodes the next layer needs, in id-order chunks, its
outputs kept in a temporary .npy under DIR. --mode sampled samples --fanouts
neighbours per layer instead (default the checkpoint's evaluation fanouts).
It reports the wall time and the bytes read. A progress bar per layer (or
one for the sampled pass) goes to stderr; -v logs the pass's stages.

--mem is the whole process's budget, as for train (default: the limit of
the memory cgroup it runs in, else none). Layer-wise inference bounds its
chunks by what the budget leaves after the model and the per-node state,
and refuses before reading anything, naming the least --mem, when that is
too little; --eval-mem sets the chunk bound instead. The caches training
sized are not built: each feature row is read once.

On a relabelled dataset ('ssdgnn relabel') node ids are the original
dataset's: a --nodes file holds original ids, and test, valid and all are
listed in ascending original id, so the output rows are those that infer on
the original dataset writes, and layer-wise they hold the same values.
--mode sampled draws neighbours by their place in lists the copy orders by
its own ids, so its predictions differ from the original's in a few rows
(Cora, SAGE: 23 of 1,000), as two seeds would.`,
		Example: `  ssdgnn infer demo-data/cora --checkpoint demo-data/cora/checkpoints --out preds.npy --nodes test
  ssdgnn infer demo-data/cora --out preds.npy   # the checkpoint a bare train wrote`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if outPath == "" {
				return fmt.Errorf("--out is required: the predictions' .npy")
			}
			if ckpt == "" {
				// train's default: a bare train then a bare infer.
				ckpt = filepath.Join(args[0], train.DefaultCheckpointDir)
				if _, err := os.Stat(train.ResolveCheckpoint(ckpt)); err != nil {
					return fmt.Errorf("no --checkpoint, and train's default %s holds none: give --checkpoint FILE|DIR", ckpt)
				}
			}
			if err := requirePositive(cmd, "mem", "eval-mem"); err != nil {
				return err
			}
			if err := (&train.InferOptions{Mode: mode}).Validate(); err != nil { // before the checkpoint is read
				return err
			}
			if err := cliflags.Inapplicable(cmd.Flags(), mode == train.EvalSampled, "with --mode sampled (it bounds layer-wise chunks)", "eval-mem"); err != nil {
				return err
			}
			if err := cliflags.Inapplicable(cmd.Flags(), mode != train.EvalSampled, "with --mode "+mode+" (exact, full neighbourhoods)", "fanouts"); err != nil {
				return err
			}
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			inputs := []cliflags.Input{{Flag: "--checkpoint", Path: train.ResolveCheckpoint(ckpt)}}
			if !slices.Contains([]string{train.NodesTest, train.NodesValid, train.NodesAll}, nodesArg) {
				inputs = append(inputs, cliflags.Input{Flag: "--nodes", Path: nodesArg})
			}
			if err := cliflags.CheckOutputs(d.Dir(), d.Manifest(), inputs,
				cliflags.Output{Flag: "--out", Path: outPath}, cliflags.Output{Flag: "--logits", Path: logitsPath}); err != nil {
				return err
			}
			// Only the cgroup's note: train's "no --mem" note speaks of
			// caches, which inference does not build.
			if note := train.DefaultMem(cmd.Flags().Changed("mem"), (*int64)(&mem), false, 0); note != "" && mem > 0 && !g.quiet {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			if err := train.MemWithinCgroup("infer", int64(mem)); err != nil {
				return err
			}
			defer train.TuneGC(int64(mem))()
			tr, err := train.NewFromCheckpoint(cmd.Context(), d, ckpt, &train.RestoreOptions{Workers: workers, Progress: g.progress(), Logger: g.logger(), MemBytes: int64(mem)})
			if err != nil {
				return err
			}
			// A model of another dataset with the same shapes predicts,
			// but rarely what the user meant: say so.
			if other := tr.OtherData(); other != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: %s\n", train.ResolveCheckpoint(ckpt), other)
			}
			defer tr.Close()
			// Read under the tuned collector: a --nodes file can hold
			// millions of ids.
			nodes, err := tr.InferNodes(nodesArg, int64(mem))
			if err != nil {
				return err
			}
			io := &train.InferOptions{Mode: mode, PredPath: outPath, LogitsPath: logitsPath, MemBytes: int64(mem), ChunkBytes: int64(evalMem)}
			if fanouts != "" {
				if io.Fanouts, err = cliflags.ParseInts("fanouts", fanouts); err != nil {
					return err
				}
			}
			rep, err := tr.Infer(cmd.Context(), nodes, io)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			acc := "no labelled nodes among them"
			if rep.Labelled > 0 {
				acc = fmt.Sprintf("accuracy on %d labelled nodes %.2f%%", rep.Labelled, 100*rep.Accuracy)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d predictions written to %s; %s; %s inference %.1fs, %s read (disk %s); the model after %s\n",
				rep.Nodes, outPath, acc, rep.Mode, rep.Seconds, ibytes(rep.BytesRead), ibytes(max(rep.IOReadBytes, 0)), train.ModelAfter(rep.CheckpointEpochs, rep.CheckpointBatches))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ckpt, "checkpoint", "", "checkpoint file or directory (default DIR/checkpoints, where train writes it)")
	f.StringVar(&outPath, "out", "", "predictions .npy (int32 per node; required)")
	f.StringVar(&logitsPath, "logits", "", "also write log-softmax rows (float32 [n, classes]) to this .npy")
	f.StringVar(&nodesArg, "nodes", train.NodesTest, "nodes to predict: test, valid, all, or a .npy of ids (any integer dtype)")
	f.Var(&mem, "mem", "the whole process's memory budget (default: the memory cgroup's limit, else none)")
	f.Var(&evalMem, "eval-mem", "bound on a layer-wise chunk (default: three quarters of what --mem leaves)")
	f.StringVar(&mode, "mode", train.EvalLayerwise, "inference: layerwise (exact, full neighbourhoods, one layer at a time) or sampled (--fanouts)")
	f.StringVar(&fanouts, "fanouts", "", "sampled inference fanouts (default: the checkpoint's eval fanouts)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.IntVar(&workers, "workers", 0, "sampler goroutines (0: one per core)")
	return cmd
}
