package devices

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
)

// Entry is a device in the registry with the driver that reaches it.
type Entry struct {
	Device Device
	Driver Driver
}

// Change is a device appearing or vanishing at a refresh.
type Change struct {
	Device string
	Online bool
	// Driver is the driver that now holds the device, or that held it
	// until it vanished.
	Driver Driver
}

// Registry is the union of every driver's devices. The runtime refreshes it
// on every step, so an unplugged device is gone and comes back when its
// driver sees it again. It is safe for concurrent use.
type Registry struct {
	// mu guards drivers and devices.
	mu      sync.RWMutex
	drivers []namedDriver
	devices map[string]Entry
}

type namedDriver struct {
	name string
	d    Driver
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{devices: map[string]Entry{}} }

// Add registers a driver under a unique name.
func (r *Registry) Add(name string, d Driver) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, nd := range r.drivers {
		if nd.name == name {
			return errors.New("driver " + name + " is already registered")
		}
	}
	r.drivers = append(r.drivers, namedDriver{name, d})
	return nil
}

// Drivers returns the registered drivers by name, in the order added.
func (r *Registry) Drivers() []Driver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Driver, len(r.drivers))
	for i, nd := range r.drivers {
		out[i] = nd.d
	}
	return out
}

// Refresh asks every driver for its devices now and returns the devices
// that came or went since the last refresh, sorted by id. When a device id
// is offered by two drivers, the first driver added keeps it.
func (r *Registry) Refresh() []Change {
	drivers := r.driverList()
	// Collect outside the lock: Devices may take a driver's own lock.
	lists := make([][]Device, len(drivers))
	for i, nd := range drivers {
		lists[i] = nd.d.Devices()
	}
	return r.update(drivers, lists)
}

// driverList returns the registered drivers as they are now. The slice is
// only ever appended to, so the caller may range over it without the lock.
func (r *Registry) driverList() []namedDriver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.drivers
}

// update replaces the devices by the ones the drivers listed and returns
// what came or went.
func (r *Registry) update(drivers []namedDriver, lists [][]Device) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sameLocked(drivers, lists) {
		return nil
	}
	next := make(map[string]Entry, len(r.devices))
	for i, nd := range drivers {
		for _, d := range lists[i] {
			if _, dup := next[d.ID]; !dup {
				next[d.ID] = Entry{Device: d, Driver: nd.d}
			}
		}
	}
	var changes []Change
	for id, e := range next {
		if _, ok := r.devices[id]; !ok {
			changes = append(changes, Change{Device: id, Online: true, Driver: e.Driver})
		}
	}
	for id, e := range r.devices {
		if _, ok := next[id]; !ok {
			changes = append(changes, Change{Device: id, Online: false, Driver: e.Driver})
		}
	}
	slices.SortFunc(changes, func(a, b Change) int { return cmp.Compare(a.Device, b.Device) })
	r.devices = next
	return changes
}

// sameLocked reports whether the lists name exactly the devices held now,
// each with the driver that holds it. r.mu must be held.
func (r *Registry) sameLocked(drivers []namedDriver, lists [][]Device) bool {
	n := 0
	for i, l := range lists {
		for j := range l {
			e, ok := r.devices[l[j].ID]
			if !ok || e.Driver != drivers[i].d {
				return false
			}
			n++
		}
	}
	return n == len(r.devices)
}

// Lookup returns the device with the given id, if it is online.
func (r *Registry) Lookup(id string) (Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.devices[id]
	return e, ok
}

// Devices returns the online devices sorted by id.
func (r *Registry) Devices() []Device {
	out := r.unsorted()
	slices.SortFunc(out, func(a, b Device) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// unsorted returns the online devices in map order.
func (r *Registry) unsorted() []Device {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Device, 0, len(r.devices))
	for _, e := range r.devices {
		out = append(out, e.Device)
	}
	return out
}

// DriverHealth is the link state of one driver.
type DriverHealth struct {
	Name string
	// Reports is false for a driver that cannot tell; Err is then nil.
	Reports bool
	// Err is nil when the link works, or says why it does not.
	Err error
}

// Health asks every driver that can tell for its link state, in the order
// the drivers were added. It calls no driver with the registry's lock held.
func (r *Registry) Health(ctx context.Context) []DriverHealth {
	drivers := r.driverList()
	out := make([]DriverHealth, len(drivers))
	for i, nd := range drivers {
		out[i].Name = nd.name
		if hr, ok := nd.d.(HealthReporter); ok {
			out[i].Reports, out[i].Err = true, hr.Health(ctx)
		}
	}
	return out
}
