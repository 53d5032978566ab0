package partition

import (
	"bytes"
	"cmp"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// More parts than nodes is an error with the numbers; a partitioning with
// many empty parts is written with a warning.
func TestPartsAgainstNodes(t *testing.T) {
	g, _ := planted(200, 4, 6, 0.8, 0.3, 1)
	d := g.write(t, t.TempDir())
	defer d.Close()
	for _, tc := range []struct {
		parts   int
		method  Method
		err     string
		warning bool
	}{
		{parts: 1000, err: "1000 parts for 200 nodes: at least 800 parts would be empty; use at most 200"},
		{parts: 201, err: "201 parts for 200 nodes"},
		{parts: 200, method: Fennel, warning: true},
		{parts: 200},
		{parts: 10},
	} {
		var logs bytes.Buffer
		st, err := Run(d, &Options{Parts: tc.parts, Name: "p", Force: true, Method: cmp.Or(tc.method, Random),
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if tc.err != "" {
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parts %d: %v, want %q", tc.parts, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("parts %d: %v", tc.parts, err)
		}
		if got := strings.Contains(logs.String(), "many parts are empty"); got != tc.warning {
			t.Errorf("parts %d (%d empty): warning %v, want %v\n%s", tc.parts, st.EmptyParts, got, tc.warning, logs.String())
		}
	}
}
