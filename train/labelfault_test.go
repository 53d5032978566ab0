package train

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

// TestEpochLabelsTruncated: labels.npy truncated by another program while
// training reads it through its mapping (the gather stage's
// gatherLabels) fails the epoch with a *storage.ChangedError naming the
// file. Before, the stage deferred HandleFault first, so on the fault its
// drain of the sample stage's channel ran first and waited for good: `train
// --epochs 3` on a 200,000-node graph whose labels.npy was cut to a third
// 3 s in hung for 11 minutes until killed (this test timed out).
func TestEpochLabelsTruncated(t *testing.T) {
	for _, stream := range []string{StreamInputOff, StreamInputOn} {
		t.Run(string(stream), func(t *testing.T) {
			d := ownSynth(t)
			path := filepath.Join(d.Dir(), storage.FileLabels)
			if st, err := os.Stat(path); err != nil || st.Size() < 2*4096 {
				t.Fatalf("%s: %v, %v: want at least two pages", path, st, err)
			}
			o := synthOpts()
			o.Epochs, o.StreamInput = 1, stream
			tr, err := New(context.Background(), d, o)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if err := os.Truncate(path, 4096); err != nil { // labels of nodes past about 1,000 are gone
				t.Fatal(err)
			}
			_, err = tr.Run(context.Background())
			var ce *storage.ChangedError
			if !errors.As(err, &ce) || ce.Path != path {
				t.Fatalf("truncated %s: %v, want a *storage.ChangedError naming it", path, err)
			}
		})
	}
}
