package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

func TestProbe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	if _, _, err := run(t, "gen", dir, "--nodes", "3000", "--feat-dim", "128", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "probe", dir, "--duration", "50ms", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "merge gap:") || !strings.Contains(out, "(median of 3 rounds, ") {
		t.Fatalf("output %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.FileDevice)); !os.IsNotExist(err) {
		t.Fatalf("--dry-run wrote device.json: %v", err)
	}
	if _, _, err := run(t, "probe", dir, "--duration", "50ms", "--json"); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.ReadDeviceProfile(dir); err != nil {
		t.Fatal(err)
	}
	// train accepts the new flags (one tiny epoch).
	if _, _, err := run(t, "train", dir, "--epochs", "1", "--layers", "2", "--fanouts", "3,3", "--hidden", "8", "--coalesce-gap", "0", "--io", "pread"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "train", dir, "--coalesce-gap", "-2"); err == nil {
		t.Fatal("--coalesce-gap -2 accepted")
	}
	// Depths and read sizes past what any disk serves are refused before
	// they allocate (depth 100,000 asked for 25 GiB of read slots).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"probe", dir, "--dry-run", "--depth", "100000"}, "--depth 100000: want at most 1024 reads in flight"},
		{[]string{"probe", dir, "--dry-run", "--gather-depth", "100000"}, "--gather-depth 100000: want at most 1024 reads in flight"},
		{[]string{"probe", dir, "--dry-run", "--seq-read", "1TiB"}, "--seq-read 1099511627776 bytes: want 4096 (a block) to 67108864"},
		{[]string{"probe", dir, "--dry-run", "--seq-read", "1"}, "want 4096 (a block)"},
		{[]string{"probe", dir, "--dry-run", "--duration", "-1s"}, "--duration -1s: want a positive length"},
		{[]string{"train", dir, "--epochs", "1", "--io-depth", "100000"}, "--io-depth 100000: want 0 (the default) to 1024"},
	} {
		if _, _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
