package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/storage"
)

func init() { extraCommands = append(extraCommands, newPlanCmd) }

func newPlanCmd(g *globals) *cobra.Command {
	var o planner.PlanOptions
	var mem byteSize
	var name, out, plot string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plan DIR",
		Short: "Split a memory budget between the caches from a profile",
		Long: `plan reads DIR/profile/NAME (from 'ssdgnn profile') and chooses alpha, the
feature cache's share of the memory left after the cache tables (the history
cache gets 1-alpha), maximising OUTRE's Eq. 5 in steps of 0.01. A cache is
never planned larger than what it can hold: the history's share beyond its
candidates (nodes with a positive score) goes to the feature cache, so a
small alpha can still cache every feature row the profile ranks. Without
--decoupled the three caches are resident together and the neighbour cache's
share is searched as well; with it, the neighbour cache gets all of --mem
while sampling. It prints the split, the memory arithmetic, the predicted
I/O saved per epoch and why; plan.json goes to --out.`,
		Example: `  ssdgnn plan data/synth --mem 4GiB --hidden 128 --plot benefit.png
  ssdgnn plan data/synth --mem 512MiB --decoupled --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "hidden"); err != nil {
				return err
			}
			o.MemBytes = int64(mem)
			if cmd.Flags().Changed("mem") && o.MemBytes <= 0 {
				return fmt.Errorf("--mem %d: want a positive budget to divide (e.g. --mem 4GiB)", o.MemBytes)
			}
			if o.MemBytes <= 0 {
				return fmt.Errorf("--mem is required (e.g. --mem 4GiB)")
			}
			if out == "" || outpath.Within(args[0], out) {
				// Written beside the profile (or elsewhere in DIR): a
				// writer into DIR, which holds its lock. Outside it,
				// plan only reads DIR.
				lk, err := dirlock.Acquire(args[0])
				if errors.Is(err, dirlock.ErrNotWritable) {
					return fmt.Errorf("%w: plan.json goes beside the profile by default; --out FILE writes it elsewhere", err)
				}
				if err != nil {
					return err
				}
				defer lk.Release()
			}
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			if err := cliflags.CheckOutputs(args[0], d.Manifest(), nil, cliflags.Output{Flag: "--out", Path: out}, cliflags.Output{Flag: "--plot", Path: plot}); err != nil {
				return err
			}
			var stood string
			name, stood = planner.ProfileFor(args[0], name, cmd.Flags().Changed("profile"))
			if stood != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), stood)
			}
			p, err := planner.LoadProfile(args[0], name)
			if err != nil {
				return err
			}
			if err := p.Meta.OfDataset(d); err != nil {
				return err
			}
			if why := p.Meta.Outdated(); why != "" && p.HistAppear != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: profile %q: %s; its predictions are those of the older model (ssdgnn profile makes a new one)\n", name, why)
			}
			o.Indptr = d.Indptr()
			if p.Meta.Partition != "" {
				// A profile of a partitioning since replaced counts other
				// batches: say so (train profiles again rather than reuse it).
				pt, err := partition.Open(args[0], p.Meta.Partition)
				switch {
				case err == nil:
					defer pt.Close()
					if err := p.Meta.OfPartition(pt.Part()); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
					}
					if !o.Decoupled {
						o.Cross = pt.Cross()
					}
				case errors.Is(err, partition.ErrNotFound) && o.Decoupled:
					if w := p.Meta.OfPartition(nil); w != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", w)
					}
				default:
					return err
				}
			}
			res, err := planner.Plan(p, &o)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(planner.ProfilePath(args[0], name), "plan.json")
			}
			if err := res.Save(out); err != nil {
				return err
			}
			if plot != "" {
				if err := planner.PlotPlan(res, plot); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if err := planner.WritePlan(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "plan written to %s\n", out)
			return err
		},
	}
	f := cmd.Flags()
	f.Var(&mem, "mem", "host-memory budget for the caches alone (e.g. 4GiB); required. train --plan under a whole-process --mem re-divides the plan when these caches do not fit what that budget leaves them")
	f.StringVar(&name, "profile", planner.DefaultProfileName, "profile name under DIR/profile (not given: default, else DIR's only profile, such as the one train --mem saved)")
	f.IntVar(&o.Hidden, "hidden", planner.DefaultHidden, "width of the historical embeddings (float32): train's --hidden, times --heads for GAT")
	f.BoolVar(&o.Decoupled, "decoupled", false, "the Sample stage runs on its own: the neighbour cache gets all of --mem while sampling")
	f.StringVar(&out, "out", "", "where to write plan.json (default DIR/profile/NAME/plan.json)")
	f.StringVar(&plot, "plot", "", "write the benefit-vs-alpha PNG to this file")
	f.BoolVar(&asJSON, "json", false, "print plan.json's content")
	return cmd
}
