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
	if !strings.Contains(out, "merge gap:") {
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
}
