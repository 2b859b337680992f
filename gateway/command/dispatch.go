package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
)

// Engine is what the protocol asks of the runtime. *runtime.Engine
// implements it.
type Engine interface {
	Capability(device, capability string) (devices.Device, devices.Capability, bool)
	// DeviceWhy says why a device is not online, or nil.
	DeviceWhy(device string) error
	Do(ctx context.Context, cmd runtime.Command) (runtime.Observation, error)
	StartPlan(ctx context.Context, sp runtime.StartPlan) (runtime.RunRecord, error)
	Outcome(ctx context.Context, run string) (runtime.Observation, runtime.RunRecord, error)
}

// Dispatcher carries out the commands of one surface. Its zero value is
// not usable: Engine and Spawn must be set. It is safe for concurrent use
// once set.
type Dispatcher struct {
	Engine Engine
	// Origin names the surface in the journal and in parked runs: "mqtt",
	// "uplink".
	Origin string
	// Log receives the detail of failures that are not the client's
	// doing. Nil discards it.
	Log *slog.Logger
	// Spawn runs fn in a goroutine that the surface owns and waits for,
	// giving it a context that ends when the surface stops. It is how a
	// command that parks, and a plan run, wait for their second answer.
	Spawn func(fn func(context.Context))
}

// Prepare checks a command's payload against its route: the device and
// capability must be online, the value of their type. Its errors describe
// what the client sent, and are meant for the client.
func (d *Dispatcher) Prepare(r Route, payload []byte) (Request, error) {
	var req Request
	var err error
	if r.Kind == "cmd" {
		_, c, ok := d.Engine.Capability(r.Device, r.Capability)
		if !ok {
			if why := d.Engine.DeviceWhy(r.Device); why != nil {
				return req, fmt.Errorf("device %s is offline: %w", r.Device, why)
			}
			return req, fmt.Errorf("device %s is not online or has no capability %s", r.Device, r.Capability)
		}
		req, err = ParseCommand(payload, c.Type, c.Enum)
	} else {
		req, err = ParseRun(payload)
	}
	if err != nil {
		return req, fmt.Errorf("payload: %w", err)
	}
	return req, nil
}

// Dispatch runs a prepared command through the engine as principal and
// answers it with reply. A command that parks, and a plan run, get a
// second answer when they end, from a goroutine that Spawn runs. replyTo
// is kept with the run, so that a surface can answer a parked command
// after a restart. Dispatch blocks until the first answer is sent or ctx
// ends.
func (d *Dispatcher) Dispatch(ctx context.Context, principal, replyTo string, r Route, req Request, reply func(Reply)) {
	base := Reply{ID: req.ID, Device: r.Device, Capability: r.Capability, Plan: r.Plan}
	if base.ID == "" {
		base.ID, base.IDGenerated = newID(), true
	}
	if r.Kind == "run" {
		rec, err := d.Engine.StartPlan(ctx, runtime.StartPlan{Plan: r.Plan, Principal: principal, Origin: d.Origin,
			RequestID: base.ID, Reason: req.Reason, ReplyTo: replyTo})
		rep := base
		if err != nil {
			rep.Outcome = OutcomeFailed
			if errors.Is(err, runtime.ErrPlanRunning) {
				// One run of a plan at a time: the running one is named.
				rep.Outcome = OutcomeRefused
			}
			rep.Why, rep.ErrorID = d.failure(err, principal, base.ID)
			reply(rep)
			return
		}
		rep.Outcome, rep.Run = OutcomeStarted, rec.ID
		reply(rep)
		d.Spawn(func(life context.Context) { d.AnswerWhenDone(life, rec.ID, base, reply) })
		return
	}
	obs, err := d.Engine.Do(ctx, runtime.Command{Principal: principal, Origin: d.Origin, RequestID: base.ID, Reason: req.Reason,
		Device: r.Device, Capability: r.Capability, Value: req.Value, ReplyTo: replyTo})
	if err != nil {
		rep := base
		rep.Outcome = OutcomeFailed
		rep.Why, rep.ErrorID = d.failure(err, principal, base.ID)
		reply(rep)
		return
	}
	rep := replyFor(obs)
	rep.ID, rep.IDGenerated = base.ID, base.IDGenerated
	reply(rep)
	if obs.Kind == runtime.ApprovalRequest && !obs.Replayed {
		d.Spawn(func(life context.Context) { d.AnswerWhenDone(life, obs.Run, base, reply) })
	}
}

// failure is what a reply says of an error of the engine: its text when
// the client caused it (a plan that does not exist), public words when it
// is plain what happened (the gateway is stopping, no answer in time),
// and otherwise a public message with an error id, the detail going to
// the log.
func (d *Dispatcher) failure(err error, principal, id string) (why, errorID string) {
	switch {
	case errors.Is(err, runtime.ErrUnknownPlan), errors.Is(err, runtime.ErrPlanRunning):
		return err.Error(), ""
	case errors.Is(err, runtime.ErrStopped), errors.Is(err, context.Canceled):
		return "the gateway is stopping; send the command again once it is back", ""
	case errors.Is(err, context.DeadlineExceeded):
		return "no outcome in time; the command may still be carried out, and its outcome will be on the events topic", ""
	}
	pe := Internal(d.Log, "the command could not be carried out", err, "principal", principal, "request_id", id)
	return pe.Message, pe.ID
}

// AnswerWhenDone sends the second reply of a run once it has ended. If
// ctx ends first (the gateway stops), the run stays parked and no reply is
// sent; its outcome appears on the events topic after the next start.
func (d *Dispatcher) AnswerWhenDone(ctx context.Context, run string, base Reply, reply func(Reply)) {
	obs, rec, err := d.Engine.Outcome(ctx, run)
	if err != nil {
		return
	}
	var rep Reply
	if rec.Plan == "command" {
		rep = replyFor(obs)
	} else {
		rep = Reply{Plan: base.Plan, Outcome: OutcomeCompleted}
		switch rec.End {
		case runtime.EndCompleted:
		case runtime.EndRefused, runtime.EndLeaseExhausted:
			rep.Outcome, rep.Why = OutcomeRefused, rec.Why
		default:
			rep.Outcome, rep.Why = OutcomeFailed, rec.Why
		}
	}
	rep.ID, rep.IDGenerated, rep.Run = base.ID, base.IDGenerated, run
	reply(rep)
}

// ParkedBase is the reply a parked run's second answer starts from.
func ParkedBase(rec runtime.RunRecord) Reply {
	base := Reply{ID: rec.RequestID}
	if rec.Plan != "command" {
		base.Plan = rec.Plan
	}
	return base
}

// newID makes a command id for a command that came without one.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "mqtt-" + hex.EncodeToString(b[:])
}
