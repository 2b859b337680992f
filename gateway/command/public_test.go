package command

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

func TestInternalHidesTheDetailAndLogsIt(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	secret := errors.New("open /var/lib/shadowgate/journal.db: input/output error")
	pe := Internal(log, "the journal cannot be read", secret, "topic", "sg/cmd/x")
	if !regexp.MustCompile(`^err-[0-9a-f]{12}$`).MatchString(pe.ID) {
		t.Fatalf("id %q", pe.ID)
	}
	if strings.Contains(pe.Error(), "/var/lib") || !strings.Contains(pe.Error(), pe.ID) {
		t.Errorf("public error %q", pe.Error())
	}
	if l := logged.String(); !strings.Contains(l, pe.ID) || !strings.Contains(l, "input/output error") || !strings.Contains(l, "sg/cmd/x") {
		t.Errorf("log %q lacks the id or the detail", l)
	}
	if a, b := NewErrorID(), NewErrorID(); a == b {
		t.Error("two error ids are equal")
	}
}
