package runtime

import (
	"context"
	"errors"
	"sync"

	"github.com/shadowgate/shadowgate/devices"
)

// links keeps why each device a driver lost cannot be reached, as the
// driver told it, until the device is found again.
type links struct {
	// mu guards lost.
	mu   sync.Mutex
	lost map[string]error
}

func (l *links) set(device string, why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if why == nil {
		delete(l.lost, device)
		return
	}
	if l.lost == nil {
		l.lost = map[string]error{}
	}
	l.lost[device] = why
}

func (l *links) why(device string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[device]
}

// Lost returns, by id, the devices that were online and are lost now,
// with why, as their drivers told it.
func (e *Engine) Lost() map[string]string {
	e.links.mu.Lock()
	defer e.links.mu.Unlock()
	out := make(map[string]string, len(e.links.lost))
	for id, why := range e.links.lost {
		if _, online := e.reg.Lookup(id); !online {
			out[id] = why.Error()
		}
	}
	return out
}

// DeviceWhy says why a configured device is not online, as its driver
// told or tells it, or nil when it is online or nobody knows. A device
// that was never online is asked of every driver that can say.
func (e *Engine) DeviceWhy(device string) error {
	if _, ok := e.reg.Lookup(device); ok {
		return nil
	}
	if err := e.links.why(device); err != nil {
		return err
	}
	for _, d := range e.reg.Drivers() {
		if w, ok := d.(devices.Why); ok {
			if err := w.Why(device); err != nil {
				return err
			}
		}
	}
	return nil
}

// notice takes a change a Watcher told of: a reading is recorded as a read
// step; a device lost or found is looked for in the registry at once.
func (e *Engine) notice(ctx context.Context, n devices.Notice) {
	switch {
	case n.Reading != nil:
		e.heard(ctx, n.Device, n.Capability, *n.Reading)
	case n.Lost != nil:
		e.links.set(n.Device, n.Lost)
		e.refresh(ctx)
	case n.Found:
		e.links.set(n.Device, nil)
		e.refresh(ctx)
		e.readAgain(ctx, n.Device)
		e.safety.dueNow(n.Device) // a drive to safe it owes is made now
	}
}

// readAgain reads every readable capability of a device found again, so
// that what it holds now is known (a PLC that restarted with its valve
// closed), not the reading from before it went.
func (e *Engine) readAgain(ctx context.Context, device string) {
	ent, ok := e.reg.Lookup(device)
	if !ok {
		return
	}
	for _, c := range ent.Device.Capabilities {
		if c.Readable() && ctx.Err() == nil {
			e.read(ctx, nil, 0, "gateway:found", device, c.Name)
		}
	}
}

// refresh refreshes the registry and journals devices that came or went.
// A device that went is journaled with why, as its driver says, and its
// readings are marked bad.
func (e *Engine) refresh(ctx context.Context) {
	for _, ch := range e.reg.Refresh() {
		body := DeviceBody{Device: ch.Device}
		kind := KindDeviceOnline
		if !ch.Online {
			kind = KindDeviceOffline
			e.facts.markDevice(ch.Device)
			why := e.links.why(ch.Device)
			if why == nil {
				if w, ok := ch.Driver.(devices.Why); ok {
					why = w.Why(ch.Device)
				}
			}
			if why == nil {
				why = errors.New("its driver no longer lists it")
			}
			e.links.set(ch.Device, why)
			body.Reason = why.Error()
		} else {
			e.links.set(ch.Device, nil)
			e.safety.dueNow(ch.Device) // a drive to safe it owes is made now
		}
		_, _ = e.commit(ctx, Sync, Event{Kind: kind, Device: ch.Device}, body, nil)
	}
}
