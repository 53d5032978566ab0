package graphbolt

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const goodYAML = `dataset_name: g
graph:
  nodes:
    - num: 4
  edges:
    - format: numpy
      path: edges/edges.npy
feature_data:
  - domain: node
    name: feat
    format: numpy
    in_memory: false
    path: node_data/feat.npy
  - domain: edge
    name: w
    format: numpy
    path: e.npy
tasks:
  - name: node_classification
    num_classes: 3
    train_set:
      - data:
          - name: seeds
            format: numpy
            path: set/train_seeds.npy
          - name: labels
            format: numpy
            path: set/train_labels.npy
`

func TestParseMetadata(t *testing.T) {
	l, err := ParseMetadata([]byte(goodYAML), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Layout{Name: "g", NumNodes: 4, EdgesFormat: "numpy", EdgesPath: "edges/edges.npy", FeatPath: "node_data/feat.npy",
		TaskName: TaskNodeClassification, NumClasses: 3, Sets: [3]SetLayout{{Seeds: "set/train_seeds.npy", Labels: "set/train_labels.npy"}},
		Ignored: []string{`feature_data[1] (domain "edge", type "", name "w")`}}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("got %+v\nwant %+v", l, want)
	}
}

func TestParseMetadataErrors(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"no graph", "graph:", "grap:", "graph: missing"},
		{"topology", "graph:", "graph_topology: {type: FusedCSCSamplingGraph, path: g.pt}\ngrap:", "graph_topology: a preprocessed graph"},
		{"num type", "num: 4", "num: four", "line 4"},
		{"num float", "num: 4", "num: 4.99", `line 4: "4.99", want an integer`},
		{"num whole float", "num: 4", "num: 4.0", `line 4: "4.0", want an integer`},
		{"classes float", "num_classes: 3", "num_classes: 3.9", `"3.9", want an integer`},
		{"num zero", "num: 4", "num: 0", "graph.nodes[0].num: 0"},
		{"hetero", "    - num: 4", "    - type: paper\n      num: 4", "graph.nodes[0].type"},
		{"edge format", "format: numpy\n      path: edges", "format: parquet\n      path: edges", `graph.edges[0].format: "parquet"`},
		{"no edge path", "      path: edges/edges.npy\n", "", "graph.edges[0].path: missing"},
		{"escape", "path: edges/edges.npy", "path: ../x.npy", "leaves the dataset directory"},
		{"absolute", "path: node_data/feat.npy", "path: /etc/feat.npy", "feature_data[0].path"},
		{"torch feat", "format: numpy\n    in_memory", "format: torch\n    in_memory", "feature_data[0].format"},
		{"no seeds", "name: seeds", "name: other", "tasks[0].train_set[0].data: no seeds entry"},
		{"dup labels", "name: seeds", "name: labels", `tasks[0].train_set[0].data[1].name: "labels" given twice`},
		{"neg classes", "num_classes: 3", "num_classes: -3", "tasks[0].num_classes"},
		{"syntax", "graph:", "graph: [", "m.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(goodYAML, tc.from, tc.to, 1)
			if y == goodYAML {
				t.Fatalf("mutation %q not applied", tc.from)
			}
			_, err := ParseMetadata([]byte(y), "m.yaml")
			var me *MetadataError
			if !errors.As(err, &me) || !errors.Is(err, ErrMetadata) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "m.yaml") {
				t.Errorf("error %v, want a *MetadataError naming m.yaml and containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParseMetadata: any input parses or fails with a *MetadataError,
// never panics; a parsed layout's paths stay inside the directory; and
// Marshal→ParseMetadata of the metadata Export writes round-trips.
func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(goodYAML), "name", int64(5))
	f.Add([]byte("graph: {nodes: [{num: 1}], edges: [{format: csv, path: a}]}"), "x", int64(1))
	f.Add([]byte("tasks: [{train_set: [{data: [{name: seeds, format: numpy, path: s}]}]}]"), "", int64(0))
	f.Fuzz(func(t *testing.T, b []byte, name string, n int64) {
		l, err := ParseMetadata(b, "f.yaml")
		if err != nil {
			var me *MetadataError
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v is not a *MetadataError", err, err)
			}
		} else {
			for _, p := range []string{l.EdgesPath, l.FeatPath, l.LabelPath, l.Sets[0].Seeds, l.Sets[1].Labels} {
				if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
					t.Fatalf("path %q escapes", p)
				}
			}
		}
		if n <= 0 {
			return
		}
		m := Metadata{DatasetName: name, Graph: &Graph{Nodes: []NodeSpec{{Num: Int(n)}}, Edges: []EdgeSpec{{Format: "numpy", Path: PathEdges}}},
			Tasks: []Task{{Name: TaskNodeClassification, NumClasses: Int(n), TrainSet: []TVTSet{{Data: []TVTData{{Name: DataSeeds, Format: "numpy", Path: "s.npy"}}}}}}}
		y, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		l2, err := ParseMetadata(y, "w.yaml")
		if err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
		if l2.Name != name || l2.NumNodes != n || l2.NumClasses != n || l2.Sets[0].Seeds != "s.npy" {
			t.Fatalf("round trip %+v", l2)
		}
	})
}
