package main

import (
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
