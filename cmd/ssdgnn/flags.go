package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ssdgnn/ssdgnn/internal/cliflags"
	"github.com/ssdgnn/ssdgnn/internal/opterr"
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
var optionAliases = map[opterr.Field]string{"MemBytes": "mem", "NumChunks": "chunks", "NumClasses": "num-classes", "SeqReadBytes": "seq-read", "FeatIODepth": "io-depth",
	"EvalMode": "eval", "EvalMemBytes": "eval-mem", "ChunkBytes": "eval-mem", "NeighborFrac": "dual-neighbor-frac", "OutDir": "out"}

// flagNamed names, in an option error (*opterr.Error) of the command that
// ran, the options it names (Go fields: "FirstLevel", "AvgDegree",
// "MemBytes") as the flags the user typed ("--first-level",
// "--avg-degree", "--mem"); a field that is not one of cmd's flags keeps
// its name. The fields come from the error's data, not from its words:
// the option error's own message is replaced by its rendering with the
// flags, and what wraps it is kept. Other errors pass through; errors.Is
// and errors.As see the original.
func flagNamed(cmd *cobra.Command, err error) error {
	var oe *opterr.Error
	if cmd == nil || !errors.As(err, &oe) {
		return err
	}
	flag := func(f opterr.Field) string {
		name, ok := optionAliases[f]
		if !ok {
			name = kebab(string(f))
		}
		if cmd.Flags().Lookup(name) != nil {
			return "--" + name
		}
		return string(f)
	}
	msg := err.Error()
	out := strings.Replace(msg, oe.Error(), oe.Named(flag), 1)
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
