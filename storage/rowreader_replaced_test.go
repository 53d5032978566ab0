package storage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestRowReaderDatasetReplaced: a row reader opens its file by path after
// Open mapped the dataset; a dataset replaced in between (gen, import or
// relabel --force) is refused then, instead of read with the old
// manifest's shapes.
func TestRowReaderDatasetReplaced(t *testing.T) {
	dir := t.TempDir()
	feat := func(v int64, row []float32) {
		for i := range row {
			row[i] = float32(v)
		}
	}
	d := storagetest.Write(t, dir, storagetest.Graph{Name: "old", Adj: [][]int64{{1}, {0}, {}}, Symmetrized: true, FeatDim: 4, Feature: feat})
	r, err := d.OpenRowReader(storage.FileFeatures, storage.ReadBuffered, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	storagetest.Write(t, dir, storagetest.Graph{Name: "new", Adj: [][]int64{{1}, {0}, {}, {}}, Symmetrized: true, FeatDim: 8, Feature: feat})
	r, err = d.OpenRowReader(storage.FileFeatures, storage.ReadBuffered, nil)
	if err == nil {
		r.Close()
		t.Fatal("a row reader of a replaced dataset was opened")
	}
	if !errors.Is(err, storage.ErrMismatch) || !strings.Contains(err.Error(), "was replaced while it was read") {
		t.Errorf("replaced dataset: %v", err)
	}
}
