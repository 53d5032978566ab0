package train

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestNonFiniteLossStops: a learning rate that blows the weights up stops
// training at the first non-finite loss with ErrNonFinite, writes no
// checkpoint of the broken model, and keeps the one written before.
func TestNonFiniteLossStops(t *testing.T) {
	d := smallSynth(t)
	dir := t.TempDir()
	o := synthOpts()
	o.Epochs, o.CheckpointDir = 1, dir
	run(t, d, o) // a good checkpoint
	good, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	o = synthOpts()
	o.Epochs, o.LR, o.CheckpointDir = 3, 1e30, dir
	tr, err := New(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = tr.Run(context.Background())
	if !errors.Is(err, ErrNonFinite) {
		t.Fatalf("lr 1e30: %v, want ErrNonFinite", err)
	}
	t.Log(err)
	after, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil || string(after) != string(good) {
		t.Errorf("the good checkpoint was replaced (%v)", err)
	}
}
