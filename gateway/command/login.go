package command

import (
	"strings"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/runtime"
)

// LoginFailures is the journal body of a summary of failed logins, the
// same on every surface: "action" is "login_failed", and it names users,
// never a password or a token.
func LoginFailures(s access.Summary) runtime.LoginBody {
	b := runtime.LoginBody{Action: "login_failed", Surface: strings.Join(s.Surfaces, ","), Remote: s.Remote,
		Failures: s.Failures, Refused: s.Refused, Users: s.Users, OtherUsers: s.OtherUsers, Why: s.Why,
		First: s.First, Last: s.Last, LockedOut: s.LockedOut}
	if s.Addresses > 1 {
		b.Addresses = s.Addresses
	}
	return b
}
