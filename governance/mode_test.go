package governance

import (
	"strings"
	"testing"
	"time"
)

func TestSwitchWidens(t *testing.T) {
	m := ShippedModes()
	if w := m[ModeObserve].SwitchWidens(m[ModeMaintenance]); w != "" {
		t.Fatalf("leaving maintenance for observe widens: %s", w)
	}
	if w := m[ModeSupervised].SwitchWidens(m[ModeMaintenance]); w != "" {
		t.Fatalf("leaving maintenance for supervised widens: %s", w)
	}
	if w := m[ModeMaintenance].SwitchWidens(m[ModeSupervised]); w == "" {
		t.Fatal("entering maintenance from supervised does not widen")
	}
	long := m[ModeMaintenance]
	long.Name, long.MaxDuration = "long-maintenance", 8*time.Hour
	if w := long.SwitchWidens(m[ModeMaintenance]); !strings.Contains(w, "last longer") {
		t.Fatalf("the same powers for longer: %q", w)
	}
}
