package bytefmt

import (
	"fmt"
	"testing"
)

func TestUpDown(t *testing.T) {
	for _, c := range []struct {
		b        int64
		up, down string
	}{
		{0, "0 B", "0 B"}, {1023, "1023 B", "1023 B"}, {1024, "1 KiB", "1 KiB"}, {1025, "1.1 KiB", "1 KiB"},
		{54 << 20, "54 MiB", "54 MiB"}, {54<<20 + 1<<18, "54.3 MiB", "54.2 MiB"}, {54<<20 + 1, "54.1 MiB", "54 MiB"},
		{1<<30 - 1, "1 GiB", "1 GiB"},
		{58929971, "56.2 MiB", "56.2 MiB"}, // "56.2MiB" as parsed: whole bytes a hair below
		{40<<20 + 64<<10, "40.1 MiB", "40 MiB"},
	} {
		if got := Up(c.b); got != c.up {
			t.Errorf("Up(%d) = %q, want %q", c.b, got, c.up)
		}
		if got := Down(c.b); got != c.down {
			t.Errorf("Down(%d) = %q, want %q", c.b, got, c.down)
		}
	}
}

// TestUpParsesBack: the figure Up prints, typed back as humanize parses
// --mem (whole bytes, truncated), is never below the value.
func TestUpParsesBack(t *testing.T) {
	for b := int64(40 << 20); b < 40<<20+3<<20; b += 4099 {
		s := Up(b)
		var v float64
		var u string
		if _, err := fmt.Sscanf(s, "%g %s", &v, &u); err != nil {
			t.Fatal(err)
		}
		if got := int64(v * (1 << 20)); u != "MiB" || got < b {
			t.Fatalf("Up(%d) = %q, which parses to %d", b, s, got)
		}
	}
}
