package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/membudget"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/planner"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

func init() { extraCommands = append(extraCommands, newRelabelCmd) }

func newRelabelCmd(g *globals) *cobra.Command {
	var name, order, heatProfile string
	var mem byteSize = partition.DefaultRelabelMem
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "relabel DIR OUT",
		Short: "Write a partition-major copy of a dataset: every part a contiguous id range",
		Long: `relabel writes to OUT (a new directory, never DIR itself) the dataset in DIR
with its nodes renumbered part by part of the partitioning --partition
(without the flag: fennel, or the dataset's only partitioning), so that
every part is one contiguous id range. Within a part, --order degree
(the default) puts the nodes that most neighbour lists name first, so that
the rows a batch needs cluster and merged reads carry fewer unneeded rows;
--order heat does the same by a profile's feature counts (--heat-profile,
a profile of DIR); --order id keeps ascending source ids. Features, CSR,
labels and the splits are rewritten; orig_ids.npy (new -> old) and
new_ids.npy (old -> new) are stored, and the partitioning is carried over
under the same name, so 'ssdgnn rr' and 'ssdgnn train' work on OUT at
once. 'ssdgnn infer' on OUT takes and writes original ids.

--mem is the whole process's budget (in a memory cgroup of --mem it is
not OOM-killed): ` + humanize.IBytes(membudget.ReserveBytes) + ` of it is left to the runtime and the page cache
of the files read and written, the old -> new id map (4 bytes a node)
must fit, and for --order degree or heat the sort keys (4 bytes a node)
and the largest part's members and adjacency; everything else streams.
(--heat-profile's file is read before the budget starts, 4 bytes a node
for a moment.) Files are written atomically and dataset.json last, so an
interrupted run leaves no dataset in OUT. See docs/format.md.`,
		Example: `  ssdgnn partition data/synth --parts 1000
  ssdgnn relabel data/synth data/synth-pm --partition fennel --mem 256MiB
  ssdgnn profile data/synth --name p && ssdgnn relabel data/synth data/synth-heat --order heat --heat-profile p`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "mem"); err != nil { // 0 meant the default silently
				return err
			}
			// Relabel's least depends on the dataset: it refuses it later.
			if err := cliflags.StreamingMem(cmd.Flags(), cmd.ErrOrStderr(), &mem, partition.DefaultRelabelMem, 0, ""); err != nil {
				return err
			}
			if err := outpath.CheckDir("OUT", args[1], args[0]); err != nil { // before the lock makes OUT
				return err
			}
			lk, err := dirlock.Acquire(args[1]) // the writer of OUT
			if err != nil {
				return err
			}
			defer lk.Release()
			d, err := storage.Open(args[0], nil)
			if err != nil {
				return err
			}
			defer d.Close()
			var stood string
			name, stood, _, _ = train.PartitionFor(args[0], name, cmd.Flags().Changed("partition"))
			if stood != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), stood)
			}
			pt, err := partition.Open(args[0], name)
			if err != nil {
				return err
			}
			defer pt.Close()
			o := &partition.RelabelOptions{Order: partition.RelabelOrder(order),
				MemBytes: int64(mem), Force: force, Progress: g.progress(), Logger: g.logger()}
			if heatProfile != "" || o.Order == partition.RelabelByHeat {
				if o.Heat, err = relabelHeat(d, o.Order, heatProfile); err != nil {
					return err
				}
			}
			st, err := partition.Relabel(cmd.Context(), d, pt, args[1], o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "relabelled\t%s -> %s by partitioning %s (k = %d), nodes within each part in %s order\n", st.Source, st.Out, st.Partitioning, st.K, st.Order)
			fmt.Fprintf(tw, "graph\t%s nodes, %s edges\n", humanize.Comma(st.NumNodes), humanize.Comma(st.NumEdges))
			fmt.Fprintf(tw, "written\t%s; read %s in %s reads\n", ibytes(st.BytesWritten), ibytes(st.BytesRead), humanize.Comma(st.ReadCalls))
			fmt.Fprintf(tw, "time\t%.2fs (CSR %.2fs, features %.2fs)\n", st.WallSeconds, st.CSRSeconds, st.FeatSeconds)
			fmt.Fprintf(tw, "memory\tpeak RSS %s; id map %s, sort keys and largest part %s of --mem %s\n",
				ibytes(st.PeakRSSBytes), ibytes(st.MapBytes), ibytes(st.KeyBytes), ibytes(st.MemBytes))
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "partition", string(partition.Fennel), "partitioning of DIR whose parts become id ranges (not given: fennel, else DIR's only one)")
	f.StringVar(&order, "order", string(partition.DefaultRelabelOrder), fmt.Sprintf("order of the nodes within each part: one of %v", partition.RelabelOrders))
	f.StringVar(&heatProfile, "heat-profile", "", "profile of DIR whose feature counts order each part (--order heat)")
	f.Var(&mem, "mem", "the whole process's memory budget (the id map needs 4 bytes a node plus 41 MiB; --order degree or heat 4 more a node and the largest part)")
	f.BoolVar(&force, "force", false, "replace a dataset in OUT (it stays whole until the new copy is complete, so this needs room for both)")
	f.BoolVar(&asJSON, "json", false, "print the stats as JSON")
	return cmd
}

// relabelHeat loads the feature counts of profile name of d as the heat of
// --order heat, refusing a profile of another dataset.
func relabelHeat(d *storage.Dataset, order partition.RelabelOrder, name string) ([]uint32, error) {
	if order != partition.RelabelByHeat || name == "" {
		return nil, fmt.Errorf("relabel: --heat-profile goes with --order %s (given --order %s, --heat-profile %q)", partition.RelabelByHeat, order, name)
	}
	p, err := planner.LoadProfileFeat(d.Dir(), name)
	if err != nil {
		return nil, err
	}
	// LoadProfileFeat checked len(Feat) against the profile's node count;
	// the same dataset has the same.
	if err := p.Meta.OfDataset(d); err != nil {
		return nil, err
	}
	return p.Feat, nil
}
