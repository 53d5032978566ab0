package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/ssdgnn/ssdgnn/internal/atomicfile"
)

// Save writes res as indented JSON to path, atomically.
func (res *PlanResult) Save(path string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Clean(path), append(b, '\n')); err != nil {
		return fmt.Errorf("planner: %w", err)
	}
	return nil
}

// ReadPlan reads a plan that Save wrote (ssdgnn plan's plan.json, or
// train's CHECKPOINT/plan.json) and checks it (Check). A file that is not
// such a plan, or a plan whose fields contradict each other (a hand
// edit), is an error wrapping ErrBadPlan that names the file and the
// field; a missing file wraps fs.ErrNotExist.
func ReadPlan(path string) (*PlanResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("planner: plan: %w", err)
	}
	res := new(PlanResult)
	if err := json.Unmarshal(b, res); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: %s: field %q at byte %d: %s does not fit %s", ErrBadPlan, path, te.Field, te.Offset, te.Value, te.Type)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPlan, path, err)
	}
	if err := res.Check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPlan, path, err)
	}
	return res, nil
}

// Check reports the first field of r that no plan Plan makes can hold:
// a node count or budget that is not positive, a share outside [0, 1], a
// cache whose parts are negative or exceed its budget, caches that exceed
// the memory budget, a profile name a profile cannot have. The error
// names the field as plan.json spells it.
func (r *PlanResult) Check() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("field %q is %v, want %s", field, v, want)
	}
	switch {
	case r.NumNodes <= 0:
		return bad("num_nodes", r.NumNodes, "> 0")
	case r.Profile != "" && !validName(r.Profile):
		return bad("profile", fmt.Sprintf("%q", r.Profile), "a profile's name (letters, digits, '-', '_', '.')")
	case r.FeatRowBytes < 0:
		return bad("feat_row_bytes", r.FeatRowBytes, ">= 0")
	case r.Hidden < 0:
		return bad("hidden", r.Hidden, ">= 0")
	case !(r.Beta >= 0) || math.IsInf(r.Beta, 0):
		return bad("beta", r.Beta, "a finite value >= 0")
	case !(r.Alpha >= 0 && r.Alpha <= 1):
		return bad("alpha", r.Alpha, "within [0, 1]")
	case !(r.NeighborFrac >= 0 && r.NeighborFrac <= 1):
		return bad("neighbor_frac", r.NeighborFrac, "within [0, 1]")
	case r.Memory.MemBytes <= 0:
		return bad("memory.mem_bytes", r.Memory.MemBytes, "> 0")
	}
	for _, c := range []struct {
		name string
		s    CacheSplit
	}{{"feature", r.Feature}, {"history", r.History}, {"neighbor", r.Neighbor}} {
		for _, f := range []struct {
			name string
			v    int64
		}{{"budget_bytes", c.s.BudgetBytes}, {"table_bytes", c.s.TableBytes}, {"data_bytes", c.s.DataBytes}, {"entries", c.s.Entries}} {
			if f.v < 0 {
				return bad(c.name+"."+f.name, f.v, ">= 0")
			}
		}
		if b := c.s.Bytes(); b < 0 || b > c.s.BudgetBytes {
			return fmt.Errorf("field %q: table_bytes %d + data_bytes %d exceed budget_bytes %d", c.name, c.s.TableBytes, c.s.DataBytes, c.s.BudgetBytes)
		}
		if c.s.BudgetBytes > r.Memory.MemBytes {
			return fmt.Errorf("field %q: budget_bytes %d exceed memory.mem_bytes %d", c.name+".budget_bytes", c.s.BudgetBytes, r.Memory.MemBytes)
		}
	}
	return nil
}
