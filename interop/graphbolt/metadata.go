package graphbolt

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MetadataName is GraphBolt's metadata file inside a dataset directory.
const MetadataName = "metadata.yaml"

// Metadata is metadata.yaml as DGL 2.5 reads it before preprocessing
// (python/dgl/graphbolt/impl/ondisk_dataset.py, preprocess_ondisk_dataset,
// and the pydantic models of ondisk_metadata.py). Keys GraphBolt accepts
// and ssdgnn does not use are ignored when parsing, as GraphBolt's
// models keep them as extra fields.
type Metadata struct {
	DatasetName   string         `yaml:"dataset_name,omitempty"`
	Graph         *Graph         `yaml:"graph,omitempty"`
	GraphTopology *GraphTopology `yaml:"graph_topology,omitempty"`
	FeatureData   []Feature      `yaml:"feature_data,omitempty"`
	Tasks         []Task         `yaml:"tasks,omitempty"`
}

// Graph is the raw graph section: node counts and edge files.
type Graph struct {
	Nodes []NodeSpec `yaml:"nodes"`
	Edges []EdgeSpec `yaml:"edges"`
}

// Int is an integer field of metadata.yaml. Unlike a plain int64, which
// go-yaml fills from a float by truncation (num: 2708.99 became 2708
// nodes), it refuses any value that is not a YAML integer, as DGL's
// pydantic models refuse a number with a fractional part.
type Int int64

// UnmarshalYAML accepts only an integer scalar.
func (i *Int) UnmarshalYAML(n *yaml.Node) error {
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q, want an integer", n.Line, n.Value)}}
	}
	*i = Int(v)
	return nil
}

// NodeSpec gives the number of nodes of one type ("" for a homogeneous
// graph).
type NodeSpec struct {
	Type string `yaml:"type,omitempty"`
	Num  Int    `yaml:"num"`
}

// EdgeSpec names one edge file: format "numpy" (a (2, E) integer array,
// row 0 sources, row 1 destinations) or "csv" (src,dst lines).
type EdgeSpec struct {
	Type   string `yaml:"type,omitempty"`
	Format string `yaml:"format"`
	Path   string `yaml:"path"`
}

// GraphTopology is the preprocessed graph (a pickled PyTorch
// FusedCSCSamplingGraph), which ssdgnn cannot read.
type GraphTopology struct {
	Type string `yaml:"type"`
	Path string `yaml:"path"`
}

// Feature is one feature file.
type Feature struct {
	Domain   string `yaml:"domain"`
	Type     string `yaml:"type,omitempty"`
	Name     string `yaml:"name"`
	Format   string `yaml:"format"`
	InMemory *bool  `yaml:"in_memory,omitempty"`
	Path     string `yaml:"path"`
}

// Task is one task with its train, validation and test sets.
type Task struct {
	Name          string   `yaml:"name,omitempty"`
	NumClasses    Int      `yaml:"num_classes,omitempty"`
	TrainSet      []TVTSet `yaml:"train_set,omitempty"`
	ValidationSet []TVTSet `yaml:"validation_set,omitempty"`
	TestSet       []TVTSet `yaml:"test_set,omitempty"`
}

// TVTSet is one set of a node type ("" for a homogeneous graph): parallel
// arrays such as seeds and labels.
type TVTSet struct {
	Type string    `yaml:"type,omitempty"`
	Data []TVTData `yaml:"data"`
}

// TVTData is one array of a set.
type TVTData struct {
	Name     string `yaml:"name,omitempty"`
	Format   string `yaml:"format"`
	InMemory *bool  `yaml:"in_memory,omitempty"`
	Path     string `yaml:"path"`
}

// Marshal encodes m as YAML.
func (m *Metadata) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("graphbolt: encode metadata: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("graphbolt: encode metadata: %w", err)
	}
	return b.Bytes(), nil
}

// MetadataError locates a problem in a metadata.yaml: Field is a path
// such as "graph.edges[0].format" (or "" for the whole file), Line the
// 1-based line when known (0 otherwise).
type MetadataError struct {
	File  string
	Field string
	Line  int
	Msg   string
}

func (e *MetadataError) Error() string {
	var b strings.Builder
	b.WriteString(ErrMetadata.Error())
	b.WriteString(": ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrMetadata) true.
func (e *MetadataError) Unwrap() error { return ErrMetadata }

// Task and set names ssdgnn writes and reads.
const (
	TaskNodeClassification = "node_classification"
	FeatureFeat            = "feat"
	FeatureLabel           = "label"
	FeatureOrigID          = "orig_id" // a relabelled copy's export: each node's original id
	DataSeeds              = "seeds"
	DataLabels             = "labels"
)

// Layout is what ssdgnn reads from a GraphBolt directory: a homogeneous
// graph, its node features, and the first task's sets. Paths are relative
// to the dataset directory, cleaned, and never leave it.
type Layout struct {
	Name        string
	NumNodes    int64
	EdgesFormat string // "numpy" or "csv"
	EdgesPath   string
	FeatPath    string // "" when there is no node feature "feat"
	LabelPath   string // "" when there is no node feature "label"
	TaskName    string // "" when there is no task
	NumClasses  int64  // 0 when not given
	// Sets are train, validation, test; a set with no seeds is absent.
	Sets [3]SetLayout
	// Ignored lists what the metadata holds that ssdgnn does not import
	// (other features, other tasks), for the import's log.
	Ignored []string
}

// SetLayout locates one set's arrays.
type SetLayout struct {
	Seeds  string // "" when the set is absent
	Labels string // "" when the set has no labels
}

// SetNames are the GraphBolt names of the three sets, in Layout.Sets
// order.
var SetNames = [3]string{"train_set", "validation_set", "test_set"}

// ParseMetadata decodes metadata.yaml and checks that it describes a
// dataset ssdgnn can import: a raw homogeneous graph with one node count
// and one edge file, numpy node features, and sets of seeds with optional
// labels. file names the file in errors, which are *MetadataError.
func ParseMetadata(b []byte, file string) (*Layout, error) {
	var m Metadata
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, &MetadataError{File: file, Msg: strings.Join(te.Errors, "; ")}
		}
		return nil, &MetadataError{File: file, Msg: err.Error()}
	}
	bad := func(field, format string, args ...any) error {
		return &MetadataError{File: file, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	l := &Layout{Name: m.DatasetName}
	if m.Graph == nil {
		if m.GraphTopology != nil {
			return nil, bad("graph_topology", "a preprocessed graph (%s, a PyTorch pickle) cannot be read; point at the raw dataset directory, whose metadata.yaml has a graph section", m.GraphTopology.Type)
		}
		return nil, bad("graph", "missing")
	}
	g := m.Graph
	switch {
	case len(g.Nodes) != 1:
		return nil, bad("graph.nodes", "%d node entries, want exactly one (heterogeneous graphs are not supported)", len(g.Nodes))
	case g.Nodes[0].Type != "":
		return nil, bad("graph.nodes[0].type", "%q: heterogeneous graphs are not supported", g.Nodes[0].Type)
	case g.Nodes[0].Num <= 0:
		return nil, bad("graph.nodes[0].num", "%d, want a positive node count", g.Nodes[0].Num)
	case len(g.Edges) != 1:
		return nil, bad("graph.edges", "%d edge entries, want exactly one (heterogeneous graphs are not supported)", len(g.Edges))
	case g.Edges[0].Type != "":
		return nil, bad("graph.edges[0].type", "%q: heterogeneous graphs are not supported", g.Edges[0].Type)
	}
	l.NumNodes = int64(g.Nodes[0].Num)
	e := g.Edges[0]
	switch e.Format {
	case "numpy", "csv":
	case "":
		return nil, bad("graph.edges[0].format", "missing")
	default:
		return nil, bad("graph.edges[0].format", "%q, want numpy or csv", e.Format)
	}
	var err error
	l.EdgesFormat = e.Format
	if l.EdgesPath, err = relPath(e.Path); err != nil {
		return nil, bad("graph.edges[0].path", "%v", err)
	}
	for i, f := range m.FeatureData {
		field := fmt.Sprintf("feature_data[%d]", i)
		if f.Domain != "node" || f.Type != "" || (f.Name != FeatureFeat && f.Name != FeatureLabel) {
			l.Ignored = append(l.Ignored, fmt.Sprintf("%s (domain %q, type %q, name %q)", field, f.Domain, f.Type, f.Name))
			continue
		}
		if f.Format != "numpy" {
			return nil, bad(field+".format", "%q, want numpy (torch files cannot be read)", f.Format)
		}
		p, err := relPath(f.Path)
		if err != nil {
			return nil, bad(field+".path", "%v", err)
		}
		dup := &l.FeatPath
		if f.Name == FeatureLabel {
			dup = &l.LabelPath
		}
		if *dup != "" {
			return nil, bad(field+".name", "node feature %q given twice", f.Name)
		}
		*dup = p
	}
	for i, t := range m.Tasks {
		if i > 0 {
			l.Ignored = append(l.Ignored, fmt.Sprintf("tasks[%d] (%q): only the first task is imported", i, t.Name))
			continue
		}
		l.TaskName = t.Name
		if t.NumClasses < 0 {
			return nil, bad("tasks[0].num_classes", "%d is negative", t.NumClasses)
		}
		l.NumClasses = int64(t.NumClasses)
		for k, sets := range [3][]TVTSet{t.TrainSet, t.ValidationSet, t.TestSet} {
			field := "tasks[0]." + SetNames[k]
			if len(sets) == 0 {
				continue
			}
			if len(sets) > 1 || sets[0].Type != "" {
				return nil, bad(field, "%d sets (first of type %q), want one untyped set (heterogeneous sets are not supported)", len(sets), sets[0].Type)
			}
			for j, d := range sets[0].Data {
				df := fmt.Sprintf("%s[0].data[%d]", field, j)
				var dst *string
				switch d.Name {
				case DataSeeds:
					dst = &l.Sets[k].Seeds
				case DataLabels:
					dst = &l.Sets[k].Labels
				case "":
					return nil, bad(df+".name", "missing (want seeds or labels)")
				default:
					l.Ignored = append(l.Ignored, fmt.Sprintf("%s (%q)", df, d.Name))
					continue
				}
				if d.Format != "numpy" {
					return nil, bad(df+".format", "%q, want numpy (torch files cannot be read)", d.Format)
				}
				if *dst != "" {
					return nil, bad(df+".name", "%q given twice", d.Name)
				}
				if *dst, err = relPath(d.Path); err != nil {
					return nil, bad(df+".path", "%v", err)
				}
			}
			if l.Sets[k].Seeds == "" {
				return nil, bad(field+"[0].data", "no seeds entry")
			}
		}
	}
	return l, nil
}

// relPath checks a path of the metadata: relative, inside the dataset
// directory.
func relPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("missing")
	case path.IsAbs(p):
		return "", fmt.Errorf("%q is absolute; GraphBolt joins every path to the dataset directory", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q leaves the dataset directory", p)
	}
	return c, nil
}
