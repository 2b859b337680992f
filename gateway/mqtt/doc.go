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
//	alarms/<id>, status         out   reserved for the gateway
//	checkpoints                 out   retained: the newest signed checkpoint, republished at start
//
// A v5 client's Response Topic and Correlation Data are honoured when the
// client may read that topic and it is neither one of the gateway's output
// topics nor a cmd/ or run/ topic; otherwise the command is refused on the
// default reply topic and nothing acts. The command id is the idempotency
// key: a QoS 1 redelivery or a retry gets the first outcome, never a
// second act. Outcomes are acted, contradicted (the driver took the
// command but the read-back contradicts it), completed (a read), refused,
// pending_approval (followed by a second reply when the approval is
// answered), started (a plan, followed by a reply when it ends) and
// failed; every one but acted, completed and started says why. A reply to
// a payload that does not parse still carries its id when it can be read.
//
// Clients authenticate with a user from the configuration (bcrypt hashes);
// anonymous clients are refused unless a role is given to them. A user's
// ACL is a list of topic filters to publish and to subscribe; an operator
// or above may publish commands by default, and everyone may subscribe
// under the prefix. No client may publish on the output topics (state/,
// reply/, events, approvals/, alarms/, status, checkpoints): a publish
// there is dropped and counted. A will is judged at connect time by the
// same ACL, may name neither an output topic nor a command topic (a will
// would command at a time nobody chose, unjudged), and a client whose will
// is not allowed is refused (v5 0x87, v3 "not authorized"). A client id
// belongs to the user whose session holds it: another user connecting with
// it is refused (v5 0x85, v3 "identifier rejected"), neither taking the
// session nor kicking its client off.
package mqtt
