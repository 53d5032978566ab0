package main

import (
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
)

// defaultFanouts is the --fanouts default of train, profile and rr
// (cliflags.DefaultFanouts).
const defaultFanouts = cliflags.DefaultFanouts

// requirePositive fails when one of cmd's named flags was given
// explicitly with a value of 0 or less (cliflags.RequirePositive).
func requirePositive(cmd *cobra.Command, names ...string) error {
	return cliflags.RequirePositive(cmd.Flags(), names...)
}

// optionAliases are option fields whose flag is not their kebab-case
// name.
var optionAliases = map[string]string{"MemBytes": "mem", "NumChunks": "chunks", "NumClasses": "num-classes"}

var camelWord = regexp.MustCompile(`\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*)*\b`)

// flagNamed rewrites, in an option error of the command that ran, the
// libraries' option names (Go fields: "FirstLevel", "AvgDegree",
// "MemBytes") into the flags the user typed ("--first-level",
// "--avg-degree", "--mem"): a field that is not one of cmd's flags is
// left as it is. Other errors pass through; errors.Is sees the original.
func flagNamed(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if cmd == nil || !(strings.Contains(msg, "invalid options") || strings.Contains(msg, "invalid config")) {
		return err
	}
	out := camelWord.ReplaceAllStringFunc(msg, func(w string) string {
		name, ok := optionAliases[w]
		if !ok {
			name = kebab(w)
		}
		if cmd.Flags().Lookup(name) != nil {
			return "--" + name
		}
		return w
	})
	if out == msg {
		return err
	}
	return &renamedError{msg: out, err: err}
}

// kebab is FirstLevel as first-level.
func kebab(w string) string {
	var b strings.Builder
	for i, r := range w {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// renamedError is err with its message's option names as flags.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }
