// Package devicetest helps test drivers and what uses them.
//
// [Driver] wraps any devices.Driver with the fault knobs every driver's
// tests share: an offline device, a stuck actuator, slow or failing reads
// and writes, a lost acknowledgement. It counts every call, so a test can
// assert that no write happened. [Config] is a driver's configuration held
// in memory, to test a factory without a configuration file.
//
// The simulator's configured faults are this wrapper, so the package is
// linked into the gateway: it imports neither testing nor anything that
// reaches the outside world.
package devicetest
