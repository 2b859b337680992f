// Package mqtt is the gateway's embedded MQTT broker (mochi-mqtt) with its
// own authentication, ACL and command topics. Every command that arrives
// is a governed run of the engine, attributed to the MQTT user.
//
// Topics, under the prefix "shadowgate/<gateway-id>/":
//
//	cmd/<device>/<capability>   in    {"value": v, "id", "reason", "expires", "at"} or a bare JSON scalar; no value reads
//	run/<plan>                  in    {"id", "reason", "expires", "at"} or empty
//	reply/<device>/<capability> out   {"id", "outcome", "why", "approval", "receipt", ...}; reply/run/<plan>; reply/error
//	state/<device>/<capability> out   retained {"value", "at", "quality", "confirmation"}
//	events                      out   every journal event
//	approvals/<id>              out   retained while the approval is pending
//
// A v5 client's Response Topic and Correlation Data are honoured when the
// client may read that topic. The command id is the idempotency key: a
// QoS 1 redelivery or a retry gets the first outcome, never a second act.
// Outcomes are acted, completed (a read), refused, pending_approval
// (followed by a second reply when the approval is answered), started (a
// plan, followed by a reply when it ends) and failed; every one but acted,
// completed and started says why.
//
// Clients authenticate with a user from the configuration (bcrypt hashes);
// anonymous clients are refused unless a role is given to them. A user's
// ACL is a list of topic filters to publish and to subscribe; an operator
// or above may publish commands by default, and everyone may subscribe
// under the prefix. No client may publish on state/, events, approvals/ or
// reply/. A denied publish is dropped by the broker and counted.
package mqtt
