// Package mqtt is the gateway's embedded MQTT broker (mochi-mqtt) with its
// own authentication, ACL and command topics. Every command that arrives
// is a governed run of the engine, attributed to the MQTT user.
//
// The topics, the payloads and the replies are the command protocol of
// package command, under the prefix "shadowgate/<gateway-id>/"; the
// broker publishes every stream of it but receipts.
//
// A v5 client's Response Topic and Correlation Data are honoured when the
// client may read that topic and it is neither one of the gateway's output
// topics nor a cmd/ or run/ topic; otherwise the command is refused on the
// default reply topic and nothing acts.
//
// Listen binds every listener (TCP, TLS, websockets) and says which port
// it could not bind; Run serves.
//
// Clients authenticate with a user from the configuration (bcrypt hashes;
// a password bcrypt accepted is remembered for 10 minutes, so a client
// that reconnects is not checked with bcrypt again, see
// [access.Users.CheckCached]); anonymous clients are refused unless a
// role is given to them. A user's ACL is a list of topic filters to
// publish and to subscribe; an operator or above may publish commands by
// default, and everyone may subscribe under the prefix. No client may
// publish on the output topics (state/,
// reply/, events, approvals/, alarms/, status, checkpoints, ha/): a publish
// there is dropped and counted. A will is judged at connect time by the
// same ACL, may name neither an output topic nor a command topic (a will
// would command at a time nobody chose, unjudged), and a client whose will
// is not allowed is refused (v5 0x87, v3 "not authorized"). A client id
// belongs to the user whose session holds it: another user connecting with
// it is refused (v5 0x85, v3 "identifier rejected"), neither taking the
// session nor kicking its client off.
//
// The broker publishes "online" on status, retained, as it starts serving,
// and "offline" as it stops. With Options.HomeAssistant it announces every
// capability to Home Assistant by MQTT discovery (see HomeAssistant): the
// entities command on the governed cmd/ topics and read ha/<device>/<cap>,
// which carries only what the gateway believes, ha/<device>/<cap>/outcome,
// an actuator's last outcome, ha/_device/<device>, whether a device is
// reachable, and ha/mode, the mode in force. While it is
// on, no client may publish under the discovery prefix but on its status
// (Home Assistant's birth and will), nor point a response topic there.
package mqtt
