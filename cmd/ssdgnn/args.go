package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exactArgs is cobra.ExactArgs(n) naming what is missing (the upper-case
// words of the command's Use line: "relabel: missing OUT") or extra.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			names := argNames(cmd)
			missing := fmt.Sprintf("%d argument(s)", n-len(args))
			if len(names) >= n {
				missing = strings.Join(names[len(args):n], " ")
			}
			return fmt.Errorf("%s: missing %s (usage: %s)", commandName(cmd), missing, cmd.UseLine())
		case len(args) > n:
			return fmt.Errorf("%s: unexpected argument %q (usage: %s)", commandName(cmd), args[n], cmd.UseLine())
		}
		return nil
	}
}

// commandName is cmd's path below the root ("import ogb").
func commandName(cmd *cobra.Command) string {
	if cmd.HasParent() && cmd.Parent().HasParent() {
		return commandName(cmd.Parent()) + " " + cmd.Name()
	}
	return cmd.Name()
}

// atLeastArgs is cobra.MinimumNArgs(n) naming what is missing.
func atLeastArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= n {
			return nil
		}
		return exactArgs(n)(cmd, args)
	}
}

// argNames are the positional arguments of cmd's Use line: its words
// after the command's name that are upper case (DIR, OUT, COMMAND),
// flags and their values left out.
func argNames(cmd *cobra.Command) []string {
	var names []string
	words := strings.Fields(cmd.Use)
	for i := 1; i < len(words); i++ {
		w := strings.Trim(words[i], "[].")
		switch {
		case w == "--": // the end of flags: what follows is arguments
		case strings.HasPrefix(w, "-"):
			if i+1 < len(words) && strings.ToUpper(words[i+1]) == words[i+1] && !strings.HasPrefix(words[i+1], "-") {
				i++ // the flag's value
			}
		case w != "" && strings.ToUpper(w) == w:
			names = append(names, w)
		}
	}
	return names
}

// subcommandWord is what cmd's subcommands are called: its Use line's
// first argument (FORMAT), else "subcommand".
func subcommandWord(cmd *cobra.Command) string {
	if names := argNames(cmd); len(names) > 0 {
		return names[0]
	}
	return "subcommand"
}
