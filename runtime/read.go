package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
)

// Read runs one governed read step outside any run, as a poller does.
func (e *Engine) Read(ctx context.Context, principal, device, capability string) (Observation, error) {
	if e.life.Err() != nil {
		return Observation{}, ErrStopped
	}
	obs := e.read(ctx, nil, 0, principal, device, capability)
	return obs, nil
}

// MayRead judges, as a read step would and with the same judge, whether
// principal may read device.capability now. It reads nothing and
// journals nothing: a surface that shows readings the gateway already
// holds asks it before it shows them to a principal a rule may keep from
// them. It returns nil when the read would be allowed, and otherwise
// why not; a device that is not online cannot be judged, and is not.
func (e *Engine) MayRead(ctx context.Context, principal, device, capability string) error {
	ent, ok := e.reg.Lookup(device)
	if !ok {
		return errors.New("device " + device + " is not online, so a read of it cannot be judged")
	}
	c, ok := ent.Device.Capability(capability)
	if !ok {
		return errors.New("device " + device + " has no capability " + capability)
	}
	if !c.Readable() {
		return errors.New(capability + " of " + device + " cannot be read")
	}
	req := governance.Request{
		Principal: principal, Device: device, Capability: capability,
		Profile: ReadProfile(&ent.Device, c), Mode: e.currentMode(ctx), Now: e.now(),
	}
	if v := governance.Judge(&req, e.conf().policy); v.Outcome != governance.Allow {
		return errors.New(v.Why)
	}
	return nil
}

// heard records a reading a device gave of its own accord (a Watcher's
// notice) as a read step: judged like a poll and journaled, without asking
// the driver again.
func (e *Engine) heard(ctx context.Context, device, capability string, rd devices.Reading) Observation {
	return e.readStep(ctx, nil, 0, "gateway:watch", device, capability, &rd)
}

// read is the read step: it never changes the world, so it has no attempt.
func (e *Engine) read(ctx context.Context, r *run, step int, principal, device, capability string) (obs Observation) {
	return e.readStep(ctx, r, step, principal, device, capability, nil)
}

// readStep is the read step. With heard set, the device already told the
// reading, and the driver is not asked.
func (e *Engine) readStep(ctx context.Context, r *run, step int, principal, device, capability string, heard *devices.Reading) (obs Observation) {
	if e.opts.OnStep != nil {
		start := time.Now()
		defer func() { e.opts.OnStep(obs.Kind, time.Since(start)) }()
	}
	runID := r.id()
	base := Observation{Run: runID, Step: step, Device: device, Capability: capability}
	if err := ctx.Err(); err != nil {
		return e.failedAs(ctx, Async, base, "cancelled before reading")
	}
	e.refresh(ctx)
	ent, c, obs, ok := e.lookupTarget(ctx, Async, base)
	if !ok {
		return obs
	}
	if !c.Readable() {
		return e.failedAs(ctx, Async, base, capability+" of "+device+" cannot be read")
	}
	req := governance.Request{
		Principal: principal, Device: device, Capability: capability,
		Profile: ReadProfile(&ent.Device, c), Mode: e.currentMode(ctx), Now: e.now(),
	}
	v := governance.Judge(&req, e.conf().policy)
	if v.Outcome != governance.Allow {
		// A read never asks: a person is not paged to approve a sensor.
		if v.Outcome == governance.Ask {
			v.Outcome, v.Why = governance.Refuse, "a read that would need approval is refused: "+v.Why
		}
		return e.refusedAs(ctx, Async, base, v)
	}
	if r != nil {
		r.charge(false)
	}
	var rd devices.Reading
	var err error
	if heard != nil {
		rd = e.keepReading(device, capability, *heard)
	} else {
		rd, err = e.driverRead(ctx, ent.Driver, device, capability)
	}
	if err != nil {
		e.facts.markBad(ref(device, capability))
		outcome := devices.Classify(err)
		code, _ := devices.RefusalCode(err)
		base.Kind, base.Why = Failed, driverWhy(outcome, device, err)
		_, _ = e.commit(ctx, Async, Event{Kind: KindFailed, Run: base.Run, Step: base.Step, Device: base.Device},
			FailedBody{Device: device, Capability: capability, Error: base.Why, Outcome: outcome.String(), Code: code}, nil)
		return base
	}
	base.Kind = Completed
	base.Reading = &rd
	_, _ = e.commit(ctx, Async, Event{Kind: KindObserved, Run: runID, Step: step, Device: device}, ObservedBody{
		Device: device, Capability: capability, Value: rd.Value, Quality: rd.Quality.String(), At: rd.At, Principal: principal,
	}, func(en *Entry) { en.State = &StateRecord{Device: device, Capability: capability, Reading: &rd} })
	return base
}

// driverRead reads with the driver timeout and records the reading.
func (e *Engine) driverRead(ctx context.Context, d devices.Driver, device, capability string) (devices.Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.DriverTimeout)
	defer cancel()
	rd, err := e.callRead(ctx, d, device, capability)
	if err != nil {
		return devices.Reading{}, err
	}
	return e.keepReading(device, capability, rd), nil
}

// keepReading fills in a reading's time and quality when the driver left them
// out, and records it.
func (e *Engine) keepReading(device, capability string, rd devices.Reading) devices.Reading {
	if rd.At.IsZero() {
		rd.At = e.now()
	}
	if rd.Quality == 0 {
		rd.Quality = devices.QualityGood
	}
	name := ref(device, capability)
	// A reading older than the one kept (a late notice) changes nothing.
	if old, hadOld, kept := e.facts.put(name, rd); kept {
		e.onReading(name, old, hadOld, rd)
	}
	return rd
}
