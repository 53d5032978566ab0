package main

import (
	"fmt"
	"strconv"
	"strings"
)

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
