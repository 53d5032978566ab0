package extsort

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeRun writes es (sorted) as a run file in dir and returns its bytes.
func writeRun(t testing.TB, dir string, enc encoding, es []Edge) []byte {
	t.Helper()
	w, err := createRun(dir, enc)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if err := w.putEdge(e); err != nil {
			t.Fatal(err)
		}
	}
	r, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.path); err != nil {
		t.Fatal(err)
	}
	return b
}

// readRun reads every record of the run file at path.
func readRun(path string, strict bool) ([]Edge, error) {
	ord := orderAsc
	if strict {
		ord = orderStrict
	}
	r, err := openRun(path, ord)
	if err != nil {
		return nil, err
	}
	defer r.close()
	var out []Edge
	for {
		e, ok, err := r.next()
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, e)
	}
}

func TestRunRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		enc  encoding
		n    int
	}{
		{"packed empty", encPacked, 0},
		{"packed one", encPacked, 1},
		{"packed full block", encPacked, encPacked.maxBlockRecords()},
		{"packed block+1", encPacked, encPacked.maxBlockRecords() + 1},
		{"wide empty", encWide, 0},
		{"wide full block", encWide, encWide.maxBlockRecords()},
		{"wide three blocks", encWide, 3*encWide.maxBlockRecords() - 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			es := make([]Edge, tt.n)
			for i := range es {
				es[i] = Edge{int64(i / 3), int64(i % 3)}
				if tt.enc == encWide {
					es[i].Src <<= 33
				}
			}
			b := writeRun(t, dir, tt.enc, es)
			if want := headerSize + blockHdrSize + tt.n*tt.enc.recSize() +
				(tt.n+tt.enc.maxBlockRecords()-1)/tt.enc.maxBlockRecords()*blockHdrSize; len(b) != want {
				t.Errorf("file is %d bytes, want %d", len(b), want)
			}
			p := filepath.Join(dir, "x.run")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readRun(p, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, es) && !(len(got) == 0 && len(es) == 0) {
				t.Fatalf("round trip: got %d edges, want %d", len(got), len(es))
			}
		})
	}
}

func TestRunOrderChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.run")
	for _, tc := range []struct {
		es  []Edge
		ord order
		bad bool
	}{
		{[]Edge{{1, 2}, {1, 2}}, orderAsc, false},
		{[]Edge{{1, 2}, {1, 2}}, orderStrict, true},
		{[]Edge{{1, 2}, {1, 1}}, orderAsc, true},
		{[]Edge{{2, 0}, {1, 9}}, orderAsc, true},
		{[]Edge{{1, 2}, {1, 1}}, orderByRow, false}, // a row's order is the input's
		{[]Edge{{1, 2}, {1, 2}}, orderByRow, false},
		{[]Edge{{2, 0}, {1, 9}}, orderByRow, true},
	} {
		if err := os.WriteFile(p, writeRun(t, dir, encPacked, tc.es), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := openRun(p, tc.ord)
		if err == nil {
			for {
				_, ok, nerr := r.next()
				if !ok {
					err = nerr
					break
				}
			}
			_ = r.close()
		}
		if bad := errors.Is(err, ErrCorrupt); bad != tc.bad {
			t.Errorf("%v order %d: err %v, want corrupt=%v", tc.es, tc.ord, err, tc.bad)
		}
	}
}

// FuzzRunReader feeds arbitrary bytes to the run reader: it must never
// panic, and whatever it accepts must be ordered and complete.
func FuzzRunReader(f *testing.F) {
	dir := f.TempDir()
	f.Add(writeRun(f, dir, encPacked, []Edge{{0, 1}, {0, 2}, {5, 5}}))
	f.Add(writeRun(f, dir, encWide, []Edge{{0, 1}, {1 << 40, 2}}))
	f.Add(writeRun(f, dir, encPacked, nil))
	f.Add([]byte(runMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f.run")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		es, err := readRun(p, false)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("non-corruption error %v", err)
			}
			return
		}
		if !slices.IsSortedFunc(es, cmpEdge) {
			t.Fatal("accepted unordered run")
		}
		for _, e := range es {
			if e.Src < 0 || e.Dst < 0 {
				t.Fatalf("accepted negative id %v", e)
			}
		}
	})
}
