// Package command is the command protocol every surface shares: how a
// command is parsed and routed, how it is dispatched to the runtime, what
// a reply says, and the one fold from journal events to the state a
// surface publishes. The embedded broker and the uplink both use it, so
// they publish one and the same payload for the same event. Errors that a
// client did not cause reach it as a PublicError with an id; the detail
// goes to the log.
package command
