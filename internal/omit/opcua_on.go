//go:build !shadowgate_omit_opcua

package omit

// OPCUA is true when the build leaves out the part of that name (tag shadowgate_omit_opcua).
const OPCUA = false
