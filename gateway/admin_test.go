package gateway

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestFirstAdminIsMadeOnceAndOnlyItsHashKept(t *testing.T) {
	dir := t.TempDir()
	var notice bytes.Buffer
	u, err := firstAdmin(dir, &notice)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`password: (\S+)`).FindStringSubmatch(notice.String())
	if m == nil || u.Name != "admin" || u.Role.String() != "admin" {
		t.Fatalf("notice %q, user %+v", notice.String(), u)
	}
	stored, err := os.ReadFile(filepath.Join(dir, adminHashFile))
	if err != nil || strings.Contains(string(stored), m[1]) || bcrypt.CompareHashAndPassword(bytes.TrimSpace(stored), []byte(m[1])) != nil {
		t.Fatalf("stored %q: %v", stored, err)
	}
	notice.Reset()
	again, err := firstAdmin(dir, &notice)
	if err != nil || notice.Len() != 0 || !bytes.Equal(again.Hash, bytes.TrimSpace(stored)) {
		t.Fatalf("second start: %v, notice %q", err, notice.String())
	}
}
