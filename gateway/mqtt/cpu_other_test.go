//go:build !unix

package mqtt

import (
	"testing"
	"time"
)

// cpuTime is zero where getrusage is not: the benchmarks then report no
// CPU time.
func cpuTime(testing.TB) time.Duration { return 0 }
