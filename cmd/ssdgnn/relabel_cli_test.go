package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/internal/npy"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/storage/storagetest"
)

// TestRelabelCLI: partition → relabel → validate; rr's partition row is
// the same on both datasets; a checkpoint trained on the source predicts
// byte-identical rows on the relabelled copy, because infer speaks the
// original ids there.
func TestRelabelCLI(t *testing.T) {
	src := genSmall(t)
	out := filepath.Join(t.TempDir(), "pm")
	if _, _, err := run(t, "partition", src, "--parts", "10", "--seed", "2"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "relabel", src, out, "--partition", "nope"); err == nil || !strings.Contains(err.Error(), "ssdgnn partition") {
		t.Fatalf("relabel by a missing partitioning: %v", err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--order", "bogus"}, `unknown --order "bogus"`},
		{[]string{"--order", "heat"}, "--heat-profile goes with --order heat"},
		{[]string{"--heat-profile", "p"}, "--heat-profile goes with --order heat"},
		{[]string{"--order", "heat", "--heat-profile", "nope"}, "run 'ssdgnn profile' first"},
	} {
		args := append([]string{"relabel", src, filepath.Join(t.TempDir(), "x")}, bad.args...)
		if _, _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("relabel %v: %v, want an error containing %q", bad.args, err, bad.want)
		}
	}
	// A profile of another dataset (copied in) is refused, naming both.
	other := filepath.Join(t.TempDir(), "other")
	if _, _, err := run(t, "gen", other, "--nodes", "1000", "--feat-dim", "8", "--classes", "3", "--seed", "6"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "profile", other, "--selection", "random", "--name", "q", "--fanouts", "4,4", "--batch-size", "32"); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(src, "profile", "q"), os.DirFS(filepath.Join(other, "profile", "q"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "relabel", src, filepath.Join(t.TempDir(), "x"), "--order", "heat", "--heat-profile", "q"); err == nil || !strings.Contains(err.Error(), "was made on dataset") {
		t.Errorf("relabel by another dataset's profile: %v", err)
	}
	// The default order (degree), and the other two; each records its
	// order and validates.
	outID, outHeat := filepath.Join(t.TempDir(), "pm-id"), filepath.Join(t.TempDir(), "pm-heat")
	if _, _, err := run(t, "profile", src, "--partition", "fennel", "--name", "p", "--fanouts", "4,4", "--batch-size", "32"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, order string
		args       []string
	}{
		{out, "degree", nil},
		{outID, "id", []string{"--order", "id"}},
		{outHeat, "heat", []string{"--order", "heat", "--heat-profile", "p"}},
	} {
		stdout, _, err := run(t, append([]string{"relabel", src, c.dir, "--mem", "64MiB", "--json"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			NumNodes int64  `json:"num_nodes"`
			K        int    `json:"k"`
			Order    string `json:"order"`
		}
		if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.NumNodes != 1000 || st.K != 10 || st.Order != c.order {
			t.Fatalf("relabel %v --json: %v\n%s", c.args, err, stdout)
		}
		if _, _, err := run(t, "validate", c.dir); err != nil {
			t.Fatalf("validate relabelled (%s): %v", c.order, err)
		}
		if m, err := storage.LoadManifest(c.dir); err != nil || m.RelabelledFrom.Order != c.order {
			t.Fatalf("%s: manifest %v, %v", c.dir, err, m)
		}
	}
	rr := func(dir string) map[string]any {
		t.Helper()
		o, _, err := run(t, "rr", dir, "--fanouts", "4,4", "--batch-size", "32", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(o), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// In id order the sampler draws the same batches on both datasets,
	// and partition+hist reuses the same nodes: its top nodes by degree
	// take ties by original id, as training's history cache does (before
	// they went by the copy's id, and on Cora RR 5.92 against 5.94).
	a, b := rr(src), rr(outID)
	for _, k := range []string{"rr_partition", "neighbor_bytes_partition", "feature_bytes_partition",
		"rr_partition_hist", "neighbor_bytes_partition_hist", "feature_bytes_partition_hist"} {
		if a[k] != b[k] {
			t.Errorf("rr %s: source %v, relabelled %v", k, a[k], b[k])
		}
	}
	// And trains identically, history on (its candidates of equal degree
	// are picked by original id): the losses agree to the last digit.
	losses := func(dir string) []float64 {
		t.Helper()
		o, _, err := run(t, "train", dir, "--epochs", "3", "--batch-size", "32", "--fanouts", "4,4", "--seed", "3", "--selection", "partition",
			"--partition", "fennel", "--checkpoint", filepath.Join(t.TempDir(), "c"), "--json")
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Epochs []struct {
				Loss   float64 `json:"loss"`
				Reused int64   `json:"hist_reused"`
			} `json:"epochs"`
		}
		if err := json.Unmarshal([]byte(o), &rep); err != nil {
			t.Fatal(err)
		}
		var l []float64
		for _, e := range rep.Epochs {
			l = append(l, e.Loss, float64(e.Reused))
		}
		return l
	}
	if a, b := losses(src), losses(outID); !slices.Equal(a, b) {
		t.Errorf("training (loss, reused per epoch): source %v, id-order copy %v", a, b)
	}

	ck := filepath.Join(t.TempDir(), "ck")
	if _, _, err := run(t, "train", src, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--checkpoint", ck); err != nil {
		t.Fatal(err)
	}
	// Resuming on the copy: the history is in the source's ids and is
	// refused, naming both and the way through (printed before any
	// table); --no-hist carries the weights over.
	resume := []string{"train", out, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--resume", ck, "--checkpoint", filepath.Join(t.TempDir(), "ck2")}
	if stdout, _, err := run(t, resume...); err == nil || !strings.Contains(err.Error(), "holds history for the original node ids") ||
		!strings.Contains(err.Error(), "resume with --no-hist") || stdout != "" {
		t.Errorf("resume on the copy with history: %v, stdout %q", err, stdout)
	}
	if _, stderr, err := run(t, append(resume, "--no-hist")...); err != nil || !strings.Contains(stderr, "without the checkpoint's historical embeddings") {
		t.Errorf("resume on the copy with --no-hist: %v, stderr %q", err, stderr)
	}
	// Two copies of one source and partitioning in other orders number
	// their nodes differently: the history of one is refused on the other
	// (it had loaded onto the wrong nodes when every node was a candidate).
	ckID := filepath.Join(t.TempDir(), "ckid")
	if _, _, err := run(t, "train", outID, "--epochs", "1", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--hist-cache", "1MiB", "--checkpoint", ckID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "train", out, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--hist-cache", "1MiB", "--resume", ckID,
		"--checkpoint", filepath.Join(t.TempDir(), "ck3")); err == nil || !strings.Contains(err.Error(), "resume with --no-hist") {
		t.Errorf("history of the id-order copy resumed on the degree-order copy: %v", err)
	}
	if _, _, err := run(t, "train", outID, "--epochs", "2", "--hidden", "8", "--batch-size", "64", "--fanouts", "4,4", "--hist-cache", "1MiB", "--resume", ckID,
		"--checkpoint", filepath.Join(t.TempDir(), "ck4")); err != nil {
		t.Errorf("resume on the copy the checkpoint was trained on: %v", err)
	}
	ids := filepath.Join(t.TempDir(), "ids.npy")
	writeIDs(t, ids, []int64{999, 0, 17, 17, 512})
	for _, nodes := range []string{"all", "test", "valid", ids} {
		var got [2][]byte
		for i, dir := range []string{src, out} {
			p := filepath.Join(t.TempDir(), "p.npy")
			if _, _, err := run(t, "infer", dir, "--checkpoint", ck, "--out", p, "--nodes", nodes); err != nil {
				t.Fatal(err)
			}
			var err error
			if got[i], err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got[0], got[1]) {
			t.Errorf("--nodes %s: predictions on the relabelled dataset differ from the source's", filepath.Base(nodes))
		}
	}

	// A damaged map: validate fails and names the file.
	f, err := os.OpenFile(filepath.Join(out, "orig_ids.npy"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{1, 2, 3}, 128+8*5)
	f.Close()
	_, stderr, err := run(t, "validate", out)
	if err == nil || !strings.Contains(stderr, "orig_ids") {
		t.Fatalf("validate damaged map: %v\n%s", err, stderr)
	}
}

func writeIDs(t *testing.T, path string, ids []int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := npy.NewWriter(f, npy.Int64, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 0, 8*len(ids))
	for _, v := range ids {
		for s := 0; s < 64; s += 8 {
			b = append(b, byte(v>>s))
		}
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestRelabelOnlyPartitioning: without --partition, relabel takes the
// dataset's only partitioning when none is named fennel, as train, profile
// and rr do, and says so; a named one is never stood in for.
func TestRelabelOnlyPartitioning(t *testing.T) {
	src := genSmall(t)
	if _, _, err := run(t, "partition", src, "--parts", "6", "--name", "only"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "relabel", src, filepath.Join(t.TempDir(), "x"), "--partition", "fennel"); err == nil || !strings.Contains(err.Error(), `no partitioning "fennel"`) {
		t.Fatalf("relabel --partition fennel with only %q: %v", "only", err)
	}
	if _, _, err := run(t, "probe", src, "--duration", "20ms"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pm")
	_, stderr, err := run(t, "relabel", src, out, "--json")
	if err != nil {
		t.Fatal(err)
	}
	// The probe's read costs carry over to the copy (same device).
	srcDev, err1 := os.ReadFile(filepath.Join(src, storage.FileDevice))
	outDev, err2 := os.ReadFile(filepath.Join(out, storage.FileDevice))
	if err1 != nil || err2 != nil || !bytes.Equal(srcDev, outDev) {
		t.Errorf("device.json not carried over: %v %v", err1, err2)
	}
	if !strings.Contains(stderr, `partitioning "only", the dataset's only one`) {
		t.Errorf("relabel did not say which partitioning it took: %q", stderr)
	}
	if _, _, err := run(t, "validate", out); err != nil {
		t.Fatalf("validate the relabelled copy: %v", err)
	}
	if _, _, err := run(t, "rr", out, "--partition", "only"); err != nil {
		t.Fatalf("rr on the copy's carried-over partitioning: %v", err)
	}
	// An export of the copy speaks the copy's ids, says so, and carries
	// each node's original id as node data orig_id.
	gb := filepath.Join(t.TempDir(), "gb")
	if _, stderr, err := run(t, "export", "graphbolt", out, gb); err != nil ||
		!strings.Contains(stderr, "is a partition-major copy of "+src) || !strings.Contains(stderr, "orig_id") {
		t.Errorf("export of the copy: %v, stderr %q", err, stderr)
	}
	want := npyBody(t, filepath.Join(out, storage.FileOrigIDs))
	if got := npyBody(t, filepath.Join(gb, "node_data", "orig_id.npy")); !bytes.Equal(got, want) {
		t.Errorf("graphbolt node_data/orig_id.npy: %d bytes, differ from the copy's orig_ids.npy (%d bytes)", len(got), len(want))
	}
	if meta, err := os.ReadFile(filepath.Join(gb, "metadata.yaml")); err != nil || !strings.Contains(string(meta), "name: orig_id") {
		t.Errorf("graphbolt metadata.yaml lists no orig_id feature: %v\n%s", err, meta)
	}
	dd := filepath.Join(t.TempDir(), "dd")
	if _, _, err := run(t, "export", "distdgl", out, dd, "--partition", "only", "--chunks", "3"); err != nil {
		t.Fatalf("distdgl export of the copy: %v", err)
	}
	var got []byte
	for c := range 3 {
		got = append(got, npyBody(t, filepath.Join(dd, "node_data", fmt.Sprintf("orig_id-%d.npy", c)))...)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("distdgl node_data orig_id chunks: %d bytes, differ from the copy's orig_ids.npy (%d bytes)", len(got), len(want))
	}
	if meta, err := os.ReadFile(filepath.Join(dd, "metadata.json")); err != nil || !strings.Contains(string(meta), `"orig_id"`) {
		t.Errorf("distdgl metadata.json lists no orig_id node data: %v", err)
	}
	// The carried partitioning defines the copy's id ranges: not even
	// --force replaces it; another name is a new partitioning.
	if _, _, err := run(t, "partition", out, "--parts", "4", "--name", "only", "--force"); err == nil || !strings.Contains(err.Error(), "defines the id ranges") {
		t.Errorf("partition --force over the carried partitioning: %v", err)
	}
	if _, _, err := run(t, "partition", out, "--parts", "4", "--name", "other"); err != nil {
		t.Errorf("a new partitioning of the copy: %v", err)
	}
	if _, _, err := run(t, "validate", out); err != nil {
		t.Errorf("validate after: %v", err)
	}
}

func npyBody(t *testing.T, path string) []byte {
	_, b := storagetest.ReadNPY(t, path)
	return b
}
