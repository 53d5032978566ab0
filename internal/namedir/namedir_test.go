package namedir

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestListAndPick(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"parts/a/m.json", "parts/b/m.json", "parts/.c.new/m.json", "parts/empty/x", "parts/file"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names, err := List(dir, "parts", "m.json")
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("List = %v, %v; want [a b] (no hidden, manifest-less or plain entries)", names, err)
	}
	if names, err := List(dir, "none", "m.json"); err != nil || names != nil {
		t.Errorf("List of a missing directory = %v, %v", names, err)
	}
	exists := func(set ...string) func(string) bool { return func(n string) bool { return slices.Contains(set, n) } }
	lists := func(set ...string) func() ([]string, error) { return func() ([]string, error) { return set, nil } }
	for _, tc := range []struct {
		name     string
		explicit bool
		have     []string
		chosen   string
		stoodIn  bool
	}{
		{"fennel", false, []string{"fennel", "x"}, "fennel", false}, // exists
		{"fennel", true, []string{"x"}, "fennel", false},            // asked for: missing is the caller's error
		{"fennel", false, []string{"x"}, "x", true},                 // the only one stands in
		{"fennel", false, []string{"x", "y"}, "fennel", false},      // several: none stands in
		{"fennel", false, nil, "fennel", false},                     // none
	} {
		chosen, stood, others, err := Pick("partitioning", tc.name, tc.explicit, exists(tc.have...), lists(tc.have...))
		if err != nil || chosen != tc.chosen || (stood != "") != tc.stoodIn {
			t.Errorf("Pick(%q, explicit %v) over %v = %q, %q, %v, %v", tc.name, tc.explicit, tc.have, chosen, stood, others, err)
		}
		if tc.stoodIn && stood != `partitioning "x", the dataset's only one (no "fennel")` {
			t.Errorf("stood = %q", stood)
		}
	}
}
