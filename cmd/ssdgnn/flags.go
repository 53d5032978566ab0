package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// defaultFanouts is the --fanouts default of train, profile and rr: the
// trainer's default model is 2 layers, and a bare profile must predict
// what a bare train does (a 3-hop profile overstated a 2-hop training's
// feature-cache savings 10.9-fold, docs/train.md).
const defaultFanouts = "10,10"

// parseInts parses a comma-separated list such as "10,10,10".
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for i, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("--%s %q: element %d: want an integer", flag, s, i+1)
		}
		out = append(out, n)
	}
	return out, nil
}

// requirePositive fails when one of the named flags was given explicitly
// with a value of 0 or less. It guards flags whose zero value only stands
// for "use the default": an explicit 0 used to be replaced silently by
// the default. Omitting the flag still gives the default.
func requirePositive(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		s := f.Value.String()
		if x, err := strconv.ParseFloat(s, 64); err == nil && x <= 0 {
			def := ""
			if f.DefValue != "0" && f.DefValue != "" {
				def = ", " + f.DefValue
			}
			return fmt.Errorf("--%s %s: want a positive value (omit the flag for the default%s)", name, s, def)
		}
	}
	return nil
}
