// Package devices is the device contract: what a device and its
// capabilities are, the typed values they carry, the readings they give, the
// small Driver interface every hardware driver implements, and the Registry
// that unites the devices of every driver.
//
// Like database/sql/driver, it holds no hardware code and no policy. It
// imports only the standard library and does no I/O of its own.
package devices
