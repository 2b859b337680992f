package devices

import (
	"slices"
	"sync"
)

// A Factory makes the drivers of one type. A driver package registers its
// factory from its init with [Register]; the gateway looks it up by the
// type a configuration names, the way database/sql finds its drivers.
type Factory struct {
	// Type names the driver in configuration files: "sim", "gpio". It is
	// also the key of the driver's own options in a driver's entry.
	Type string
	// Configure decodes and checks one configured driver: its own options
	// (in.Decode) and the devices it reaches, their addresses and whether
	// their capabilities fit. It reports every problem through in, at its
	// place, and then returns nil. It sets the effect Floor of every
	// capability in devs, in place (devs[i].Capabilities[k].Floor): the
	// gateway keeps those floors and nothing else Configure changes. It
	// does no I/O: `shadowgate check` calls it too.
	//
	// The gateway has already checked what every device has in common
	// (ids, kinds, types, names); devs holds only devices that passed.
	Configure func(in Instance, devs []Device) Builder
	// SharedAddress lets several devices have one address, as the
	// registers of one Modbus unit do. By default the gateway refuses a
	// second device on an address: one thing in the world has one id, so
	// that no second id gets around the first one's lock, dwell and
	// pending approval. A factory that sets it takes that rule on itself:
	// Configure refuses two capabilities that reach one thing.
	SharedAddress bool
}

// Builder builds a configured driver at run time. The driver is opened
// after, with Open; a Builder may read files (a state file) but must not
// reach devices.
type Builder func(env Env) (Driver, error)

// Env is what a driver is built with at run time.
type Env struct {
	// StateDir is the gateway's state directory. A driver keeps its files
	// there and resolves relative paths of its options against it.
	StateDir string
	// Devices are the devices the driver reaches, as Configure saw them,
	// with the floors it set. The driver must not modify them.
	Devices []Device
	// Logger is where the driver says what happens on its links: a
	// *slog.Logger that names the driver. Nil means the driver logs to
	// slog.Default().
	Logger Logger
}

// Logger is what a driver logs through; *slog.Logger is one.
type Logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// Instance is one configured driver as its factory sees it. The gateway
// implements it on the configuration file, so that a problem reported
// through it names the file, the line and column, and the key path.
type Instance interface {
	// Name is the driver's name in the configuration: "sim", "plc-1".
	Name() string
	// Decode fills v, a pointer to the factory's own options type (a struct
	// whose fields carry yaml tags), from the driver's options, strictly:
	// an unknown key, a value of the wrong kind or a YAML 1.1 boolean is
	// reported at its place. It returns false when it reported a problem.
	// When the driver has no options, v is left as it was and Decode
	// returns true.
	Decode(v any) bool
	// Options is the place of the driver's options, to report a problem in
	// them: Options().At("faults").At("pump-1").Errorf(...).
	Options() Place
	// Device is the place of devs[i], the i-th device given to Configure:
	// Device(i).At("address").Errorf(...).
	Device(i int) Place
	// Claim says that this driver reaches the thing of kind named key (a
	// serial port by its path, a GPIO line by its pin), written at at. One
	// thing in the world is reached by one driver: a second driver's claim
	// of it is reported at that claim, naming the first, and Claim returns
	// false. A driver that uses a thing for several devices claims it
	// once.
	Claim(kind, key string, at Place) bool
}

// Place is a place in the configuration: a driver's options, a device, or
// a key or list item inside one.
type Place interface {
	// At returns the place of key inside this mapping.
	At(key string) Place
	// Index returns the place of the i-th item of this list, from 0.
	Index(i int) Place
	// Errorf reports a problem here. The message says what is wrong in the
	// terms of the file, without the place: the gateway adds it.
	Errorf(format string, args ...any)
}

// factories are the registered driver types. Registration happens at init,
// lookups after; the lock keeps a test that registers its own type safe.
var factories = struct {
	// mu guards m.
	mu sync.RWMutex
	m  map[string]Factory
}{m: map[string]Factory{}}

// Register makes a driver type available to configurations. It is called
// from the init of the driver's package. It panics when the type is empty,
// Configure is nil or the type is registered already: each is a
// programming error, found when the binary starts.
func Register(f Factory) {
	if f.Type == "" || f.Configure == nil {
		panic("devices: Register of a factory without a type or a Configure")
	}
	factories.mu.Lock()
	defer factories.mu.Unlock()
	if _, dup := factories.m[f.Type]; dup {
		panic("devices: Register called twice for driver type " + f.Type)
	}
	factories.m[f.Type] = f
}

// LookupFactory returns the factory registered for a driver type.
func LookupFactory(typ string) (Factory, bool) {
	factories.mu.RLock()
	defer factories.mu.RUnlock()
	f, ok := factories.m[typ]
	return f, ok
}

// DriverTypes returns the registered driver types, sorted: the drivers
// this build has.
func DriverTypes() []string {
	factories.mu.RLock()
	defer factories.mu.RUnlock()
	out := make([]string, 0, len(factories.m))
	for t := range factories.m {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
