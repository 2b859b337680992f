// Package opcua is the driver of OPC UA servers (PLCs), on
// github.com/gopcua/opcua, registered as the driver type "opcua"
// (config.go).
//
// A capability is a variable node, written by an actuator (with an
// optional separate node to read it back from, a PLC's feedback tag) and
// read by a sensor, which follows it by subscription or is polled. Values
// are converted strictly between the node's data type (read once at
// connecting) and the capability's type: a value that does not fit is a
// bad request and nothing is sent. A bad status is a refusal with the
// status's name; a write whose answer never came an unknown outcome.
//
// Before it connects, the driver asks for the server's endpoints and
// compares the certificate of the one it will use with the pinned SHA-256
// thumbprint; gopcua's client checks no server certificate by itself. The
// driver reconnects on its own, with backoff, so that it sees every loss
// of the session, tells of it and builds its subscriptions anew.
//
// [Trust] and [Browse] are the command line's tools: what a server's
// certificate is, and what its address space holds. The driver imports
// gopcua's client packages only, never its server.
package opcua
