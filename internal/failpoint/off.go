//go:build !failpoints

package failpoint

// Enabled is whether failpoints are compiled in (the failpoints build tag).
const Enabled = false

// Inject does nothing in a build without the failpoints tag. It is small
// enough to inline, so a call and its name leave no trace in the binary.
func Inject(string) error { return nil }
