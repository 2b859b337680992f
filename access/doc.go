// Package access holds who may use the gateway's surfaces: users with a
// role and a bcrypt password hash, checked in constant time whether or not
// the user exists, and a limiter that slows down guessing per client
// address and sums failed logins up, so that a flood of them costs the
// journal one record per address per window. The MQTT broker and the
// HTTP console share it.
//
// Loading the package does no bcrypt work: the hash that an unknown name
// is compared against is made the first time one is checked. The MQTT
// broker checks with [Users.CheckCached], which remembers a successful
// check for 10 minutes (at most 1024 users), so that a client that
// reconnects costs microseconds instead of a bcrypt comparison; the
// console, where a person logs in once a session, checks with
// [Users.Check], which always compares.
package access
