// Package command is the command protocol every surface shares: how a
// command is parsed and routed, how it is dispatched to the runtime, what
// a reply says, and the one fold from journal events to the state a
// surface publishes. The embedded broker (gateway/mqtt) and the uplink
// (gateway/uplink) both use it, so they publish one and the same payload
// for the same event. Errors that a client did not cause reach it as a
// public message with an error id; the detail goes to the log.
//
// Topics, relative to a surface's prefix ("shadowgate/<gateway-id>/" on
// the broker):
//
//	cmd/<device>/<capability>   in    {"value": v, "id", "reason", "expires", "at"} or a bare JSON scalar; no value reads
//	run/<plan>                  in    {"id", "reason", "expires", "at"} or empty
//	reply/<device>/<capability> out   a Reply: {"id", "outcome", "why", "error_id", "approval", "receipt", ...}; reply/run/<plan>; reply/error
//	state/<device>/<capability> out   retained State: {"device", "capability", "value", "at", "quality", "confirmation", "attempt"}
//	events                      out   every journal event
//	approvals/<id>              out   retained while the approval is pending
//	alarms/<id>                 out   retained while the alarm stands (active or unacknowledged): the alarm; empty once normal
//	checkpoints                 out   retained: the newest signed checkpoint
//	receipts/<device>/<cap>     out   the uplink only: every actuation's receipt
//	status                      out   retained: "online" while the gateway serves, "offline" as it stops
//	ha/<device>/<capability>    out   retained, with Home Assistant discovery on: the believed state, plain
//	ha/<device>/<cap>/outcome   out   retained, with Home Assistant discovery on: an actuator's last outcome
//	ha/_device/<device>         out   retained, with Home Assistant discovery on: online or offline
//	ha/mode                     out   retained, with Home Assistant discovery on: the mode in force
//
// The command id is the idempotency key: a QoS 1 redelivery or a retry
// gets the first outcome, never a second act. Outcomes are acted,
// contradicted (the driver took the command but the read-back contradicts
// it), completed (a read), refused, pending_approval (followed by a second
// reply when the approval is answered), started (a plan, followed by a
// reply when it ends) and failed; every one but acted, completed and
// started says why. A reply to a payload that does not parse still carries
// its id when it can be read. A failure that is not the client's doing
// says so in public words and carries an error_id, which the gateway's log
// has with the detail.
package command
