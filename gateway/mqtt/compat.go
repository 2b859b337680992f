package mqtt

import "github.com/shadowgate/shadowgate/gateway/command"

// Reply is the reply to a command.
//
// Deprecated: use command.Reply; the command protocol lives in
// gateway/command. This alias goes once no caller names it.
type Reply = command.Reply

// Outcomes of a reply.
//
// Deprecated: use the command package's outcomes.
const (
	OutcomeActed           = command.OutcomeActed
	OutcomePendingApproval = command.OutcomePendingApproval
)
