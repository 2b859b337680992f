package access

import "testing"

// Loading the package does no bcrypt work: the init trace of a process
// that loads it and checks nothing shows no more than the role table,
// where a bcrypt hash made at init costs some 20 KB and tens of ms. It
// reads what was allocated, not how long it took, so a busy machine does
// not make it fail.
func TestLoadingDoesNoBcrypt(t *testing.T) {
	l := loadCost(t)
	t.Logf("init trace: %q", l.line)
	if l.bytes > 2048 {
		t.Errorf("loading the package allocated %d bytes (%s), want at most 2048: is something hashed at init?", l.bytes, l.line)
	}
}
