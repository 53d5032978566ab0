package train

import (
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/importer"
	"github.com/ssdgnn/ssdgnn/storage/synth"
)

var seedFlag = flag.Uint64("seed", 1, "seed of the randomised tests")

var (
	tmpRoot string
	dsOnce  sync.Map // name → *dsEntry
)

type dsEntry struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	tmpRoot, err = os.MkdirTemp("", "ssdgnn-train-test-")
	if err != nil {
		panic(err)
	}
	code := 0
	func() {
		defer os.RemoveAll(tmpRoot)
		code = m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

func dataset(t testing.TB, name string, build func(dir string) error) *storage.Dataset {
	t.Helper()
	e, _ := dsOnce.LoadOrStore(name, &dsEntry{})
	ent := e.(*dsEntry)
	ent.once.Do(func() {
		ent.dir = filepath.Join(tmpRoot, name)
		ent.err = build(ent.dir)
	})
	if ent.err != nil {
		t.Fatal(ent.err)
	}
	d, err := storage.Open(ent.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// cora is the bundled Cora dataset (planetoid split).
func cora(t testing.TB) *storage.Dataset {
	return dataset(t, "cora", func(dir string) error {
		_, err := importer.ImportOGB("../testdata/cora", dir, nil)
		return err
	})
}

// smallSynth is a small generated graph.
func smallSynth(t testing.TB) *storage.Dataset {
	return dataset(t, "synth", func(dir string) error {
		_, err := synth.Generate(dir, synth.Config{Nodes: 3000, FeatDim: 16, Classes: 4, Seed: 7}, nil)
		return err
	})
}
