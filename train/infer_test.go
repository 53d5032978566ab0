package train

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// TestInfer checks Infer's files against Predict with full neighbourhoods
// (SAGE, where sampled -1 and layer-wise agree) on nodes in scrambled order
// with a repeat, in both modes.
func TestInfer(t *testing.T) {
	d := smallSynth(t)
	tr, err := New(context.Background(), d, &Options{Layers: 2, Hidden: 16, Epochs: 1, Seed: *seedFlag})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	nodes := []int64{2999, 5, 17, 5, 1000, 0}
	nodes = append(nodes, d.TestIdx()...)
	want, err := tr.Predict(context.Background(), nodes, []int{-1, -1})
	if err != nil {
		t.Fatal(err)
	}
	c := tr.model.cfg.Classes
	for _, mode := range []string{EvalLayerwise, EvalSampled} {
		dir := t.TempDir()
		o := &InferOptions{Mode: mode, Fanouts: []int{-1, -1}, PredPath: filepath.Join(dir, "p.npy"), LogitsPath: filepath.Join(dir, "l.npy")}
		rep, err := tr.Infer(context.Background(), nodes, o)
		if err != nil {
			t.Fatal(err)
		}
		pred := readNpy(t, o.PredPath)
		logp := npy.AsFloat32(readNpy(t, o.LogitsPath))
		p32 := npy.AsInt32(pred)
		if len(p32) != len(nodes) || len(logp) != len(nodes)*c {
			t.Fatalf("%s: %d predictions, %d logits for %d nodes", mode, len(p32), len(logp), len(nodes))
		}
		correct, labelled := 0, 0
		for i, v := range nodes {
			if p := int32(argmax(want[i*c : (i+1)*c])); p32[i] != p {
				t.Errorf("%s: node %d (position %d) predicted %d, want %d", mode, v, i, p32[i], p)
			}
			for k := range c {
				if !closeTo(float64(logp[i*c+k]), float64(want[i*c+k])) {
					t.Errorf("%s: node %d logit %d: %v, want %v", mode, v, k, logp[i*c+k], want[i*c+k])
				}
			}
			if l := d.Labels()[v]; l >= 0 {
				labelled++
				if l == p32[i] {
					correct++
				}
			}
		}
		if rep.Labelled != labelled || rep.Correct != correct || (mode == EvalLayerwise) != (rep.Layerwise != nil) || rep.BytesRead <= 0 {
			t.Errorf("%s: report %+v, want %d of %d labelled correct", mode, rep, correct, labelled)
		}
	}
	if _, err := tr.Infer(context.Background(), []int64{3000}, nil); err == nil {
		t.Error("node out of range accepted")
	}
}

func readNpy(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[h.DataOffset : h.DataOffset+h.DataBytes()]
}
