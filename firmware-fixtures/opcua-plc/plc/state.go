package plc

import (
	"fmt"
	"time"

	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"
)

// dataValue is a tag's Value attribute, read under the lock.
func (p *PLC) dataValue(t Tag) *ua.DataValue {
	p.mu.Lock()
	v := p.values[t]
	p.mu.Unlock()
	dv := server.DataValueFromValue(v)
	dv.EncodingMask |= ua.DataValueSourceTimestamp | ua.DataValueServerTimestamp
	dv.ServerTimestamp = dv.SourceTimestamp
	return dv
}

func (p *PLC) writable(t Tag) bool {
	d, ok := lookupTag(t)
	if !ok || !d.writable {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.locked[t]
}

// clientWrite applies a value a client wrote, or says why not.
func (p *PLC) clientWrite(d tagDef, v any) errCode {
	p.mu.Lock()
	defer p.mu.Unlock()
	code := codeGood
	switch {
	case !d.writable || p.locked[d.tag]:
		code = codeNotWritable
	default:
		code = d.check(v)
	}
	if code != codeGood {
		p.rejected[d.tag]++
		return code
	}
	p.writes[d.tag]++
	p.setLocked(d.tag, v)
	return codeGood
}

// setLocked stores a value and keeps derived state. p.mu must be held.
func (p *PLC) setLocked(t Tag, v any) {
	if t == PumpCommand && p.values[t] != v {
		p.cmdAt = p.simNow
	}
	p.values[t] = v
}

// handleWrite is the server's Write service. It applies each value through
// the namespace, as the stock handler does, and then answers at once, late
// or never, as StallWrites asks. Unlike the stock handler it does not call
// into a nil namespace for an unknown namespace index.
func (p *PLC) handleWrite(inst *instance, sc *uasc.SecureChannel, r ua.Request, reqID uint32) (ua.Response, error) {
	req, ok := r.(*ua.WriteRequest)
	if !ok {
		return nil, ua.StatusBadRequestTypeInvalid
	}
	results := make([]ua.StatusCode, len(req.NodesToWrite))
	for i, w := range req.NodesToWrite {
		if w == nil || w.NodeID == nil {
			results[i] = ua.StatusBadNodeIDInvalid
			continue
		}
		ns, err := inst.srv.Namespace(int(w.NodeID.Namespace()))
		if err != nil {
			results[i] = ua.StatusBadNodeIDUnknown
			continue
		}
		results[i] = ns.SetAttribute(w.NodeID, w.AttributeID, w.Value)
	}
	var handle uint32
	if req.RequestHeader != nil {
		handle = req.RequestHeader.RequestHandle
	}
	resp := &ua.WriteResponse{
		ResponseHeader: &ua.ResponseHeader{
			Timestamp:          time.Now(),
			RequestHandle:      handle,
			ServiceResult:      ua.StatusOK,
			ServiceDiagnostics: &ua.DiagnosticInfo{},
			StringTable:        []string{},
			AdditionalHeader:   ua.NewExtensionObject(nil),
		},
		Results:         results,
		DiagnosticInfos: []*ua.DiagnosticInfo{},
	}

	p.mu.Lock()
	stall := p.stallN > 0
	delay := p.stallFor
	if stall {
		p.stallN--
	}
	p.mu.Unlock()
	if !stall {
		return resp, nil
	}
	if delay < 0 {
		p.logger.Debug("write response dropped", "request_id", reqID)
		return nil, nil // the server sends nothing for a nil response
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.stopped {
		return nil, nil
	}
	inst.sends.Add(1)
	go func() {
		defer inst.sends.Done()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-inst.ctx.Done():
			return
		case <-t.C:
		}
		if err := sc.SendResponseWithContext(inst.ctx, reqID, resp); err != nil {
			p.logger.Debug("sending a delayed write response", "error", err)
		}
	}()
	return nil, nil
}

// runPhysics advances the physics every Tick until Close.
func (p *PLC) runPhysics() {
	defer p.physics.Done()
	t := time.NewTicker(p.opts.Tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.Advance(now.Sub(last))
			last = now
		}
	}
}

// Advance runs the physics for d at once, as if d had passed: the level
// rises while the pump runs and falls while the valve is open, bounded
// 0..100, and Pump.Running takes Pump.Command once FeedbackDelay has passed
// since the command changed (unless the pump is stuck). Subscribers are
// told of the tags that changed. With Options.Tick < 0 it is the only way
// time passes.
func (p *PLC) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	var changed []Tag
	p.mu.Lock()
	p.simNow += d
	running := p.values[PumpRunning].(bool)
	cmd := p.values[PumpCommand].(bool)
	if running != cmd && !p.stuck && p.simNow-p.cmdAt >= p.opts.FeedbackDelay {
		p.values[PumpRunning] = cmd
		changed = append(changed, PumpRunning)
	}
	level := p.values[TankLevel].(float64)
	rate := 0.0
	if running {
		rate += p.opts.FillRate
	}
	if p.values[ValveOpen].(bool) {
		rate -= p.opts.DrainRate
	}
	next := min(max(level+rate*d.Seconds(), 0), 100)
	if next != level {
		p.values[TankLevel] = next
		changed = append(changed, TankLevel)
	}
	p.mu.Unlock()
	p.notify(changed...)
}

// Value returns a tag's value: float64 for Double, float32 for Float, int32
// for Int32, bool for Boolean. It returns nil for an unknown tag.
func (p *PLC) Value(t Tag) any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.values[t]
}

// Set sets a tag from the PLC's side (any tag, read-only ones included,
// whether writable or not) and tells subscribers. The value's Go type must
// match the tag (see [PLC.Value]) and a number must be in the tag's range.
// Setting Pump.Command restarts the feedback delay.
func (p *PLC) Set(t Tag, v any) error {
	d, ok := lookupTag(t)
	if !ok {
		return fmt.Errorf("setting %s: %w", t, ErrUnknownTag)
	}
	if t == TankLevel {
		if f, ok := v.(float64); ok {
			v = min(max(f, 0), 100)
		}
	}
	if err := d.checkGo(v); err != nil {
		return err
	}
	p.mu.Lock()
	p.setLocked(t, v)
	p.mu.Unlock()
	p.notify(t)
	return nil
}

// Level returns Tank.Level in percent.
func (p *PLC) Level() float64 { return p.Value(TankLevel).(float64) }

// SetLevel sets Tank.Level, clamped to 0..100.
func (p *PLC) SetLevel(percent float64) { _ = p.Set(TankLevel, percent) }

// PumpCommand returns Pump.Command.
func (p *PLC) PumpCommand() bool { return p.Value(PumpCommand).(bool) }

// PumpRunning returns Pump.Running.
func (p *PLC) PumpRunning() bool { return p.Value(PumpRunning).(bool) }

// Valve returns Valve.Open.
func (p *PLC) Valve() bool { return p.Value(ValveOpen).(bool) }

// SetValve sets Valve.Open from the PLC's side.
func (p *PLC) SetValve(open bool) { _ = p.Set(ValveOpen, open) }

// SetWritable makes a tag writable by clients again or not. A client write
// to a tag that is not writable gets StatusBadNotWritable (0x803B0000),
// and its AccessLevel and UserAccessLevel attributes lose CurrentWrite.
// Read-only tags stay read-only. It returns ErrUnknownTag for a tag not in
// [Tags].
func (p *PLC) SetWritable(t Tag, writable bool) error {
	if _, ok := lookupTag(t); !ok {
		return fmt.Errorf("locking %s: %w", t, ErrUnknownTag)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.locked[t] = !writable
	return nil
}

// StallWrites holds back the response to the next n Write requests. Each is
// carried out as usual (the values are applied and counted); its response
// is sent after delay, or never if delay is [NoResponse] (a lost response).
// A held response is dropped if the server stops first. n <= 0 cancels.
// Other requests are answered meanwhile.
func (p *PLC) StallWrites(n int, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallN = max(n, 0)
	p.stallFor = delay
}

// StuckPump makes the pump ignore its command (true) or obey it again
// (false): Pump.Command is still written, but Pump.Running keeps its value.
func (p *PLC) StuckPump(stuck bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stuck = stuck
	if !stuck {
		p.cmdAt = p.simNow // the feedback delay starts when the pump frees
	}
}

// Writes returns how many client writes to t were applied.
func (p *PLC) Writes(t Tag) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes[t]
}

// Rejected returns how many client writes to t got a Bad status (not
// writable, wrong type or out of range).
func (p *PLC) Rejected(t Tag) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejected[t]
}
