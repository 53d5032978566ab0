package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
	"github.com/ssdgnn/ssdgnn/internal/cgroup"
	"github.com/ssdgnn/ssdgnn/internal/child"
	"github.com/ssdgnn/ssdgnn/internal/cliflags"
)

func newBenchCappedCmd(g *globals) *cobra.Command {
	var limit byteSize
	var report string
	var allowUncapped bool
	cmd := &cobra.Command{
		Use:   "capped --limit SIZE [--report FILE] -- COMMAND [ARG...]",
		Short: "Run a command inside a fresh memory cgroup and report its peak, limit hits and OOM kills",
		Long: `bench capped runs COMMAND inside a new memory cgroup limited to --limit
(page cache included, as the kernel charges it), with stdin, stdout and stderr
passed through, then prints one line on stderr: the cgroup's peak usage, how
often it hit the limit, OOM kills, and the command's wall, user and system
seconds, max RSS and bytes read from the disk. --report writes the same as
JSON. It exits with the command's status (128+N for signal N).

It needs root and a cgroup v1 memory controller or cgroup v2; without them it
refuses, unless --allow-uncapped runs the command without a limit (and says
so). The bench harness (bench ooc) caps its children the same way.`,
		Example: `  ssdgnn bench capped --limit 1GiB -- ssdgnn train data/synth --mem 1GiB
  ssdgnn bench capped --limit 256MiB --report gen.json -- ssdgnn gen data/g --nodes 4000000`,
		Args: atLeastArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit <= 0 {
				return fmt.Errorf("--limit is required and must be positive")
			}
			// Refuse a --report that could not be written, or would replace
			// a device, a dataset's file or the command itself, before the
			// command runs, not after.
			var inputs []cliflags.Input
			if strings.ContainsRune(args[0], '/') {
				inputs = append(inputs, cliflags.Input{Flag: "COMMAND", Path: args[0]})
			}
			if err := cliflags.CheckOutputFiles(inputs, cliflags.Output{Flag: "--report", Path: report}); err != nil {
				return err
			}
			spec := child.Spec{Name: args[0], Argv: args, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
			loc, err := cgroup.Parent("/sys/fs/cgroup", "/proc/self/cgroup", g.logger())
			var res *child.Result
			if err == nil {
				res, err = child.Capped(cmd.Context(), loc, "capped", int64(limit), spec)
			}
			if errors.Is(err, cgroup.ErrNoCgroup) && allowUncapped {
				fmt.Fprintf(os.Stderr, "capped: running uncapped: %v\n", err)
				res, err = child.Run(cmd.Context(), spec)
			}
			if res == nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "capped: %s\n", res.Summary())
			if report != "" {
				b, jerr := json.MarshalIndent(res, "", "  ")
				if jerr = errors.Join(jerr, atomicfile.WriteFile(report, append(b, '\n'))); jerr != nil {
					err = errors.Join(err, fmt.Errorf("--report %s: %w", report, jerr))
				}
			}
			if err != nil {
				return err
			}
			if s := res.ShellStatus(); s != 0 {
				return exitStatus(s)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(&limit, "limit", "memory limit of the cgroup, page cache included (e.g. 1GiB)")
	f.StringVar(&report, "report", "", "also write the measurements as JSON to this file")
	f.BoolVar(&allowUncapped, "allow-uncapped", false, "run the command without a limit when no cgroup can be made, instead of refusing")
	return cmd
}
