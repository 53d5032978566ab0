package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/partition"
	"github.com/ssdgnn/ssdgnn/storage"
)

// Issue #18, group 1: corrupt data gives a named error, never a panic.
// The fixtures are a dataset with a partitioning ("fennel") and a
// checkpoint trained on it; every case edits a copy, runs commands
// in-process and checks the error. A panic anywhere (sampler goroutines
// included) kills the test binary, so it fails the test.

// fixture is a dataset directory ready for partition, rr, train and infer.
type fixture struct {
	dir  string // the dataset, with partitions/fennel
	ckpt string // a checkpoint trained on it (outside dir)
}

// newFixture imports Cora (cora true) or generates a tiny graph, and
// partitions and trains it once.
func newFixture(t testing.TB, cora bool) fixture {
	t.Helper()
	root := t.TempDir()
	fx := fixture{dir: filepath.Join(root, "d"), ckpt: filepath.Join(root, "ckpt")}
	if cora {
		mustRun(t, "import", "ogb", filepath.Join("..", "..", "testdata", "cora"), fx.dir)
	} else {
		mustRun(t, "gen", fx.dir, "--nodes", "300", "--feat-dim", "4", "--classes", "3", "--seed", "1")
	}
	mustRun(t, "partition", fx.dir, "--parts", "12", "--first-level", "3")
	mustRun(t, "train", fx.dir, "--epochs", "1", "--hidden", "8", "--fanouts", "3,3", "--batch-size", "64", "--checkpoint", fx.ckpt)
	return fx
}

func mustRun(t testing.TB, args ...string) {
	t.Helper()
	if _, _, err := runArgs(args...); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// runArgs is run without the *testing.T, for fuzz bodies.
func runArgs(args ...string) (string, string, error) {
	root := newRootCmd()
	var out, errb strings.Builder
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"--quiet"}, args...))
	err := root.Execute()
	return out.String(), errb.String(), err
}

// clone copies the fixture's dataset to a fresh directory. features.npy,
// the one large file, is hard-linked: no case writes it.
func (fx fixture) clone(t testing.TB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "d")
	err := filepath.WalkDir(fx.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fx.dir, path)
		to := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			if rel == "checkpoints" {
				return filepath.SkipDir
			}
			return os.MkdirAll(to, 0o755)
		case e.Name() == storage.FileFeatures:
			return os.Link(path, to)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// setElem sets element i of the .npy file at path to v (in its dtype).
func setElem(path string, i, v int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := npy.ReadHeader(f)
	if err != nil {
		return err
	}
	var b []byte
	switch h.DType {
	case npy.Int32:
		b = binary.LittleEndian.AppendUint32(nil, uint32(v))
	case npy.Int64:
		b = binary.LittleEndian.AppendUint64(nil, uint64(v))
	default:
		return fmt.Errorf("%s: dtype %v", path, h.DType)
	}
	if n := h.Len(); n > 0 {
		i = ((i % n) + n) % n
	} else {
		return nil
	}
	_, err = f.WriteAt(b, h.DataOffset+i*int64(len(b)))
	return err
}

// fixChecksum recomputes the manifest checksum of the .npy at path, as a
// buggy writer that produced wrong values would have: the invariants, not
// the checksum, must then catch the edit.
func fixChecksum(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	h, err := npy.ParseHeader(b)
	if err != nil || h.DataOffset > int64(len(b)) {
		return nil // nothing sensible to sum
	}
	sum := fmt.Sprintf("xxhash64:%016x", xxhash.Sum64(b[h.DataOffset:]))
	dir, name := filepath.Split(path)
	mpath := filepath.Join(dir, storage.ManifestName)
	if _, err := os.Stat(mpath); err != nil {
		mpath = filepath.Join(dir, partition.ManifestName)
	}
	mb, err := os.ReadFile(mpath)
	if err != nil {
		return err
	}
	var files *[]storage.FileEntry
	var dm storage.Manifest
	var pm partition.Manifest
	var m any
	if filepath.Base(mpath) == storage.ManifestName {
		m, files = &dm, &dm.Files
	} else {
		m, files = &pm, &pm.Files
	}
	if err := json.Unmarshal(mb, m); err != nil {
		return nil
	}
	for i := range *files {
		if (*files)[i].Name == name {
			(*files)[i].Checksum = sum
		}
	}
	mb, _ = json.Marshal(m)
	return os.WriteFile(mpath, mb, 0o644)
}

// dropLabels removes labels.npy from dataset.json.
func dropLabels(dir string) error {
	mpath := filepath.Join(dir, storage.ManifestName)
	mb, err := os.ReadFile(mpath)
	if err != nil {
		return err
	}
	var m storage.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return err
	}
	files := m.Files[:0]
	for _, f := range m.Files {
		if f.Name != storage.FileLabels {
			files = append(files, f)
		}
	}
	m.Files = files
	mb, _ = json.Marshal(&m)
	return os.WriteFile(mpath, mb, 0o644)
}

const fennel = "partitions/fennel/"

// repro is one case of issue #18, group 1.
type repro struct {
	name   string
	file   string // relative to the dataset; "" for special cases
	elem   int64
	val    int64
	fixSum bool
	cmd    string   // partition, rr, train or infer
	want   []string // substrings of the error
}

// repros are the cases, each with the message it now gives.
var repros = []repro{
	{"indices out of range", "indices.npy", 7, 99999, false, "train", []string{"indices.npy: indices[7]: node id 99999 out of range [0,2708)"}},
	{"indices negative", "indices.npy", 7, -1, false, "partition", []string{"indices.npy: indices[7]: node id -1 out of range"}},
	{"indptr beyond edges", "indptr.npy", 7, 1e12, false, "train", []string{"indptr.npy: indptr[8]: offset", "decreases (previous 1000000000000)"}},
	{"indptr decreasing", "indptr.npy", 100, 3, false, "rr", []string{"indptr.npy: indptr[100]: offset 3 decreases"}},
	{"indptr first", "indptr.npy", 0, 5, false, "train", []string{"indptr.npy: indptr[0]: first offset is 5, want 0"}},
	{"indptr last", "indptr.npy", 2708, 10555, false, "train", []string{"indptr.npy: indptr[2708]: last offset is 10555, want num_edges 10556"}},
	{"train_idx out of range", "train_idx.npy", 3, 99999, false, "train", []string{"train_idx.npy: train_idx[3]: node id 99999 out of range"}},
	{"train_idx not ascending", "train_idx.npy", 5, 2, false, "train", []string{"train_idx.npy: train_idx[5]: id 2 not strictly ascending"}},
	{"valid_idx out of range", "valid_idx.npy", 0, -7, false, "train", []string{"valid_idx.npy: valid_idx[0]: node id -7 out of range"}},
	{"valid_idx not ascending", "valid_idx.npy", 9, 1, false, "infer", []string{"valid_idx.npy: valid_idx[9]: id 1 not strictly ascending"}},
	{"test_idx out of range", "test_idx.npy", 999, 2708, false, "infer", []string{"test_idx.npy: test_idx[999]: node id 2708 out of range"}},
	{"test_idx not ascending", "test_idx.npy", 1, 0, false, "train", []string{"test_idx.npy: test_idx[1]: id 0 not strictly ascending"}},
	{"label out of range", "labels.npy", 4, 7, false, "train", []string{"labels.npy: labels[4]: label 7 out of range [-1,7)"}},
	{"labels not listed", "", 0, 0, false, "train", []string{"dataset.json", "dataset has 7 classes but no labels"}},
	{"checkpoint of another dataset", "", 0, 0, false, "infer", []string{"checkpoint does not match", "300 nodes", "2708"}},
	{"in-range edit caught by checksum", "indices.npy", 7, 1, false, "train", []string{"indices.npy: byte 128: checksum xxhash64:"}},
	{"members_offsets negative", fennel + "members_offsets.npy", 3, -1, false, "rr", []string{"members_offsets.npy: element 3: offset -1 decreases"}},
	{"train_members out of range", fennel + "train_members.npy", 0, 1e9, false, "rr", []string{"train_members.npy: element 0: node id 1000000000 out of range [0,2708)"}},
	{"adj_indptr huge", fennel + "adj_indptr.npy", 7, 1e12, false, "rr", []string{"adj_indptr.npy: element 8: offset", "decreases (previous 1000000000000)"}},
	{"adj_indices out of range", fennel + "adj_indices.npy", 11, 5000, false, "rr", []string{"adj_indices.npy: element 11: node id 5000 out of range"}},
	{"part out of range", fennel + "part.npy", 5, 12, false, "train", []string{"part.npy: element 5: part 12 out of range [0,12)"}},
	{"members misplaced", fennel + "members.npy", 0, 5, true, "rr", []string{"members.npy: element 0: node 5 listed in part 0, but part.npy puts it in"}},
	{"cross negative", fennel + "cross.npy", 2, -3, false, "rr", []string{"cross.npy: element 2: count -3 is negative"}},
	{"cross above degree", fennel + "cross.npy", 2, 1000, true, "rr", []string{"cross.npy: element 2: count 1000 exceeds the node's degree"}},
	{"train_offsets end", fennel + "train_offsets.npy", 12, 139, true, "rr", []string{"train_offsets.npy: element 12: last offset is 139, want 140"}},
	{"adj degree differs", fennel + "adj_indptr.npy", 1, 0, true, "rr", []string{"adj_indptr.npy: element 0: node", "has 0 neighbours here"}},
	{"partition checksum", "", 0, 0, false, "rr", []string{"stats.json: byte 0: checksum xxhash64:"}},
}

// apply makes r's edit in the dataset copy dir.
func (r repro) apply(fx fixture, dir string) error {
	switch {
	case r.name == "labels not listed":
		return dropLabels(dir)
	case r.name == "partition checksum":
		// Valid JSON, different bytes: only the checksum can tell.
		path := filepath.Join(dir, fennel+partition.FileStats)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(path, append(b, ' '), 0o644)
	case r.file == "":
		return nil
	}
	path := filepath.Join(dir, r.file)
	if err := setElem(path, r.elem, r.val); err != nil {
		return err
	}
	if r.fixSum {
		return fixChecksum(path)
	}
	return nil
}

// args is the command line for cmd on dir.
func (fx fixture) args(cmd, dir, ckpt string) []string {
	switch cmd {
	case "partition":
		return []string{"partition", dir, "--parts", "12", "--first-level", "3", "--name", "again"}
	case "rr":
		return []string{"rr", dir, "--fanouts", "3,3", "--batch-size", "32", "--parts-per-batch", "3"}
	case "train":
		return []string{"train", dir, "--epochs", "1", "--hidden", "8", "--fanouts", "3,3", "--batch-size", "64",
			"--checkpoint", filepath.Join(dir, "ck"), "--selection", "partition", "--parts-per-batch", "3"}
	case "infer":
		return []string{"infer", dir, "--checkpoint", ckpt, "--out", filepath.Join(dir, "pred.npy")}
	}
	panic("unknown command " + cmd)
}

func TestCorruptRepros(t *testing.T) {
	fx := newFixture(t, true)
	other := newFixture(t, false) // 300 nodes: its checkpoint does not fit Cora
	for _, r := range repros {
		t.Run(r.name, func(t *testing.T) {
			dir := fx.clone(t)
			if err := r.apply(fx, dir); err != nil {
				t.Fatal(err)
			}
			ckpt := fx.ckpt
			if r.name == "checkpoint of another dataset" {
				ckpt = other.ckpt
			}
			// validate lists the same problem.
			_, stderr, err := runArgs("validate", dir)
			if r.name == "checkpoint of another dataset" {
				if err != nil {
					t.Errorf("validate: %v", err)
				}
			} else if err == nil {
				t.Error("validate: no problem found")
			} else {
				for _, w := range r.want {
					if !strings.Contains(err.Error()+stderr, w) {
						t.Errorf("validate: %v, stderr %q lacks %q", err, stderr, w)
					}
				}
			}
			// The checks are in the packages that open the files, so each
			// case fails in every command that reads the edited file.
			for _, cmd := range []string{r.cmd, "train", "infer", "rr", "partition"} {
				_, _, err := runArgs(fx.args(cmd, dir, ckpt)...)
				if cmd == r.cmd || err != nil {
					if err == nil {
						t.Fatalf("%s: no error", cmd)
					}
					for _, w := range r.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("%s: error %q lacks %q", cmd, err, w)
						}
					}
				}
			}
		})
	}
}

// corruptTargets are the files FuzzCorrupt edits, by index.
var corruptTargets = []string{
	"indptr.npy", "indices.npy", "labels.npy", "train_idx.npy", "valid_idx.npy", "test_idx.npy",
	fennel + "part.npy", fennel + "cross.npy", fennel + "members_offsets.npy", fennel + "members.npy",
	fennel + "train_offsets.npy", fennel + "train_members.npy", fennel + "adj_indptr.npy", fennel + "adj_indices.npy",
	"dataset.json", fennel + "manifest.json", fennel + "stats.json",
}

// FuzzCorrupt edits one file of a tiny dataset or its partitioning (an
// element set to a value, a byte xored, or the file truncated), optionally
// with the checksum recomputed, then runs partition, rr, train --epochs 1
// and infer in-process. Errors are expected; a panic fails.
func FuzzCorrupt(f *testing.F) {
	index := func(file string) uint8 {
		for i, t := range corruptTargets {
			if t == file {
				return uint8(i)
			}
		}
		return 0
	}
	for _, r := range repros {
		if r.file != "" {
			f.Add(index(r.file), uint8(0), uint64(r.elem), r.val, r.fixSum)
		}
	}
	f.Add(index("dataset.json"), uint8(1), uint64(40), int64(1), false)
	f.Add(index(fennel+"manifest.json"), uint8(2), uint64(100), int64(0), false)
	f.Add(index("indices.npy"), uint8(1), uint64(3), int64(0x40), false)
	fx := newFixture(f, false)
	f.Fuzz(func(t *testing.T, which, mode uint8, pos uint64, val int64, fixSum bool) {
		dir := fx.clone(t)
		path := filepath.Join(dir, corruptTargets[int(which)%len(corruptTargets)])
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch mode % 3 {
		case 0:
			if strings.HasSuffix(path, ".npy") {
				if err := setElem(path, int64(pos>>1), val); err != nil {
					t.Fatal(err)
				}
				break
			}
			fallthrough
		case 1:
			if len(b) > 0 {
				b[pos%uint64(len(b))] ^= byte(val) | 1
			}
			os.WriteFile(path, b, 0o644)
		case 2:
			os.WriteFile(path, b[:pos%uint64(len(b)+1)], 0o644)
		}
		if fixSum && strings.HasSuffix(path, ".npy") {
			fixChecksum(path)
		}
		for _, cmd := range []string{"partition", "rr", "train", "infer"} {
			runArgs(fx.args(cmd, dir, fx.ckpt)...)
		}
	})
}
