// Package runtime is the step engine: every sensor read and every actuator
// write is a step that is judged by governance and witnessed in the journal
// before it touches hardware.
//
// A step makes the same moves every time: cancel check, lease check, refresh
// the registry, resolve the device and capability, gather and validate the
// input, resume an approved step or judge a new one, and on Allow re-check
// the interlocks and the authorization, write the "executing" record
// (durably), charge the lease, invoke the driver, and read the world back
// into a receipt.
//
// Runs execute plans (named sequences of read, write, wait and expect steps)
// under a lease. A step that must ask parks its run until a person answers;
// parked time is not spent. Everything the engine decides is an event in the
// [Journal], which subscribers follow by sequence number.
package runtime
