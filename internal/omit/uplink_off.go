//go:build shadowgate_omit_uplink

package omit

// Uplink is true when the build leaves out the part of that name (tag shadowgate_omit_uplink).
const Uplink = true
