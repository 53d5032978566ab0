package planner

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// handPlan is a plan Plan made (TestPlanHand's), saved to a file.
func handPlan(t testing.TB) (*PlanResult, string) {
	t.Helper()
	p := handProfile([]uint32{5, 3, 1, 0}, []uint32{0, 2, 0, 0}, []uint32{1, 0, 4, 0}, 0.5)
	res, err := Plan(p, &PlanOptions{MemBytes: 81, Hidden: 1, Step: 0.5, Decoupled: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := res.Save(path); err != nil {
		t.Fatal(err)
	}
	return res, path
}

// TestReadPlan: a saved plan reads back equal; every hand edit that no
// plan can hold is refused naming the file and the field; a missing file
// is fs.ErrNotExist.
func TestReadPlan(t *testing.T) {
	res, path := handPlan(t)
	got, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, res) {
		t.Fatalf("read back %+v, saved %+v", got, res)
	}
	if _, err := ReadPlan(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing plan: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		raw  string // the file's bytes instead of an edit
		want string
	}{
		{name: "not JSON", raw: "garbage", want: "invalid character"},
		{name: "wrong type", edit: func(m map[string]any) { m["num_nodes"] = "four" }, want: `field "num_nodes"`},
		{name: "too large for int64", raw: `{"memory":{"mem_bytes":10000000000000000000}}`, want: `field "memory.mem_bytes"`},
		{name: "no nodes", edit: func(m map[string]any) { delete(m, "num_nodes") }, want: `field "num_nodes" is 0`},
		{name: "profile path", edit: func(m map[string]any) { m["profile"] = "../../etc" }, want: `field "profile"`},
		{name: "negative row bytes", edit: func(m map[string]any) { m["feat_row_bytes"] = -1 }, want: `field "feat_row_bytes"`},
		{name: "negative hidden", edit: func(m map[string]any) { m["hidden"] = -3 }, want: `field "hidden"`},
		{name: "negative beta", edit: func(m map[string]any) { m["beta"] = -1 }, want: `field "beta"`},
		{name: "alpha above 1", edit: func(m map[string]any) { m["alpha"] = 7 }, want: `field "alpha" is 7`},
		{name: "neighbour share below 0", edit: func(m map[string]any) { m["neighbor_frac"] = -2 }, want: `field "neighbor_frac"`},
		{name: "no memory budget", edit: func(m map[string]any) { m["memory"] = map[string]any{} }, want: `field "memory.mem_bytes" is 0`},
		{name: "negative cache budget", edit: func(m map[string]any) { m["feature"].(map[string]any)["budget_bytes"] = -5 }, want: `field "feature.budget_bytes" is -5`},
		{name: "negative entries", edit: func(m map[string]any) { m["history"].(map[string]any)["entries"] = -7 }, want: `field "history.entries" is -7`},
		{name: "cache over its budget", edit: func(m map[string]any) { m["feature"].(map[string]any)["data_bytes"] = 1e6 }, want: `field "feature": table_bytes`},
		{name: "cache over the memory", edit: func(m map[string]any) { m["neighbor"].(map[string]any)["budget_bytes"] = 1e6 }, want: `field "neighbor.budget_bytes": budget_bytes 1000000 exceed memory.mem_bytes 81`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.raw)
			if tc.edit != nil {
				var m map[string]any
				raw, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatal(err)
				}
				tc.edit(m)
				if b, err = json.Marshal(m); err != nil {
					t.Fatal(err)
				}
			}
			bad := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(bad, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadPlan(bad)
			if !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrBadPlan naming %s and containing %q", err, bad, tc.want)
			}
		})
	}
}

// FuzzReadPlan: ReadPlan never panics, and a plan it accepts passes Check
// again after a save and a read.
func FuzzReadPlan(f *testing.F) {
	_, path := handPlan(f)
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"num_nodes":1,"memory":{"mem_bytes":1}}`))
	f.Add([]byte(`{"alpha":NaN}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "plan.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := ReadPlan(path)
		if err != nil {
			if !errors.Is(err, ErrBadPlan) {
				t.Fatalf("error not ErrBadPlan: %v", err)
			}
			return
		}
		if err := res.Save(path); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPlan(path); err != nil {
			t.Fatalf("saved plan rejected: %v", err)
		}
	})
}
