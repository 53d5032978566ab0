package main

import (
	"fmt"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

func newValidateCmd(g *globals) *cobra.Command {
	var asJSON bool
	var maxProblems int
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Scan every byte of a dataset and report problems",
		Long: `validate checks the dataset in DIR end to end: indptr starts at 0, is monotone
and ends at num_edges; every neighbour id is in range; labels are -1 or in
[0, num_classes); splits are ascending, in range and disjoint; features have
no NaN or Inf; every file's checksum matches dataset.json. Each problem names
the file and the element index. It exits non-zero if it finds any problem.

A relabelled dataset ('ssdgnn relabel') is also checked for its id maps
(orig_ids.npy and new_ids.npy are inverse permutations) and its carried-over
partitioning (verified, and every part a contiguous id range).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := storage.Validate(args[0], &storage.ValidateOptions{MaxProblems: maxProblems, Progress: g.progress()})
			if err != nil {
				return err
			}
			if err := validateRelabelled(args[0], rep); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintln(cmd.ErrOrStderr(), "problem:", p)
				}
				if n := rep.NumProblems - int64(len(rep.Problems)); n > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "... and %d more problems\n", n)
				}
				fmt.Fprintf(out, "scanned %s: %d problems, %d NaN and %d Inf features, %d unlabelled nodes, %d isolated nodes\n",
					humanize.IBytes(uint64(rep.BytesScanned)), rep.NumProblems, rep.FeatureNaN, rep.FeatureInf, rep.Unlabelled, rep.IsolatedNode)
			}
			if !rep.OK() {
				return errProblems
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().IntVar(&maxProblems, "max-problems", 20, "list at most this many problems (all are counted)")
	return cmd
}

// validateRelabelled adds to rep the problems of a relabelled dataset's
// partitioning: it must verify and every part must be a contiguous range.
func validateRelabelled(dir string, rep *storage.ValidateReport) error {
	m, err := storage.LoadManifest(dir)
	if err != nil {
		return err
	}
	if m.RelabelledFrom == nil {
		return nil
	}
	pt, err := partition.Open(dir, m.RelabelledFrom.Partitioning)
	if err != nil {
		rep.NumProblems++
		rep.Problems = append(rep.Problems, fmt.Sprintf("partitioning %q of a relabelled dataset: %v", m.RelabelledFrom.Partitioning, err))
		return nil
	}
	defer pt.Close()
	if pt.K() != m.RelabelledFrom.K {
		err = fmt.Errorf("partitioning %q has k = %d, relabelled_from says %d", m.RelabelledFrom.Partitioning, pt.K(), m.RelabelledFrom.K)
	}
	if err == nil {
		err = pt.Verify()
	}
	if err == nil {
		err = pt.Contiguous()
	}
	if err != nil {
		rep.NumProblems++
		rep.Problems = append(rep.Problems, err.Error())
	}
	return nil
}
