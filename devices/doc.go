// Package devices is the device contract: what a device and its
// capabilities are, the typed values they carry, the readings they give, the
// small Driver interface every hardware driver implements, the typed
// outcomes a driver reports, and the Registry that unites the devices of
// every driver.
//
// Driver packages register a [Factory] under their type name from their
// init. A factory decodes and checks its own part of the configuration
// through [Instance] and [Place], which the gateway implements on the file,
// sets each capability's effect [Floor], and returns a [Builder].
//
// Like database/sql/driver, it holds no hardware code and no policy. It
// imports only the standard library and does no I/O of its own.
package devices
