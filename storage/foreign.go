package storage

import (
	"os"
	"path/filepath"
)

// foreignLayouts are the layouts of other tools that a directory given
// as a dataset may hold, tried in order: each names a file that marks it
// and what to do with it.
var foreignLayouts = []struct{ mark, what string }{
	{"metadata.yaml", "a DGL GraphBolt dataset (as 'ssdgnn export graphbolt' writes): import it with 'ssdgnn import graphbolt'"},
	{"partition_meta.json", "a DGL distributed partitioning (as 'ssdgnn export distdgl' writes), which ssdgnn does not import: give the dataset it was exported from"},
	{"metadata.json", "DGL's chunked graph format (as 'ssdgnn export distdgl' writes), which ssdgnn does not import: give the dataset it was exported from"},
	{filepath.Join("raw", "edge.csv.gz"), "OGB's raw node-property layout: import it with 'ssdgnn import ogb'"},
	{filepath.Join("raw", "edge.csv"), "OGB's raw node-property layout: import it with 'ssdgnn import ogb'"},
	{filepath.Join("raw", "data.npz"), "OGB's raw layout (papers100M's data.npz): import it with 'ssdgnn import ogb'"},
	{filepath.Join("paper", "node_feat.npy"), "IGB's NumPy layout: import it with 'ssdgnn import npy'"},
}

// foreignLayout says what dir holds when it is another tool's layout
// rather than a dataset, or "".
func foreignLayout(dir string) string {
	for _, l := range foreignLayouts {
		if _, err := os.Stat(filepath.Join(dir, l.mark)); err == nil {
			return l.what
		}
	}
	return ""
}
