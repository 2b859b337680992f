package gpio

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync"

	"periph.io/x/conn/v3/driver"
	"periph.io/x/conn/v3/driver/driverreg"
	periphgpio "periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"

	"github.com/shadowgate/shadowgate/devices"
)

// permissionHint is what to do when the service user may not use GPIO.
const permissionHint = "add the service user to the gpio group (or give it access to /dev/gpiochip*) and restart"

// listMax bounds how many pin names an error lists.
const listMax = 24

// resolve finds every line's pin in gpioreg. It fails naming each device
// whose pin is missing, with the pins that exist (or why there are none),
// and each pair of devices that are one physical pin.
func (d *Driver) resolve(st *driverreg.State, hostProblem error) error {
	var errs []error
	for _, l := range d.lines {
		p := gpioreg.ByName(l.dev.Address)
		if p == nil {
			errs = append(errs, &devices.OpError{Op: "open", Device: l.dev.ID, Err: fmt.Errorf("no pin %q on this machine", l.dev.Address)})
			continue
		}
		l.mu.Lock()
		l.pin, l.real = p, realPin(p)
		l.readsBack = readsBackSafely(l.real, st)
		l.mu.Unlock()
	}
	if len(errs) > 0 {
		return errors.Join(append(errs, pinsHere(hostProblem))...)
	}
	seen := map[string]*line{}
	for _, l := range d.lines {
		name := l.real.Name()
		if o, dup := seen[name]; dup {
			errs = append(errs, &devices.OpError{Op: "open", Device: l.dev.ID, Err: fmt.Errorf("pin %s is pin %s, which %s (%s) uses already: two devices on one line", l.dev.Address, name, o.dev.ID, o.dev.Address)})
			continue
		}
		seen[name] = l
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return d.claim()
}

// claimed are the physical pins the gpio drivers of this process hold,
// by the real pin's name: one line, one driver, whatever names two
// drivers' configurations give it (GPIO17 and P1_11).
var claimed = struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]*Driver
}{m: map[string]*Driver{}}

// claim takes every resolved pin for d, or none.
func (d *Driver) claim() error {
	claimed.mu.Lock()
	defer claimed.mu.Unlock()
	for _, l := range d.lines {
		if o := claimed.m[l.real.Name()]; o != nil && o != d {
			return &devices.OpError{Op: "open", Device: l.dev.ID,
				Err: fmt.Errorf("pin %s (%s) is reached by another gpio driver of this gateway already: one line, one driver", l.dev.Address, l.real.Name())}
		}
	}
	for _, l := range d.lines {
		claimed.m[l.real.Name()] = d
	}
	return nil
}

// release gives d's pins back.
func (d *Driver) release() {
	claimed.mu.Lock()
	defer claimed.mu.Unlock()
	for name, o := range claimed.m {
		if o == d {
			delete(claimed.m, name)
		}
	}
}

// pinsHere says which pins this machine has, or why it has none.
func pinsHere(hostProblem error) error {
	var names []string
	for _, p := range gpioreg.All() {
		names = append(names, p.Name())
	}
	if len(names) > 0 {
		s := "the pins on this machine are " + truncate(names)
		var aliases []string
		for _, p := range gpioreg.Aliases() {
			aliases = append(aliases, p.Name())
		}
		if len(aliases) > 0 {
			s += "; their other names are " + truncate(aliases)
		}
		return errors.New(s)
	}
	if hostProblem != nil {
		return fmt.Errorf("periph found no GPIO pin: %w; %s", hostProblem, permissionHint)
	}
	found, err := chips()
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return fmt.Errorf("periph found no GPIO pin: GPIO lines are reached through Linux's GPIO character devices (%w on this system)", err)
	case err != nil && isPermission(err):
		return fmt.Errorf("periph found no GPIO pin: the GPIO chips %s cannot be opened (%w); %s", strings.Join(found, ", "), err, permissionHint)
	case err != nil:
		return fmt.Errorf("periph found no GPIO pin: the GPIO chips %s cannot be opened: %w", strings.Join(found, ", "), err)
	case len(found) == 0:
		return errors.New("no GPIO chip was found on this machine")
	}
	return fmt.Errorf("periph found no GPIO pin on the GPIO chips %s", strings.Join(found, ", "))
}

// truncate lists names, at most listMax of them.
func truncate(names []string) string {
	if len(names) <= listMax {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:listMax], ", ") + fmt.Sprintf(" and %d more", len(names)-listMax)
}

// realPin returns the pin behind p's aliases.
func realPin(p periphgpio.PinIO) periphgpio.PinIO {
	for range 16 {
		r, ok := p.(periphgpio.RealPin)
		if !ok {
			return p
		}
		p = r.Real()
	}
	return p
}

// samePin reports whether a and b are the one pin object.
func samePin(a, b periphgpio.PinIO) bool {
	if a == nil || b == nil {
		return a == b
	}
	// A comparison of two values of one type that is not comparable
	// panics; periph's pins are pointers, but a PinIO need not be.
	if !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// readsBackSafely reports whether Read on real, an output, returns the
// line's level without changing the line. periph's character-device line
// (gpioioctl) re-requests an output as an input with a pull-up when it is
// read; a bcm283x pin reads the level register when /dev/gpiomem is mapped
// (its driver loaded) and falls back to the character-device line
// otherwise. Every other pin is read.
func readsBackSafely(real periphgpio.PinIO, st *driverreg.State) bool {
	t := reflect.TypeOf(real)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.PkgPath() + "." + t.Name() {
	case "periph.io/x/host/v3/gpioioctl.GPIOLine":
		return false
	case "periph.io/x/host/v3/bcm283x.Pin":
		return st != nil && slices.ContainsFunc(st.Loaded, func(i driver.Impl) bool { return i.String() == "bcm283x-gpio" })
	}
	return true
}

// implName names the host driver of a failure.
func implName(f driverreg.DriverFailure) string {
	if f.D == nil {
		return "?"
	}
	return f.D.String()
}

// isPermission reports whether err is for want of permission. periph
// formats some causes with %v, so the text is looked at too.
func isPermission(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, fs.ErrPermission) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "permission denied") || strings.Contains(s, "operation not permitted") || strings.Contains(s, "need more access")
}

// gpioError adds what to do to an error that is for want of permission.
func gpioError(err error) error {
	if isPermission(err) {
		return fmt.Errorf("%w; %s", err, permissionHint)
	}
	return err
}
