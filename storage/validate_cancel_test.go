package storage_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/progress"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

type cancelOnAdd struct{ cancel context.CancelFunc }

func (c cancelOnAdd) Start(string, int64, progress.Unit) progress.Task { return c }
func (c cancelOnAdd) Add(int64)                                        { c.cancel() }
func (c cancelOnAdd) Describe(string)                                  {}
func (c cancelOnAdd) Done()                                            {}

// A cancelled validate stops after the chunk in flight and returns
// context.Canceled, not a report that looks complete.
func TestValidateCancel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, err := synth.Generate(dir, synth.Config{Nodes: 30000, FeatDim: 64, Seed: 1}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := storage.ValidateContext(ctx, dir, &storage.ValidateOptions{Progress: cancelOnAdd{cancel}})
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("got %v, %v; want nil, context.Canceled", rep, err)
	}
}
