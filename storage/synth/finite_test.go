package synth

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

// gen cannot produce NaN or Inf features: noise is normalised with the
// signal, so even absurd --feat-noise values give finite rows, in float32
// and in float16.
func TestFeaturesFinite(t *testing.T) {
	for _, noise := range []float64{1e39, 1e300, math.MaxFloat64} {
		for _, dt := range []string{"float32", "float16"} {
			dir := filepath.Join(t.TempDir(), "g")
			if _, err := Generate(dir, Config{Nodes: 500, FeatDim: 16, FeatNoise: noise, FeatDType: dt, Seed: 1}, nil); err != nil {
				t.Fatalf("noise %g %s: %v", noise, dt, err)
			}
			rep, err := storage.Validate(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.FeatureNaN+rep.FeatureInf != 0 || !rep.OK() {
				t.Errorf("noise %g %s: %d NaN, %d Inf, problems %v", noise, dt, rep.FeatureNaN, rep.FeatureInf, rep.Problems)
			}
		}
	}
}
