package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// globals are the flags every subcommand shares.
type globals struct {
	quiet   bool
	verbose bool
}

func (g *globals) progress() progress.Reporter { return progress.Terminal(os.Stderr, g.quiet) }

func (g *globals) logger() *slog.Logger {
	lvl := slog.LevelWarn
	if g.verbose {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "ssdgnn",
		Short: "Train GNNs on graphs larger than memory, streamed from NVMe",
		Long: `ssdgnn trains graph neural networks on graphs that do not fit in host memory,
reading the graph and features from disk and cutting the volume of data read
(the OUTRE method: partition-based batches, dual caches, historical embeddings).

A typical session:
  ssdgnn gen demo-data/synth --nodes 200000          # or: ssdgnn import ogb ...
  ssdgnn info demo-data/synth
  ssdgnn validate demo-data/synth

Every command that takes a while shows a progress bar on stderr when stderr is
a terminal; --quiet turns it off. Reports print as tables, or JSON with --json.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cliflags.RegisterGlobal(root.PersistentFlags(), &g.quiet, &g.verbose)
	root.AddCommand(newInfoCmd(g), newValidateCmd(g))
	for _, add := range extraCommands {
		root.AddCommand(add(g))
	}
	return root
}

// extraCommands lets each subcommand file register itself.
var extraCommands []func(*globals) *cobra.Command

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// byteSize is the size flag type (cliflags.ByteSize).
type byteSize = cliflags.ByteSize
