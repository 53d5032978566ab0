package main

import (
	"cmp"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

// infoReport is the JSON shape of `ssdgnn info --json`.
type infoReport struct {
	Dir         string              `json:"dir"`
	Name        string              `json:"name"`
	NumNodes    int64               `json:"num_nodes"`
	NumEdges    int64               `json:"num_edges"`
	FeatDim     int64               `json:"feat_dim"`
	FeatDType   string              `json:"feat_dtype"`
	NumClasses  int64               `json:"num_classes"`
	NumTrain    int64               `json:"num_train"`
	NumValid    int64               `json:"num_valid"`
	NumTest     int64               `json:"num_test"`
	Symmetrized bool                `json:"symmetrized"`
	BytesOnDisk int64               `json:"bytes_on_disk"`
	AvgDegree   float64             `json:"avg_degree"`
	Files       []storage.FileEntry `json:"files"`
	// Partitionings are the names under partitions/; RelabelledFrom is
	// set for a partition-major copy (ids are not the source's).
	Partitionings  []string             `json:"partitionings"`
	RelabelledFrom *storage.Relabelling `json:"relabelled_from,omitempty"`
}

func newInfoCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info DIR",
		Short: "Print a dataset's size, shape and splits",
		Long: `info opens the dataset in DIR (checking every file against dataset.json) and
prints its sizes. It reads no data; run validate for a full scan.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// info reads only the manifest and shapes: no invariant scan.
			d, err := storage.Open(args[0], &storage.OpenOptions{Advice: storage.AdviceRandom, SkipChecks: true})
			if err != nil {
				return err
			}
			defer d.Close()
			m := d.Manifest()
			r := infoReport{
				Dir: args[0], Name: m.Name, NumNodes: m.NumNodes, NumEdges: m.NumEdges,
				FeatDim: m.FeatDim, FeatDType: m.FeatDType, NumClasses: m.NumClasses,
				NumTrain: int64(len(d.TrainIdx())), NumValid: int64(len(d.ValidIdx())), NumTest: int64(len(d.TestIdx())),
				Symmetrized: m.Symmetrized, BytesOnDisk: d.BytesOnDisk(), Files: m.Files, RelabelledFrom: m.RelabelledFrom,
			}
			if r.Partitionings, err = partition.Names(args[0]); err != nil {
				return err
			}
			if r.Partitionings == nil {
				r.Partitionings = []string{} // JSON [], not null
			}
			if m.NumNodes > 0 {
				r.AvgDegree = float64(m.NumEdges) / float64(m.NumNodes)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, r)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "dataset\t%s (%s)\n", r.Name, r.Dir)
			fmt.Fprintf(tw, "nodes\t%s\n", humanize.Comma(r.NumNodes))
			fmt.Fprintf(tw, "edges\t%s directed (avg degree %.2f, symmetrised: %v)\n", humanize.Comma(r.NumEdges), r.AvgDegree, r.Symmetrized)
			fmt.Fprintf(tw, "features\t%d x %s\n", r.FeatDim, r.FeatDType)
			fmt.Fprintf(tw, "classes\t%d\n", r.NumClasses)
			fmt.Fprintf(tw, "split\ttrain %s / valid %s / test %s\n", humanize.Comma(r.NumTrain), humanize.Comma(r.NumValid), humanize.Comma(r.NumTest))
			fmt.Fprintf(tw, "on disk\t%s\n", humanize.IBytes(uint64(r.BytesOnDisk)))
			fmt.Fprintf(tw, "partitionings\t%s\n", cmp.Or(strings.Join(r.Partitionings, ", "), "none"))
			if rf := r.RelabelledFrom; rf != nil {
				fmt.Fprintf(tw, "relabelled\tpartition-major copy of %s (%s order, partitioning %q, %d parts): node ids are the copy's; orig_ids.npy maps them back\n",
					cmp.Or(rf.Original, rf.Dir), cmp.Or(rf.Order, "id"), rf.Partitioning, rf.K)
			}
			tw.Flush()
			fmt.Fprintln(out)
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "file\tdtype\tshape\tbytes\t")
			for _, f := range m.Files {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t\n", f.Name, f.DType, f.Shape, humanize.IBytes(uint64(f.Bytes)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
