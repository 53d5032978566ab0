package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/progress"
)

// globals are the flags every subcommand shares.
type globals struct {
	quiet   bool
	verbose bool
	stderr  io.Writer // the command's error stream (set before any RunE)
}

func (g *globals) errOut() io.Writer {
	if g.stderr == nil {
		return os.Stderr
	}
	return g.stderr
}

func (g *globals) progress() progress.Reporter { return progress.Terminal(g.errOut(), g.quiet) }

func (g *globals) logger() *slog.Logger {
	lvl := slog.LevelWarn
	if g.verbose {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(g.errOut(), &slog.HandlerOptions{Level: lvl}))
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
		// Logs and progress bars go where the command's messages go.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { g.stderr = cmd.ErrOrStderr() },
	}
	cliflags.RegisterGlobal(root.PersistentFlags(), &g.quiet, &g.verbose)
	root.AddCommand(newInfoCmd(g), newValidateCmd(g))
	for _, add := range extraCommands {
		root.AddCommand(add(g))
	}
	// Cobra adds its completion command when it runs: add it now, so that
	// it too refuses a shell it does not know ('completion foo' exited 0).
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		refuseUnknown(c)
	}
	return root
}

// refuseUnknown makes every group command (one that only holds
// subcommands, as bench and export do) fail on an argument that names no
// subcommand, and bare. Cobra would print the group's help and exit 0, so
// a typo such as "ssdgnn bench oc" did nothing and reported success.
func refuseUnknown(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknown(sub)
	}
	if c.Runnable() || !c.HasSubCommands() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		if len(args) == 0 {
			// Bare, it prints its help and fails: a script that forgot
			// the format did nothing.
			if err := cmd.Help(); err != nil {
				return err
			}
			return fmt.Errorf("%s: missing %s (want one of: %s)", commandName(cmd), subcommandWord(cmd), strings.Join(names, ", "))
		}
		return fmt.Errorf("unknown command %q for %q (want one of: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
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

// perSecond is a rate with one decimal and an SI prefix, for a unit
// written after it: "235.6 edges/s", "11.7 k edges/s". humanize's SI form
// ends in the prefix, so a rate under 1,000 left a trailing space
// ("235.6  edges/s").
func perSecond(x float64) string {
	return strings.TrimSpace(humanize.SIWithDigits(x, 1, ""))
}
