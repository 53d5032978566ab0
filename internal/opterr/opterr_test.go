package opterr

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

var errOpts = errors.New("pkg: invalid options")

// TestError: the message with Go names is the one a package wrote with
// fmt.Errorf; Named names only the Field arguments (a value that looks
// like a field stays as it is), nested option errors too; errors.Is sees
// the sentinel and what %w wraps.
func TestError(t *testing.T) {
	flag := func(f Field) string { return "--" + strings.ToLower(string(f)) }
	e := Errorf(errOpts, "%s %d does not divide %s=%d (name %q)", Field("Level"), 3, Field("Parts"), 20, "Parts")
	if got, want := e.Error(), fmt.Sprintf("%v: Level 3 does not divide Parts=20 (name %q)", errOpts, "Parts"); got != want {
		t.Errorf("Error %q, want %q", got, want)
	}
	if got, want := e.Named(flag), `pkg: invalid options: --level 3 does not divide --parts=20 (name "Parts")`; got != want {
		t.Errorf("Named %q, want %q", got, want)
	}
	if e.Field != "Level" || !errors.Is(e, errOpts) {
		t.Errorf("Field %q (want Level), errors.Is(sentinel) %v", e.Field, errors.Is(e, errOpts))
	}
	inner := Errorf(errors.New("csv: invalid options"), "%s %q", Field("Delim"), ",")
	outer := Errorf(errOpts, "%w", inner)
	if got, want := outer.Named(flag), `pkg: invalid options: csv: invalid options: --delim ","`; got != want {
		t.Errorf("nested Named %q, want %q", got, want)
	}
	var got *Error
	if !errors.As(outer, &got) || got != outer || !errors.Is(outer, inner) {
		t.Errorf("errors.As/Is through the nesting: %v %v", got, errors.Is(outer, inner))
	}
	if w := Errorf(errOpts, "%s: %w", Field("TempDir"), fs.ErrNotExist); !errors.Is(w, fs.ErrNotExist) || w.Error() != "pkg: invalid options: TempDir: file does not exist" {
		t.Errorf("%%w: %q, errors.Is(fs.ErrNotExist) %v", w, errors.Is(w, fs.ErrNotExist))
	}
}
