package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newInferCmd) }

func newInferCmd(g *globals) *cobra.Command {
	var ckpt, outPath, logitsPath, nodesArg, fanouts string
	var workers int
	cmd := &cobra.Command{
		Use:   "infer DIR",
		Short: "Predict classes with a trained checkpoint",
		Long: `infer loads a checkpoint written by 'ssdgnn train', runs sampled inference
(--fanouts, default the checkpoint's evaluation fanouts; -1 everywhere is exact
full-neighbourhood inference) on the requested nodes and writes the predicted
class of each as an int32 .npy (in the order of --nodes), and optionally the
log-softmax rows as a float32 [n, classes] .npy. Both are written atomically.`,
		Example: `  ssdgnn infer demo-data/cora --checkpoint demo-data/cora/checkpoints --out preds.npy --nodes test`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ckpt == "" || outPath == "" {
				return fmt.Errorf("--checkpoint and --out are required")
			}
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			var nodes []int64
			switch nodesArg {
			case "test":
				nodes = d.TestIdx()
			case "valid":
				nodes = d.ValidIdx()
			case "all":
				nodes = make([]int64, d.NumNodes())
				for i := range nodes {
					nodes[i] = int64(i)
				}
			default:
				if nodes, err = readIDs(nodesArg); err != nil {
					return err
				}
				for _, v := range nodes {
					if v < 0 || v >= d.NumNodes() {
						return fmt.Errorf("%s: node %d out of range [0,%d)", nodesArg, v, d.NumNodes())
					}
				}
			}
			tr, err := train.NewFromCheckpoint(cmd.Context(), d, ckpt, workers)
			if err != nil {
				return err
			}
			defer tr.Close()
			fo := tr.Options().EvalFanouts
			if fanouts != "" {
				if fo, err = parseInts("fanouts", fanouts); err != nil {
					return err
				}
			}
			logp, err := tr.Predict(cmd.Context(), nodes, fo)
			if err != nil {
				return err
			}
			c := tr.Model().Config().Classes
			pred := make([]int32, len(nodes))
			correct, labelled := 0, 0
			labels := d.Labels()
			for i := range nodes {
				best := 0
				for k := 1; k < c; k++ {
					if logp[i*c+k] > logp[i*c+best] {
						best = k
					}
				}
				pred[i] = int32(best)
				if l := labels[nodes[i]]; l >= 0 {
					labelled++
					if l == pred[i] {
						correct++
					}
				}
			}
			if err := writeNpy(outPath, npy.Int32, []int64{int64(len(pred))}, func(w *bufio.Writer) error {
				for _, p := range pred {
					if err := binary.Write(w, binary.LittleEndian, p); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
			if logitsPath != "" {
				if err := writeNpy(logitsPath, npy.Float32, []int64{int64(len(nodes)), int64(c)}, func(w *bufio.Writer) error {
					var b [4]byte
					for _, x := range logp {
						binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
						if _, err := w.Write(b[:]); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					return err
				}
			}
			acc := 0.0
			if labelled > 0 {
				acc = float64(correct) / float64(labelled)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d predictions written to %s; accuracy on %d labelled nodes %.2f%%\n", len(pred), outPath, labelled, 100*acc)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ckpt, "checkpoint", "", "checkpoint file or directory (required)")
	f.StringVar(&outPath, "out", "", "predictions .npy (int32 per node; required)")
	f.StringVar(&logitsPath, "logits", "", "also write log-softmax rows (float32 [n, classes]) to this .npy")
	f.StringVar(&nodesArg, "nodes", "test", "nodes to predict: test, valid, all, or an int64/int32 .npy of ids")
	f.StringVar(&fanouts, "fanouts", "", "inference fanouts (default: the checkpoint's eval fanouts)")
	f.IntVar(&workers, "workers", 0, "sampler goroutines (0: one per core)")
	return cmd
}

// writeNpy writes a .npy atomically; body writes the little-endian data.
func writeNpy(path string, dt npy.DType, shape []int64, body func(*bufio.Writer) error) error {
	hdr, err := npy.EncodeHeader(dt, shape)
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if err := body(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Commit()
}

// readIDs reads a 1-D int64 or int32 .npy of node ids.
func readIDs(path string) ([]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, err := npy.ParseHeader(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(h.Shape) != 1 || int64(len(b)) < h.DataOffset+h.DataBytes() {
		return nil, fmt.Errorf("%s: want a complete 1-D array, shape %v", path, h.Shape)
	}
	data := b[h.DataOffset : h.DataOffset+h.DataBytes()]
	switch h.DType {
	case npy.Int64:
		return append([]int64(nil), npy.AsInt64(data)...), nil
	case npy.Int32:
		v := npy.AsInt32(data)
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: dtype %v, want int64 or int32", path, h.DType)
}
