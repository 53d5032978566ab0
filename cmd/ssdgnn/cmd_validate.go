package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
)

// validateJSON is validate's --json report: the dataset's report plus
// notes, findings that are no problem (they do not fail validate).
type validateJSON struct {
	*storage.ValidateReport
	Notes []string `json:"notes,omitempty"`
}

func newValidateCmd(g *globals) *cobra.Command {
	var asJSON bool
	var maxProblems int
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Scan every byte of a dataset and report problems",
		Long: `validate checks the dataset in DIR end to end: indptr starts at 0, is monotone
and ends at num_edges; every neighbour id is in range; labels are -1 or in
[0, num_classes); splits are ascending, in range and disjoint; features have
no NaN or Inf; every file's checksum matches dataset.json. Split nodes whose
label is -1 are a warning, not a problem: -1 is a legal label and a source
may list such nodes, but training skips them (a split of 140 with 5 of them
trains on 135) and a GraphBolt export writes -1 as their target. Then it opens every
partitioning under DIR/partitions, which checks its files' checksums and
invariants, and their agreement with the dataset. Each problem names the file
and the element index. It exits non-zero if it finds any problem. Hidden
directories under DIR/partitions (.NAME.new, .NAME.old: what an interrupted
or failed 'partition --force' left) are no partitioning and no problem:
validate lists them as notes.

A relabelled dataset ('ssdgnn relabel') is also checked for its id maps
(orig_ids.npy and new_ids.npy are inverse permutations) and for the
partitioning it was relabelled by: present, with the recorded k, and every
part a contiguous id range.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requirePositive(cmd, "max-problems"); err != nil {
				return err
			}
			rep, err := storage.ValidateContext(cmd.Context(), args[0], &storage.ValidateOptions{MaxProblems: maxProblems, Progress: g.progress()})
			if err != nil && asJSON && (errors.Is(err, storage.ErrMismatch) || errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrNotDataset)) {
				// A dataset too damaged to open is validate's finding
				// too: a script reading --json gets it as one.
				if werr := writeJSON(cmd.OutOrStdout(), &storage.ValidateReport{Dir: args[0], NumProblems: 1, Problems: []string{err.Error()}, Warnings: []string{}}); werr != nil {
					return werr
				}
				return errProblems
			}
			if err != nil {
				return err
			}
			for _, perr := range validatePartitions(args[0], rep.OK()) {
				rep.NumProblems++
				if len(rep.Problems) < maxProblems {
					rep.Problems = append(rep.Problems, perr.Error())
				}
			}
			if err := validateRelabelled(args[0], rep, maxProblems); err != nil {
				return err
			}
			notes := partitionNotes(args[0])
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, validateJSON{rep, notes}); err != nil {
					return err
				}
			} else {
				for _, n := range notes {
					fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
				}
				for _, p := range rep.Problems {
					fmt.Fprintln(cmd.ErrOrStderr(), "problem:", p)
				}
				for _, w := range rep.Warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
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

// validatePartitions opens every partitioning of the dataset in dir
// (partition.Names: hidden directories, such as an interrupted --force's
// .NAME.new, are none; partition.Open checks checksums and invariants)
// and, when the dataset itself is sound (datasetOK), checks each against
// it (sample.NewPartitionFiles). It returns one error per bad
// partitioning.
func validatePartitions(dir string, datasetOK bool) []error {
	names, err := partition.Names(dir)
	if err != nil {
		return []error{err}
	}
	if len(names) == 0 {
		return nil
	}
	var d *storage.Dataset
	if datasetOK {
		if d, err = storage.Open(dir, nil); err != nil {
			return []error{err}
		}
		defer d.Close()
	}
	var errs []error
	for _, name := range names {
		p, err := partition.Open(dir, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d != nil {
			pf, err := sample.NewPartitionFiles(d, p)
			if err != nil {
				errs = append(errs, err)
			} else {
				pf.Close()
			}
		}
		p.Close()
	}
	return errs
}

// partitionNotes are validate's notes (not problems) on the partitions
// directory of the dataset in dir: what an interrupted or failed
// 'partition --force' left.
func partitionNotes(dir string) []string {
	var notes []string
	for _, name := range partition.Leftovers(dir) {
		notes = append(notes, fmt.Sprintf("%s: left by an interrupted or failed 'partition --force'; not a partitioning (the next 'ssdgnn partition %s' removes it)",
			filepath.Join(dir, partition.DirName, name), dir))
	}
	return notes
}

// validateRelabelled adds to rep the problems of a relabelled dataset's
// partitioning: it must exist, have the recorded k and every part must be
// a contiguous id range. Other damage to it is validatePartitions' to
// report.
func validateRelabelled(dir string, rep *storage.ValidateReport, maxProblems int) error {
	m, err := storage.LoadManifest(dir)
	if err != nil {
		return err
	}
	r := m.RelabelledFrom
	if r == nil {
		return nil
	}
	problem := func(err error) {
		rep.NumProblems++
		if len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	pt, err := partition.Open(dir, r.Partitioning)
	if errors.Is(err, partition.ErrNotFound) {
		problem(fmt.Errorf("relabelled dataset: its partitioning %q is missing: %w", r.Partitioning, err))
		return nil
	}
	if err != nil {
		return nil // reported by validatePartitions
	}
	defer pt.Close()
	if pt.K() != r.K {
		problem(fmt.Errorf("relabelled dataset: partitioning %q has k = %d, relabelled_from says %d", r.Partitioning, pt.K(), r.K))
	}
	if err := pt.Contiguous(); err != nil {
		problem(err)
	}
	return nil
}
