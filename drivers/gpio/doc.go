// Package gpio drives GPIO lines through periph.io: a device is one line
// with one bool capability. An actuator is an output, read back from the
// line; a sensor is an input, whose debounced changes the driver tells of
// as they happen ([devices.Watcher]).
//
// The package registers the driver type "gpio" (config.go). A device's
// address is the pin as periph names it: the chip's line name ("GPIO17"),
// a header position ("P1_11") or any other name or alias in periph's
// gpioreg. Open loads periph's host drivers (host.Init), which on Linux
// register the GPIO character device's lines (periph's gpioioctl) first,
// and on a Raspberry Pi the bcm283x driver and the header names on top;
// the service user needs access to /dev/gpiochip* (the gpio group on
// Raspberry Pi OS).
//
// What the driver promises:
//   - A write drives the line and returns; an error from periph means the
//     line was not set (devices.Offline) and the device is lost until the
//     driver re-acquires it.
//   - A read of an output is the line's level. periph's character-device
//     line cannot be read while it is an output without turning it into
//     an input, so on such a line the read-back is the level the driver
//     drives (the kernel holds the line there while the driver has it).
//   - An input is watched by its own goroutine: it waits for edges (with a
//     bounded timeout, so the same code works on every periph pin) or
//     polls when edges cannot be had, and reports a level only once the
//     line has been quiet for the debounce time, and only when it changed.
//   - A lost line is retried with a backoff from 100ms doubling to 10s.
//     Re-acquiring an output drives it at the level it had before it was
//     lost, which the failed write did not change, or leaves it untouched
//     when the driver never drove it: it never actuates.
//   - Close halts every pin and returns after every goroutine of the
//     driver has ended.
//
// Linux-only code is in chips_linux.go; elsewhere the package builds and
// says that GPIO is not supported there.
package gpio
