package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// ObservationKind is what came of a step.
type ObservationKind string

// The observations a step can make.
const (
	Completed       ObservationKind = "completed"
	Refused         ObservationKind = "refused"
	ApprovalRequest ObservationKind = "approval_request"
	Failed          ObservationKind = "failed"
	Acted           ObservationKind = "acted"
)

// Observation is what came of one step. Refused, Failed and ApprovalRequest
// say why; Completed carries a reading; Acted carries the receipt.
type Observation struct {
	Kind       ObservationKind  `json:"kind"`
	Run        string           `json:"run,omitempty"`
	Step       int              `json:"step"`
	RequestID  string           `json:"request_id,omitempty"`
	Device     string           `json:"device,omitempty"`
	Capability string           `json:"capability,omitempty"`
	Reading    *devices.Reading `json:"reading,omitempty"`
	Why        string           `json:"why,omitempty"`
	// Stage, Mode and Rule say what decided a refusal or an ask.
	Stage    string    `json:"stage,omitempty"`
	Mode     string    `json:"mode,omitempty"`
	Rule     string    `json:"rule,omitempty"`
	Approval *Approval `json:"approval,omitempty"`
	Receipt  *Receipt  `json:"receipt,omitempty"`
	// Replayed is true when a repeated request got its first outcome back.
	Replayed bool `json:"replayed,omitempty"`
	// ErrorID is set when Why tells of a failure of the gateway itself (its
	// journal could not be read or written) in public words: the log line
	// with the detail carries the same id.
	ErrorID string `json:"error_id,omitempty"`
}

// Outcome names what came of the step in the words every surface replies
// with: "acted", "contradicted" (it acted, and the read-back or the sensor
// said the world did not follow: a client must never take it for success),
// "completed" (a read), "refused", "pending_approval" or "failed".
func (o Observation) Outcome() string {
	switch o.Kind {
	case Acted:
		if o.Receipt != nil && o.Receipt.Confirmation.Discrepant() {
			return "contradicted"
		}
		return "acted"
	case Completed:
		return "completed"
	case Refused:
		return "refused"
	case ApprovalRequest:
		return "pending_approval"
	}
	return "failed"
}

// lookupTarget finds the device and capability of a step, or a Failed
// observation journaled with d: Async for a read, whose failures come as
// often as its polls (a device offline is polled on).
func (e *Engine) lookupTarget(ctx context.Context, d Durability, base Observation) (devices.Entry, *devices.Capability, Observation, bool) {
	ent, ok := e.reg.Lookup(base.Device)
	if !ok {
		why := "device " + base.Device + " is not online"
		if err := e.DeviceWhy(base.Device); err != nil {
			why = "device " + base.Device + " is offline: " + err.Error()
		}
		return ent, nil, e.failedAs(ctx, d, base, why), false
	}
	c, ok := ent.Device.Capability(base.Capability)
	if !ok {
		return ent, nil, e.failedAs(ctx, d, base, "device "+base.Device+" has no capability "+base.Capability), false
	}
	return ent, c, Observation{}, true
}

// failed journals a step that failed, promptly: someone may be waiting for
// the answer.
func (e *Engine) failed(ctx context.Context, base Observation, why string) Observation {
	return e.failedAs(ctx, Prompt, base, why)
}

// failedAs is failed with the durability d: Async for a read, whose
// failures come as often as its polls.
func (e *Engine) failedAs(ctx context.Context, d Durability, base Observation, why string) Observation {
	base.Kind, base.Why = Failed, why
	_, _ = e.commit(ctx, d, Event{Kind: KindFailed, Run: base.Run, Step: base.Step, Device: base.Device},
		FailedBody{Device: base.Device, Capability: base.Capability, Error: why}, nil)
	return base
}

// refused journals a step refused, promptly: someone may be waiting for
// the answer.
func (e *Engine) refused(ctx context.Context, base Observation, v governance.Verdict) Observation {
	return e.refusedAs(ctx, Prompt, base, v)
}

// refusedAs is refused with the durability d: Async for a read.
func (e *Engine) refusedAs(ctx context.Context, d Durability, base Observation, v governance.Verdict) Observation {
	base.Kind, base.Why, base.Stage, base.Mode, base.Rule = Refused, v.Why, v.Stage.String(), v.Mode, v.Rule
	_, _ = e.commit(ctx, d, Event{Kind: KindRefused, Run: base.Run, Step: base.Step, Device: base.Device}, RefusedBody{
		Device: base.Device, Capability: base.Capability, Why: v.Why, Stage: v.Stage.String(), Mode: v.Mode, Rule: v.Rule, Interlock: v.Interlock,
	}, nil)
	return base
}

// gather brings the readings behind interlocks up to date: a sensor whose
// cached reading is missing or older than the condition's max_age is read
// now. With fresh set, every one is read, as at the act.
func (e *Engine) gather(ctx context.Context, conds []governance.Condition, fresh bool) {
	now := e.now()
	for _, c := range conds {
		if !fresh {
			if f, ok := e.facts.Fact(c.Sensor); ok && f.Good && now.Sub(f.At) <= maxAge(c) {
				continue
			}
		}
		// The read is itself a governed, journaled step.
		dev, capability := splitRef(c.Sensor)
		if obs := e.read(ctx, nil, 0, "gateway:interlock", dev, capability); obs.Kind != Completed {
			e.facts.markBad(c.Sensor)
		}
	}
}

func maxAge(c governance.Condition) time.Duration {
	if c.MaxAge > 0 {
		return c.MaxAge
	}
	return governance.DefaultMaxAge
}

// digest binds an act: device, capability, value, principal and key.
func digest(device, capability string, v value.Value, principal, key string) string {
	h := sha256.New()
	for _, s := range []string{device, capability, v.Type.String(), v.String(), principal, key} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// lockActuator serializes the acts on one actuator, so that judging,
// acting and reading back see one history. It returns the unlock.
func (e *Engine) lockActuator(ctx context.Context, target string) (func(), error) {
	ch := func() chan struct{} {
		e.mu.Lock()
		defer e.mu.Unlock()
		ch, ok := e.actLocks[target]
		if !ok {
			ch = make(chan struct{}, 1)
			e.actLocks[target] = ch
		}
		return ch
	}()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
