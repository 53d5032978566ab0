// Package bytefmt prints byte counts in binary units with one decimal,
// rounded in a stated direction, for messages that name a bound: a least
// budget rounded up can be given back and works; a given budget rounded
// down is never quoted as more than it is. (humanize rounds to the
// nearest, so "--mem 54 MiB is below the minimum of 54 MiB" was printed
// for 54.25 MiB.)
//
// A value typed with a decimal ("56.2MiB") parses to whole bytes a hair
// below it; both directions allow for that, so it is quoted back as typed.
package bytefmt

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var units = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Up is b with one decimal, rounded up ("54.3 MiB" for 54.25 MiB), and
// never a figure that parses back (as --mem does: whole bytes, truncated)
// to less than b.
func Up(b int64) string {
	return format(b, func(x float64) float64 { return math.Ceil(x) }, true)
}

// Down is b with one decimal, rounded down ("54.2 MiB" for 54.25 MiB),
// with a tolerance of a ten-thousandth of the last digit, so that a
// budget typed with a decimal is quoted back as typed.
func Down(b int64) string {
	return format(b, func(x float64) float64 { return math.Floor(x + 1e-4) }, false)
}

func format(b int64, round func(float64) float64, atLeast bool) string {
	if b < 1024 {
		return fmt.Sprintf("%d B", max(b, 0))
	}
	v, i, unit := float64(b)/1024, 0, float64(1024)
	for v >= 1024 && i < len(units)-1 {
		v, i, unit = v/1024, i+1, unit*1024
	}
	v = round(v*10) / 10
	for atLeast && int64(v*unit) < b {
		v += 0.1
	}
	if v >= 1024 && i < len(units)-1 { // 1023.95 MiB and up round to 1 GiB
		v, i = v/1024, i+1
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + units[i]
}
