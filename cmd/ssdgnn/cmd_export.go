package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/interop/distdgl"
	"github.com/ssdgnn/ssdgnn/interop/graphbolt"
	"github.com/ssdgnn/ssdgnn/storage"
)

func init() { extraCommands = append(extraCommands, newExportCmd) }

func newExportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export FORMAT DIR OUT",
		Short: "Write a dataset for DGL: GraphBolt on one machine, DistDGL's partition pipeline on a cluster",
		Long: `export writes the dataset in DIR in a form DGL reads, streaming with bounded
memory. The layouts are specified in docs/format.md; docs/dgl.md walks
through training with them. metadata is written last, so an interrupted
export is never mistaken for a complete one; overwriting needs --force.`,
	}
	cmd.AddCommand(newExportGraphBoltCmd(g), newExportDistDGLCmd(g))
	return cmd
}

func parseIntDType(flag, s string) (npy.DType, error) {
	switch s {
	case "int32":
		return npy.Int32, nil
	case "int64":
		return npy.Int64, nil
	}
	return npy.Invalid, fmt.Errorf("--%s %q: want int32 or int64", flag, s)
}

func newExportGraphBoltCmd(g *globals) *cobra.Command {
	var idType string
	var noLink, force, asJSON bool
	var mem byteSize
	cmd := &cobra.Command{
		Use:   "graphbolt DIR OUT",
		Short: "Write a directory that dgl.graphbolt.OnDiskDataset(OUT) opens",
		Example: `  ssdgnn export graphbolt data/cora gb/cora
  ssdgnn export graphbolt data/papers gb/papers --id-dtype int32 --mem 256MiB`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseIntDType("id-dtype", idType)
			if err != nil {
				return err
			}
			if err := requirePositive(cmd, "mem"); err != nil { // 0 meant the default silently
				return err
			}
			if err := exportMem(cmd, &mem, graphbolt.DefaultMemBytes, graphbolt.MinMemBytes); err != nil {
				return err
			}
			if err := outpath.CheckDir("OUT", args[1], args[0]); err != nil { // before the lock makes OUT
				return err
			}
			relabelledNote(cmd, args[0])
			lk, err := dirlock.AcquireTransient(args[1]) // no lock file left for DGL to hash
			if err != nil {
				return err
			}
			defer lk.Release()
			rep, err := graphbolt.ExportContext(cmd.Context(), args[0], args[1], &graphbolt.Options{IDDType: d, NoLink: noLink, MemBytes: int64(mem),
				Force: force, Progress: g.progress(), Logger: g.logger()})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), strings.TrimRight(rep.String(), "\n"))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&idType, "id-dtype", "int64", "dtype of node ids in the edge array and the seeds: int32 or int64")
	fl.BoolVar(&noLink, "copy", false, "copy features.npy instead of hard linking it")
	fl.Var(&mem, "mem", fmt.Sprintf("memory budget of the whole export (default %s, or a memory cgroup's limit when that is lower; at least %s): its chunks take a quarter, and the process's memory stays within --mem (RSS also counts the pages of the CSR read through its mapping: page cache, which a memory cgroup reclaims)",
		humanize.IBytes(graphbolt.DefaultMemBytes), humanize.IBytes(graphbolt.MinMemBytes)))
	fl.BoolVar(&force, "force", false, "overwrite an existing export in OUT")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func newExportDistDGLCmd(g *globals) *cobra.Command {
	var part, labelType string
	var chunks int
	var force, asJSON bool
	var mem byteSize
	cmd := &cobra.Command{
		Use:   "distdgl DIR OUT --partition NAME",
		Short: "Write DGL's chunked graph format and a partition assignment for dispatch_data.py",
		Long: `distdgl writes OUT/metadata.json, OUT/edges/ and OUT/node_data/ (DGL's chunked
graph format) and OUT/partitions/ (_N.txt, one part id per node, and
partition_meta.json) from DIR/partitions/NAME/part.npy, so DGL's
tools/dispatch_data.py can build DistDGL partitions without DGL's own
partitioning step. The number of parts is the partitioning's: make one with
'ssdgnn partition DIR --parts K' where K is a multiple of the machine count.`,
		Example: `  ssdgnn partition data/papers --parts 4 --method fennel-exact --name dist4
  ssdgnn export distdgl data/papers chunked/papers --partition dist4 --chunks 8 --mem 256MiB`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseIntDType("label-dtype", labelType)
			if err != nil {
				return err
			}
			if err := requirePositive(cmd, "mem", "chunks"); err != nil { // 0 meant the default silently
				return err
			}
			if err := exportMem(cmd, &mem, distdgl.DefaultMemBytes, distdgl.MinMemBytes); err != nil {
				return err
			}
			if err := outpath.CheckDir("OUT", args[1], args[0]); err != nil { // before the lock makes OUT
				return err
			}
			relabelledNote(cmd, args[0])
			lk, err := dirlock.AcquireTransient(args[1]) // no lock file left for DGL to hash
			if err != nil {
				return err
			}
			defer lk.Release()
			rep, err := distdgl.ExportContext(cmd.Context(), args[0], args[1], &distdgl.Options{Partition: part, NumChunks: chunks, LabelDType: d,
				MemBytes: int64(mem), Force: force, Progress: g.progress(), Logger: g.logger()})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), rep.String())
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&part, "partition", "", "partitioning under DIR/partitions/ whose part.npy is the assignment (required)")
	fl.IntVar(&chunks, "chunks", 0, "chunks per edge and node-data file (default: the number of parts)")
	fl.StringVar(&labelType, "label-dtype", "int64", "dtype of node data label: int64 or int32")
	fl.Var(&mem, "mem", fmt.Sprintf("memory budget of the whole export (default %s, or a memory cgroup's limit when that is lower; at least %s): its chunks take a quarter, and the process's memory stays within --mem (RSS also counts the pages of the CSR read through its mapping: page cache, which a memory cgroup reclaims)",
		humanize.IBytes(distdgl.DefaultMemBytes), humanize.IBytes(distdgl.MinMemBytes)))
	fl.BoolVar(&force, "force", false, "overwrite an existing export in OUT")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	_ = cmd.MarkFlagRequired("partition")
	return cmd
}

// relabelledNote tells the user, on stderr, that an export of a
// partition-major copy speaks the copy's node ids, and that node data
// orig_id maps each to the original's.
func relabelledNote(cmd *cobra.Command, dir string) {
	m, err := storage.LoadManifest(dir)
	if err != nil || m.RelabelledFrom == nil {
		return
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is a partition-major copy of %s: the export's node ids are the copy's; node data orig_id maps each to the original's\n",
		dir, cmp.Or(m.RelabelledFrom.Original, m.RelabelledFrom.Dir))
}

// exportMem fits an export's --mem, the budget of the whole process, as
// gen's and import's (cliflags.StreamingMem), with the exporter's least.
func exportMem(cmd *cobra.Command, mem *byteSize, def, least int64) error {
	return cliflags.StreamingMem(cmd.Flags(), cmd.ErrOrStderr(), mem, def, least,
		"the program, the runtime and the writers' buffers beside the smallest chunks")
}
