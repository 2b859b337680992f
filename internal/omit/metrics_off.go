//go:build shadowgate_omit_metrics

package omit

// Metrics is true when the build leaves out the part of that name (tag shadowgate_omit_metrics).
const Metrics = true
