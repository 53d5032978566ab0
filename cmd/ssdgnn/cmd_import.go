package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/dirlock"
	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/internal/outpath"
	"github.com/ssdgnn/ssdgnn/storage/importer"
)

func init() { extraCommands = append(extraCommands, newImportCmd) }

// importFlags are shared by every import format.
type importFlags struct {
	name                     string
	symmetrize               bool
	keepSelfLoops, keepDupes bool
	featDType                string
	numClasses               int64
	splitFrac                string
	seed                     int64
	mem                      byteSize
	tempDir                  string
	force, asJSON            bool
	allowNonFinite           bool
}

func (f *importFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "dataset name (default: the source's base name)")
	fl.BoolVar(&f.symmetrize, "symmetrize", true, "store every edge in both directions (--symmetrize=false stores edge u->v only in v's neighbour list)")
	fl.BoolVar(&f.keepSelfLoops, "keep-self-loops", false, "keep edges (v,v) instead of dropping and counting them")
	fl.BoolVar(&f.keepDupes, "keep-duplicates", false, "keep repeated edges instead of dropping and counting them")
	fl.StringVar(&f.featDType, "feat-dtype", "float32", "stored feature dtype: float32 or float16")
	fl.Int64Var(&f.numClasses, "num-classes", 0, "number of classes; labels must be below it (0: largest label + 1)")
	fl.StringVar(&f.splitFrac, "split-frac", "0.6,0.2,0.2", "train,valid,test fractions of labelled nodes for a seeded random split, used when the source has none; sizes are rounded, and when they add up to more than the labelled nodes, test (then valid) shrinks")
	fl.Int64Var(&f.seed, "seed", 1, "seed of the random split")
	fl.Var(&f.mem, "mem", fmt.Sprintf("memory budget of the whole import (default %s, or a memory cgroup's limit when that is lower): the edge sort gets --mem less %s and peak RSS stays within --mem",
		humanize.IBytes(importer.DefaultMemBytes), humanize.IBytes(importer.ReserveBytes)))
	fl.StringVar(&f.tempDir, "temp-dir", "", "where sorted runs are spilled (default: inside the output directory)")
	fl.BoolVar(&f.allowNonFinite, "allow-nonfinite", false, "store NaN/Inf features, and finite values beyond the stored dtype's range (float64 beyond float32's ±3.4e38, or beyond float16's ±65504) as the ±Inf they overflow to, with a warning that counts each kind, instead of failing; validate will flag the dataset")
	fl.BoolVar(&f.force, "force", false, "replace an existing dataset in OUT (it stays whole until the new one is complete, so this needs room for both)")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
}

func (f *importFlags) options(cmd *cobra.Command, g *globals) (*importer.Options, error) {
	if err := requirePositive(cmd, "mem", "num-nodes"); err != nil {
		return nil, err
	}
	if err := cliflags.StreamingMem(cmd.Flags(), cmd.ErrOrStderr(), &f.mem, importer.DefaultMemBytes, importer.MinMemBytes,
		fmt.Sprintf("%s for the runtime and fixed buffers, plus the sorter's smallest buffer of %s",
			humanize.IBytes(importer.ReserveBytes), humanize.IBytes(importer.MinMemBytes-importer.ReserveBytes))); err != nil {
		return nil, err
	}
	o := &importer.Options{
		Name: f.name, Directed: !f.symmetrize, KeepSelfLoops: f.keepSelfLoops, KeepDuplicates: f.keepDupes,
		FeatDType: f.featDType, NumClasses: f.numClasses, Seed: f.seed, MemBytes: int64(f.mem),
		TempDir: f.tempDir, Force: f.force, AllowNonFinite: f.allowNonFinite, Progress: g.progress(), Logger: g.logger(),
	}
	parts := strings.Split(f.splitFrac, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("--split-frac %q: want three comma-separated fractions", f.splitFrac)
	}
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("--split-frac %q: field %d: %v", f.splitFrac, i+1, err)
		}
		o.SplitFrac[i] = x
	}
	return o, nil
}

// lockImportOut checks OUT (not the source, not a plain file: C14) and
// locks it.
func lockImportOut(src, out string) (*dirlock.Lock, error) {
	if outpath.Same(src, out) { // the source's own files would be overwritten
		return nil, fmt.Errorf("%w: OUT %s is the source %s; import into another directory", outpath.ErrInput, out, src)
	}
	if err := outpath.CheckIsDir("OUT", out); err != nil {
		return nil, err
	}
	return dirlock.Acquire(out)
}

func (f *importFlags) print(cmd *cobra.Command, rep importer.Report) error {
	if f.asJSON {
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.TrimRight(rep.String(), "\n"))
	return err
}

func newImportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import FORMAT SRC OUT",
		Short: "Convert a graph in OGB, IGB/NumPy or edge-list form into a dataset",
		Long: `import converts a graph into an ssdgnn dataset in OUT, streaming with bounded
memory: edges are sorted externally (runs spilled to disk, then merged), and
features are copied row by row. By default the graph is symmetrised and self
loops and duplicate edges are dropped and counted. A failed import leaves no
dataset behind; every error names the file and the line or element.

Edge direction, every format: an edge u->v (an edge-list line "u v", an
edge_index column or row (u, v), as DGL, PyG and OGB mean it) is stored as
u in v's neighbour list, the list v aggregates from. With the default
--symmetrize, v is also stored in u's list.`,
	}
	cmd.AddCommand(newImportOGBCmd(g), newImportNPYCmd(g), newImportEdgeListCmd(g), newImportGraphBoltCmd(g))
	return cmd
}

func newImportOGBCmd(g *globals) *cobra.Command {
	f := &importFlags{}
	var split string
	cmd := &cobra.Command{
		Use:   "ogb SRC OUT",
		Short: "Import OGB's raw node-property layout (CSV or papers100M's data.npz)",
		Long: `ogb reads SRC/raw/edge.csv.gz, node-feat.csv.gz, node-label.csv.gz,
num-node-list.csv.gz and split/<name>/{train,valid,test}.csv.gz, or the binary
form SRC/raw/data.npz plus SRC/raw/node-label.npz used by ogbn-papers100M.`,
		Example: `  ssdgnn import ogb testdata/cora data/cora
  ssdgnn import ogb ~/ogb/ogbn_papers100M data/papers --split time --feat-dtype float16`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, g)
			if err != nil {
				return err
			}
			o.Split = split
			lk, err := lockImportOut(args[0], args[1])
			if err != nil {
				return err
			}
			defer lk.Release()
			rep, err := importer.ImportOGBContext(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			return f.print(cmd, rep)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&split, "split", "", "split directory under SRC/split (default: the only one present)")
	return cmd
}

func newImportNPYCmd(g *globals) *cobra.Command {
	f := &importFlags{}
	var labelFile string
	var raw []string
	var numNodes int64
	cmd := &cobra.Command{
		Use:   "npy SRC OUT",
		Short: "Import IGB's NumPy layout (paper/node_feat.npy, paper__cites__paper/edge_index.npy)",
		Long: `npy reads SRC/paper/node_feat.npy, SRC/paper/node_label_19.npy (or the file
named by --label-file) and SRC/paper__cites__paper/edge_index.npy. IGB large
and full ship headerless raw arrays named .npy: describe each with
--raw ROLE=DTYPE:D0xD1, for roles feat, label and edges. The node count is
the feature (else label) row count; a directory with only the edge array
needs --num-nodes.`,
		Example: `  ssdgnn import npy ~/igb/small/processed data/igb-small
  ssdgnn import npy ~/igb/large/processed data/igb-large \
      --raw feat=float32:100000000x1024 --raw label=float32:100000000 --raw edges=int64:1223571364x2`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, g)
			if err != nil {
				return err
			}
			o.LabelFile, o.NumNodes = labelFile, numNodes
			if o.Raw, err = parseRawSpecs(raw); err != nil {
				return err
			}
			lk, err := lockImportOut(args[0], args[1])
			if err != nil {
				return err
			}
			defer lk.Release()
			rep, err := importer.ImportNPYContext(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			return f.print(cmd, rep)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&labelFile, "label-file", "", "label file under SRC/paper (default node_label_19.npy)")
	cmd.Flags().StringArrayVar(&raw, "raw", nil, "ROLE=DTYPE:SHAPE for a headerless file, e.g. feat=float32:1000x1024 (repeatable)")
	cmd.Flags().Int64Var(&numNodes, "num-nodes", 0, "number of nodes (default: the rows of node_feat.npy, else of the labels; required for an edges-only directory)")
	return cmd
}

// parseRawSpecs parses --raw ROLE=DTYPE:D0xD1 flags.
func parseRawSpecs(specs []string) (map[string]importer.RawSpec, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := map[string]importer.RawSpec{}
	for _, s := range specs {
		role, rest, ok := strings.Cut(s, "=")
		dt, shape, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			return nil, fmt.Errorf("--raw %q: want ROLE=DTYPE:SHAPE, e.g. feat=float32:1000x1024", s)
		}
		d, err := npy.ParseDType(dt)
		if err != nil {
			return nil, fmt.Errorf("--raw %q: %w", s, err)
		}
		var dims []int64
		for _, p := range strings.Split(shape, "x") {
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--raw %q: bad dimension %q", s, p)
			}
			dims = append(dims, n)
		}
		out[role] = importer.RawSpec{DType: d, Shape: dims}
	}
	return out, nil
}

func newImportEdgeListCmd(g *globals) *cobra.Command {
	f := &importFlags{}
	var delim, comment, feat, labels string
	var numNodes int64
	cmd := &cobra.Command{
		Use:   "edgelist FILE OUT",
		Short: "Import a text edge list (src dst per line), with optional features and labels",
		Example: `  ssdgnn import edgelist edges.txt data/g
  ssdgnn import edgelist edges.csv.gz data/g --delim , --feat feats.npy --labels labels.txt --num-classes 10`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, g)
			if err != nil {
				return err
			}
			switch delim {
			case "", " ", "space", "whitespace":
				o.Delim = ' '
			case "\\t", "tab":
				o.Delim = '\t'
			default:
				if len(delim) != 1 {
					return fmt.Errorf("--delim %q: want one character, 'tab' or 'whitespace'", delim)
				}
				o.Delim = delim[0]
			}
			o.Comment, o.FeatFile, o.LabelFile, o.NumNodes = comment, feat, labels, numNodes
			lk, err := lockImportOut(args[0], args[1])
			if err != nil {
				return err
			}
			defer lk.Release()
			rep, err := importer.ImportEdgeListContext(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			return f.print(cmd, rep)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&delim, "delim", "whitespace", "field delimiter: whitespace, tab, or one character such as ,")
	fl.StringVar(&comment, "comment", "#", "lines starting with this prefix are skipped")
	fl.StringVar(&feat, "feat", "", "features: a .npy [N,D] array or CSV rows, one per node")
	fl.StringVar(&labels, "labels", "", "labels: one integer per line, or a .npy array")
	fl.Int64Var(&numNodes, "num-nodes", 0, "number of nodes (default: largest id + 1)")
	return cmd
}

func newImportGraphBoltCmd(g *globals) *cobra.Command {
	f := &importFlags{}
	cmd := &cobra.Command{
		Use:   "graphbolt SRC OUT",
		Short: "Import a DGL GraphBolt on-disk dataset (metadata.yaml with a raw graph section)",
		Long: `graphbolt reads SRC/metadata.yaml and the numpy files it names: the (2, E)
edge array (edge src->dst is stored in dst's neighbour list, as every
importer does; the inverse of 'ssdgnn export graphbolt'), node features "feat" and "label", and the first
task's train/validation/test seeds (and labels). Unlike the other formats
the edges are kept exactly as given by default, and features keep their
stored dtype, so importing an export gives the dataset back. --symmetrize
stores each edge in both directions and then drops duplicate edges (the
reverse copies of an already symmetric graph included), as the other
formats do, unless --keep-duplicates is given. While duplicates are kept,
each neighbour list keeps the order of the edge array.

The first task's sets are the split. Without any task in metadata.yaml, a
labelled dataset gets a seeded random split (--split-frac, --seed) as the
other formats do; a task without sets means no split. Set labels must agree
with the "label" feature when both are given.`,
		Example: `  ssdgnn import graphbolt gb/cora data/cora-again`,
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, g)
			if err != nil {
				return err
			}
			// Symmetrising adds the reverse of every edge; in an already
			// symmetric graph those are copies of edges present, which
			// would then be stored twice (I9). As in the other formats,
			// --symmetrize drops duplicates unless --keep-duplicates is
			// given explicitly.
			if f.symmetrize && !cmd.Flags().Changed("keep-duplicates") {
				o.KeepDuplicates = false
			}
			lk, err := lockImportOut(args[0], args[1])
			if err != nil {
				return err
			}
			defer lk.Release()
			rep, err := importer.ImportGraphBoltContext(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			return f.print(cmd, rep)
		},
	}
	f.register(cmd)
	// A GraphBolt edge list is already the directed edge set to store.
	f.symmetrize, f.keepSelfLoops, f.keepDupes, f.featDType = false, true, true, ""
	for name, def := range map[string]string{"symmetrize": "false", "keep-self-loops": "true", "keep-duplicates": "true", "feat-dtype": ""} {
		cmd.Flags().Lookup(name).DefValue = def
	}
	cmd.Flags().Lookup("feat-dtype").Usage = "stored feature dtype: float32 or float16 (default: as in the source)"
	return cmd
}
