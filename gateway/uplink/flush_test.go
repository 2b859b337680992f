package uplink

import "time"

// testFlush is the journal's flush interval in these tests: they follow
// readings and checkpoints as they are written, and the default (30s, set
// for the card) would keep each waiting.
const testFlush = 100 * time.Millisecond
