//go:build !invariants

package invariants

// Enabled is false unless built with the invariants tag.
const Enabled = false
