package train

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// section is one checkpoint section for encodeCheckpoint.
type section struct {
	tag  string
	body []byte
}

// encodeCheckpoint writes the checkpoint format of docs/train.md: magic,
// version, then tag | length | body | xxhash64(body) per section.
func encodeCheckpoint(secs []section) []byte {
	b := append([]byte(CheckpointMagic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[8:], CheckpointVersion)
	for _, s := range secs {
		b = append(b, s.tag...)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s.body)))
		b = append(b, s.body...)
		b = binary.LittleEndian.AppendUint64(b, xxhash.Sum64(s.body))
	}
	return b
}

func validCheckpoint(t testing.TB, history bool) []byte {
	meta, err := json.Marshal(checkpointMeta{Dataset: "x", NumNodes: 10, Model: ModelConfig{Kind: "sage", InDim: 2, Hidden: 2, Classes: 2, Layers: 2}, History: history})
	if err != nil {
		t.Fatal(err)
	}
	secs := []section{{secMeta, meta}, {secParm, make([]byte, 16)}, {secAdam, make([]byte, 32)}}
	if history {
		secs = append(secs, section{secHist, []byte("hist")})
	}
	return encodeCheckpoint(append(secs, section{secEnd, nil}))
}

func TestParseCheckpointErrors(t *testing.T) {
	good := validCheckpoint(t, true)
	if _, err := parseCheckpoint(good, "c"); err != nil {
		t.Fatal(err)
	}
	hugeLen := bytes.Clone(good)
	binary.LittleEndian.PutUint64(hugeLen[16:], 1<<62)
	flipped := bytes.Clone(good)
	flipped[30] ^= 1
	noHist := encodeCheckpoint([]section{{secMeta, []byte(`{"history":true}`)}, {secParm, nil}, {secAdam, nil}, {secEnd, nil}})
	withMeta := func(meta string) []byte {
		return encodeCheckpoint([]section{{secMeta, []byte(meta)}, {secParm, nil}, {secAdam, nil}, {secEnd, nil}})
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "at offset 0: short header"},
		{"magic", append([]byte("XXXXXXXX"), good[8:]...), "bad magic"},
		{"truncated", good[:len(good)-3], "short checksum"},
		{"huge length", hugeLen, "at offset 16: section \"META\" length 4611686018427387904 exceeds"},
		{"checksum", flipped, "section \"META\" checksum"},
		{"trailing", append(bytes.Clone(good), 0), "1 bytes after the end section"},
		{"missing history", noHist, "missing section \"HIST\""},
		// A position that indexes batches or steps Adam: batch_done -1
		// panicked in the pipeline (index out of range [-1]).
		{"negative epoch", withMeta(`{"epoch":-3}`), "at offset 24: META: epoch -3 is negative"},
		{"negative batch_done", withMeta(`{"epoch":1,"batch_done":-1}`), "META: batch_done -1 is negative"},
		{"negative step", withMeta(`{"step":-100}`), "META: step -100 is negative"},
	} {
		_, err := parseCheckpoint(tc.b, "c")
		var ce *CheckpointError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpoint) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: got %v, want a *CheckpointError with %q", tc.name, err, tc.want)
		}
	}
}

// FuzzParseCheckpoint: any input parses or fails with a *CheckpointError,
// never panics; whatever parses re-encodes to a checkpoint that parses to
// the same sections.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add(validCheckpoint(f, false))
	f.Add(validCheckpoint(f, true))
	f.Add([]byte(CheckpointMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := parseCheckpoint(b, "fuzz")
		if err != nil {
			var ce *CheckpointError
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		meta, err := json.Marshal(ck.meta)
		if err != nil {
			return // JSON that decodes but does not encode (a time out of range)
		}
		secs := []section{{secMeta, meta}, {secParm, ck.parm}, {secAdam, ck.adam}}
		if ck.hist != nil || ck.meta.History {
			secs = append(secs, section{secHist, ck.hist})
		}
		ck2, err := parseCheckpoint(encodeCheckpoint(append(secs, section{secEnd, nil})), "again")
		if err != nil {
			t.Fatalf("re-encoded checkpoint: %v", err)
		}
		if !bytes.Equal(ck.parm, ck2.parm) || !bytes.Equal(ck.adam, ck2.adam) || !bytes.Equal(ck.hist, ck2.hist) || ck.meta.NumNodes != ck2.meta.NumNodes || ck.meta.Model != ck2.meta.Model {
			t.Fatal("round trip changed the checkpoint")
		}
	})
}

// TestNewFromCheckpointMismatch: infer's path refuses a checkpoint that
// does not fit the dataset, before building a model from it.
func TestNewFromCheckpointMismatch(t *testing.T) {
	d := smallSynth(t) // 3000 nodes, 16 features, 4 classes
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		nodes int64
		model ModelConfig
		want  error
		msg   string
	}{
		{"nodes", 2708, ModelConfig{Kind: ModelSAGE, InDim: 16, Hidden: 8, Classes: 4, Layers: 2}, ErrMismatch, "is for 2708 nodes"},
		{"features", 3000, ModelConfig{Kind: ModelSAGE, InDim: 1433, Hidden: 8, Classes: 4, Layers: 2}, ErrMismatch, "1433 features and 4 classes"},
		{"huge hidden", 3000, ModelConfig{Kind: ModelSAGE, InDim: 16, Hidden: 1 << 30, Classes: 4, Layers: 2}, ErrCheckpoint, "PARM holds 4 parameters"},
		{"huge layers", 3000, ModelConfig{Kind: ModelGCN, InDim: 16, Hidden: 1, Classes: 4, Layers: 1 << 30}, ErrCheckpoint, "PARM holds 4 parameters"},
	} {
		meta, _ := json.Marshal(checkpointMeta{NumNodes: tc.nodes, Model: tc.model, Options: Options{Hidden: tc.model.Hidden, Layers: tc.model.Layers, Model: tc.model.Kind}})
		path := filepath.Join(dir, tc.name)
		b := encodeCheckpoint([]section{{secMeta, meta}, {secParm, make([]byte, 16)}, {secAdam, make([]byte, 32)}, {secEnd, nil}})
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		tr, err := NewFromCheckpoint(context.Background(), d, path, &RestoreOptions{Workers: 1})
		if err == nil {
			tr.Close()
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %v with %q", tc.name, err, tc.want, tc.msg)
		}
	}
}
