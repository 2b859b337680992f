// Package plc plays a small tank PLC behind an OPC-UA server, so that the
// OPC-UA driver can be tested and demonstrated without a PLC. It serves
// through gopcua's server package (v0.8.0) and imports nothing of
// Shadowgate: it is the hardware, written apart from the code that talks
// to it.
//
// # Address space
//
// The tags live in the namespace [NamespaceURI], index [NamespaceIndex]
// (1), under the folder ns=1;i=85 ("PLC"), which the standard Objects
// folder organizes. Node ids are strings, [NodeID] gives them:
//
//	ns=1;s=Tank.Level     Double   read-only   %, 0..100, from the physics
//	ns=1;s=Pump.Command   Boolean  read/write
//	ns=1;s=Pump.Running   Boolean  read-only   follows Pump.Command after FeedbackDelay
//	ns=1;s=Valve.Open     Boolean  read/write  drain valve
//	ns=1;s=Setpoint       Double   read/write  %, 0..100
//	ns=1;s=Mixer.Speed    Int32    read/write  rpm, 0..3000
//	ns=1;s=Heater.Power   Float    read/write  %, 0..100
//	ns=1;s=Drain.Lock     Boolean  read/write  meant to be locked with SetWritable
//
// Each tag answers the Value, DataType (a NodeId: i=1 Boolean, i=6 Int32,
// i=10 Float, i=11 Double), ValueRank (-1, scalar), AccessLevel and
// UserAccessLevel (1 read, 3 read and write), NodeClass, BrowseName,
// DisplayName and Description (the unit) attributes.
//
// A client write is answered per value, like a PLC does:
//
//	Good                              applied
//	Bad_NotWritable     0x803B0000    a read-only tag, a tag locked with SetWritable, or an attribute other than Value
//	Bad_TypeMismatch    0x80740000    the variant's type is not the tag's (no conversion: an Int32 tag takes only an Int32)
//	Bad_OutOfRange      0x803C0000    a number outside the tag's range, NaN or an infinity
//	Bad_NodeIdUnknown   0x80340000    no such node
//
// Server-side changes (the physics, [PLC.Set] and the setters) and client
// writes are reported to subscriptions (the server coalesces them to the
// latest value per monitored item and publishing interval).
//
// # Physics
//
// Every Options.Tick the level rises at FillRate while Pump.Running is
// true and falls at DrainRate while Valve.Open is true, bounded 0..100.
// Pump.Running takes the value of Pump.Command once FeedbackDelay has
// passed since the command changed, unless [PLC.StuckPump] holds it. With
// a negative Tick no time passes except through [PLC.Advance].
//
// # Faults
//
// [PLC.SetWritable] locks a tag; [PLC.StallWrites] applies the next writes
// but answers them late or never (a lost response); [PLC.StuckPump] takes
// the command without the feedback following; [PLC.Restart] reboots the
// server on the same port, keeping the tags; [PLC.Writes] and
// [PLC.Rejected] count what clients did, so a test can assert that no
// write happened.
//
// # Security
//
// Only security policy None (anonymous) is offered. The server still has a
// certificate (self-signed, RSA 2048, URI SAN [ApplicationURI]) and
// advertises it in its endpoint, so a client can pin [PLC.Thumbprint].
// The gopcua server ignores user identity tokens: any user name and
// password are accepted.
//
// Basic256Sha256 (Sign or SignAndEncrypt) cannot work with gopcua v0.8.0's
// server, so [Start] refuses it with [ErrSecurityUnsupported]. A server
// secure channel starts with SecurityMode None (server/server_config.go:123,
// defaultChannelConfig, used by server/channel_broker.go:55). When the
// client's OpenSecureChannel request comes, readChunk
// (uasc/secure_channel.go:479) takes the request's security policy but
// not its mode, which is inside the still-encrypted body, so
// channelInstance.verifyAndDecrypt (uasc/secure_channel_instance.go:214)
// sees mode None and returns the body undecrypted. Decoding that ciphertext
// fails ("opcua: invalid node id type NodeIDType(n)", the server drops the
// channel) and the client times out. Nothing outside gopcua can change the
// channel's mode before that point. Setting the mode to SignAndEncrypt in
// readChunk when the policy is not None (what gopcua pull request 817 does
// upstream, after v0.8.0, and pull request 866 refines) made both Sign and
// SignAndEncrypt work between gopcua's client and this server, reads and
// writes included, in a patched copy.
//
// # Logging
//
// The gopcua server prints through the standard log package at every
// start ("New Node Set", "doing objects.", "Started listening on ...") and
// offers no option to stop it. [Quiet] discards the standard logger's
// output, which affects the whole process: call it from main or TestMain.
// The server's own logger interface is fed from Options.Logger at Debug.
//
// # Connections and goroutines
//
// The gopcua server never closes an accepted connection: its Close only
// sends the client a CloseSecureChannel message and waits up to 10s for
// the client to hang up, and its subscription goroutines outlive it. So
// [PLC.Close] and [PLC.Restart] delete the subscriptions and, on Linux,
// shut the accepted sockets down themselves (found through /proc). After
// Close returns no goroutine of the server remains. Off Linux a client
// connected at Close keeps its connection, and the server's reading
// goroutine, until it hangs up.
package plc
