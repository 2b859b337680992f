package gateway

import "time"

// testFlush is the journal's flush interval in these tests: they follow
// readings as they are written, and the default (30s, set for the card)
// would keep each waiting.
const testFlush = 100 * time.Millisecond
