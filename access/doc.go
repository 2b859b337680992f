// Package access holds who may use the gateway's surfaces: users with a
// role and a bcrypt password hash, checked in constant time whether or not
// the user exists, and a limiter that slows down guessing per client
// address and sums failed logins up, so that a flood of them costs the
// journal one record per address per window. The MQTT broker and the
// HTTP console share it.
package access
