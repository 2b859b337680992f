// Package loadgen drives an MQTT broker with a measured load: publishers
// and subscribers at a QoS, payload size and rate (end-to-end latency from
// a timestamp in each payload), governed commands that wait for their
// replies (the gateway's cmd → reply round trip), or idle connections held
// open so that a broker's memory per connection can be read from outside.
//
// [Run] owns every goroutine and client it starts: it returns only once
// they have all stopped, when the load is done or its context ends.
// bench/load is its command line, bench/compare runs it against the
// gateway, a bare mochi broker and mosquitto in one run.
package loadgen
