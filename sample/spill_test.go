package sample_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/ssdgnn/ssdgnn/sample"
)

func spillFixture(t testing.TB, seed uint64) (*sample.Sampler, []*sample.Batch) {
	r := rand.New(rand.NewPCG(seed, 12))
	adj, part, train := communityGraph(r, 8, 25, 8, 4, 2)
	d := writeDataset(t, adj, train, 0)
	parts, err := sample.NewMemPartitions(d, 8, part)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sample.New(d, parts, &sample.Options{Fanouts: []int{3, 3}, BatchSize: 9, Mode: sample.ModePartition, PartsPerBatch: 2, Seed: seed, Reuse: sample.TopDegree(d, 0.2)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	bs, _ := collect(t, s, 0)
	return s, bs
}

func encode(t testing.TB, bs []*sample.Batch) []byte {
	var buf bytes.Buffer
	sw, err := sample.NewSpillWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if err := sw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Finish(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeAll(data []byte) ([]*sample.Batch, error) {
	sr, err := sample.NewSpillReader(bytes.NewReader(data), "mem")
	if err != nil {
		return nil, err
	}
	var out []*sample.Batch
	for {
		b, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
}

func TestSpillEpochMatchesMemory(t *testing.T) {
	seed := testSeed(t)
	s, want := spillFixture(t, seed)
	for _, chunk := range []int{1, 4, 1000} {
		dir := t.TempDir()
		si, err := s.SpillEpoch(context.Background(), 0, &sample.SpillOptions{Dir: dir, ChunkBatches: chunk, AheadChunks: 1})
		if err != nil {
			t.Fatal(err)
		}
		var got []*sample.Batch
		for {
			b, err := si.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			untimed(t, b)
			got = append(got, b)
		}
		if _, err := os.Stat(si.Path()); err != nil {
			t.Fatalf("spill file missing before Close: %v", err)
		}
		if err := si.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(si.Path()); !os.IsNotExist(err) {
			t.Fatalf("spill file not deleted: %v", err)
		}
		if !reflect.DeepEqual(released(got), released(want)) {
			t.Fatalf("chunk %d: spilled batches differ from sampled ones", chunk)
		}
	}
}

func TestSpillCancelDeletes(t *testing.T) {
	s, _ := spillFixture(t, 5)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	si, err := s.SpillEpoch(ctx, 0, &sample.SpillOptions{Dir: dir, ChunkBatches: 1, AheadChunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := si.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := si.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	si.Close()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("spill dir not empty after cancel: %v", ents)
	}
}

func TestCleanStaleSpills(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot spawn a process:", err)
	}
	dead := cmd.Process.Pid
	dir := t.TempDir()
	stale := filepath.Join(dir, "spill-"+strconv.Itoa(dead)+"-0-1.bin")
	mine := filepath.Join(dir, "spill-"+strconv.Itoa(os.Getpid())+"-0-1.bin")
	other := filepath.Join(dir, "notes.txt")
	for _, p := range []string{stale, mine, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := sample.CleanStaleSpills(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("removed %d files, want 1", n)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("stale spill kept")
	}
	for _, p := range []string{mine, other} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s removed", p)
		}
	}
	if n, err := sample.CleanStaleSpills(filepath.Join(dir, "missing")); n != 0 || err != nil {
		t.Fatalf("missing dir: %d, %v", n, err)
	}
}

func TestSpillCorruption(t *testing.T) {
	_, bs := spillFixture(t, 3)
	data := encode(t, bs)
	got, err := decodeAll(data)
	if err != nil || !reflect.DeepEqual(released(got), released(bs)) {
		t.Fatalf("round trip failed: %v", err)
	}
	// The sampling time and the macro cache's memory travel with the batch.
	timed := *bs[0]
	timed.SampleSeconds, timed.DynamicBytes = 0.125, 4096
	if got, err := decodeAll(encode(t, []*sample.Batch{&timed})); err != nil || len(got) != 1 || got[0].SampleSeconds != 0.125 || got[0].DynamicBytes != 4096 {
		t.Fatalf("sample seconds or dynamic bytes not kept: %v %v", got, err)
	}
	// Offset of the second record: header + first record.
	first := 16 + 16 + int64(len(encode(t, bs[:1]))-16-16-16)
	for _, tc := range []struct {
		name    string
		mutate  func([]byte) []byte
		wantOff int64
	}{
		{"bit flip in record 2", func(b []byte) []byte { b[first+40] ^= 1; return b }, first},
		{"truncated record 2", func(b []byte) []byte { return b[:first+30] }, first},
		{"missing end marker", func(b []byte) []byte { return b[:len(b)-16] }, -1},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, 0},
		{"bad version", func(b []byte) []byte { b[8] = 9; return b }, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeAll(tc.mutate(bytes.Clone(data)))
			var ce *sample.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, sample.ErrCorrupt) {
				t.Fatalf("got %v, want a *CorruptError", err)
			}
			if ce.File != "mem" || (tc.wantOff >= 0 && ce.Offset != tc.wantOff) {
				t.Fatalf("error %q locates file %q offset %d, want offset %d", err, ce.File, ce.Offset, tc.wantOff)
			}
		})
	}
}

func FuzzSpillReader(f *testing.F) {
	_, bs := spillFixture(f, 4)
	f.Add(encode(f, bs[:2]))
	f.Add(encode(f, nil))
	f.Add([]byte("SSDGSPIL\x01\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeAll(data)
		if err != nil {
			var ce *sample.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("non-corrupt error on in-memory input: %v", err)
			}
			return
		}
		// Whatever decodes must re-encode to the same bytes.
		if again := encode(t, got); !bytes.HasPrefix(data, again) {
			t.Fatalf("decode/encode not identical")
		}
	})
}

// released releases bs from the memory counters (which the comparison
// must not see) and returns them.
func released(bs []*sample.Batch) []*sample.Batch {
	for _, b := range bs {
		b.Release()
	}
	return bs
}
