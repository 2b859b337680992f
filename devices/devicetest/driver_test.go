package devicetest_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/value"
)

// lamps is a trivial driver of its own: lamps that hold what was written
// and count the writes they were given.
type lamps struct {
	devs []devices.Device
	// afterWrite, if set, runs once a write took effect.
	afterWrite func()
	// mu guards on and writes.
	mu     sync.Mutex
	on     map[string]bool
	writes int
}

func newLamps(ids ...string) *lamps {
	l := &lamps{on: map[string]bool{}}
	for _, id := range ids {
		l.devs = append(l.devs, devices.Device{ID: id, Capabilities: []devices.Capability{
			{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}})
	}
	return l
}

func (l *lamps) Open(context.Context) error { return nil }
func (l *lamps) Devices() []devices.Device  { return l.devs }
func (l *lamps) Close() error               { return nil }

func (l *lamps) Read(_ context.Context, device, _ string) (devices.Reading, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return devices.Reading{Value: value.Bool(l.on[device]), Quality: devices.QualityGood}, nil
}

func (l *lamps) Write(_ context.Context, device, _ string, v value.Value) error {
	l.mu.Lock()
	l.on[device] = v.Bool
	l.writes++
	l.mu.Unlock()
	if l.afterWrite != nil {
		l.afterWrite()
	}
	return nil
}

func (l *lamps) written() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

// rig is a driver under the wrapper, with the one actuator the faults are
// tried on.
type rig struct {
	inner devices.Driver
	// passed counts the writes that reached the wrapped driver.
	passed             func() int
	device, capability string
	// afterWrite sets a function the wrapped driver runs once a write took
	// effect.
	afterWrite func(func())
}

// rigs builds each driver the wrapper is tried on: the trivial lamps and
// the simulator, to show that the faults do not depend on the driver.
func rigs(t *testing.T) map[string]func() rig {
	return map[string]func() rig{
		"lamps": func() rig {
			l := newLamps("lamp-1", "lamp-2")
			return rig{inner: l, passed: l.written, device: "lamp-1", capability: "on",
				afterWrite: func(f func()) { l.afterWrite = f }}
		},
		"sim": func() rig {
			var hook func()
			g, err := sim.New(sim.Options{
				Devices: []devices.Device{
					{ID: "valve-1", Address: "valve", Capabilities: []devices.Capability{{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
					{ID: "tank-1", Address: "tank", Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber}}},
				},
				// The hook runs just before the value takes effect; the
				// simulator does not look at ctx again after it.
				WriteHook: func(context.Context, string, string, value.Value) {
					if hook != nil {
						hook()
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			return rig{inner: g, passed: func() int { return g.Count("write", "valve-1", "open") }, device: "valve-1", capability: "open",
				afterWrite: func(f func()) { hook = f }}
		},
	}
}

// cancelled returns a context that is already done.
func cancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

func TestFaultsOnAnyDriver(t *testing.T) {
	on := value.Bool(true)
	refused := devices.Refused("0x02", "illegal data address")
	for name, mk := range rigs(t) {
		t.Run(name, func(t *testing.T) {
			// each makes a wrapper over a new driver, injects one fault and
			// checks what the caller sees and what reached the driver.
			each := func(t *testing.T, f devicetest.Fault) (rig, *devicetest.Driver) {
				r := mk()
				w := devicetest.Wrap(r.inner, devicetest.Options{})
				if err := w.Open(t.Context()); err != nil {
					t.Fatal(err)
				}
				w.SetFault(r.device, f)
				return r, w
			}
			readBack := func(t *testing.T, r rig, w *devicetest.Driver) bool {
				t.Helper()
				rd, err := w.Read(t.Context(), r.device, r.capability)
				if err != nil {
					t.Fatalf("read-back: %v", err)
				}
				return rd.Value.Bool
			}

			t.Run("healthy", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{})
				if err := w.Write(t.Context(), r.device, r.capability, on); err != nil {
					t.Fatal(err)
				}
				if !readBack(t, r, w) || r.passed() != 1 || w.Count("write", r.device, r.capability) != 1 || w.Count("read", r.device, r.capability) != 1 {
					t.Fatalf("after a healthy write: passed on %d, counts %d writes %d reads", r.passed(),
						w.Count("write", r.device, r.capability), w.Count("read", r.device, r.capability))
				}
			})

			t.Run("offline", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{Offline: true})
				for _, d := range w.Devices() {
					if d.ID == r.device {
						t.Fatal("an offline device is listed")
					}
				}
				err := w.Write(t.Context(), r.device, r.capability, on)
				var op *devices.OpError
				if devices.Classify(err) != devices.OutcomeOffline || !errors.As(err, &op) || op.Device != r.device {
					t.Fatalf("write to an offline device = %v, want an offline OpError naming it", err)
				}
				if _, err := w.Read(t.Context(), r.device, r.capability); !errors.Is(err, devices.ErrOffline) {
					t.Fatalf("read of an offline device = %v", err)
				}
				if r.passed() != 0 || w.Count("write", r.device, r.capability) != 1 {
					t.Fatalf("passed on %d writes, counted %d; want 0 and 1", r.passed(), w.Count("write", r.device, r.capability))
				}
				w.SetFault(r.device, devicetest.Fault{})
				if !slices.ContainsFunc(w.Devices(), func(d devices.Device) bool { return d.ID == r.device }) {
					t.Fatal("a healed device did not come back")
				}
				if len(w.Devices()) != len(r.inner.Devices()) {
					t.Fatalf("healed: %d devices, the driver has %d", len(w.Devices()), len(r.inner.Devices()))
				}
			})

			t.Run("stuck", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{Stuck: true})
				if err := w.Write(t.Context(), r.device, r.capability, on); err != nil {
					t.Fatalf("a stuck write = %v, want it accepted", err)
				}
				if readBack(t, r, w) || r.passed() != 0 {
					t.Fatalf("a stuck actuator moved (passed on %d)", r.passed())
				}
			})

			t.Run("write delay", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{WriteDelay: 1 << 62})
				if err := w.Write(cancelled(t), r.device, r.capability, on); !errors.Is(err, context.Canceled) {
					t.Fatalf("a slow write whose ctx ended = %v, want ctx's error", err)
				}
				if r.passed() != 0 || readBack(t, r, w) {
					t.Fatal("a write held up by its delay was passed on")
				}
				w.SetFault(r.device, devicetest.Fault{WriteDelay: 1})
				if err := w.Write(t.Context(), r.device, r.capability, on); err != nil || r.passed() != 1 {
					t.Fatalf("a write after its delay = %v, passed on %d", err, r.passed())
				}
			})

			t.Run("read delay", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{ReadDelay: 1 << 62})
				if _, err := w.Read(cancelled(t), r.device, r.capability); !errors.Is(err, context.Canceled) {
					t.Fatalf("a slow read whose ctx ended = %v", err)
				}
			})

			t.Run("write error", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{WriteErr: refused})
				err := w.Write(t.Context(), r.device, r.capability, on)
				if code, ok := devices.RefusalCode(err); !ok || code != "0x02" || devices.Classify(err) != devices.OutcomeRefused {
					t.Fatalf("write = %v, want the refusal with its code", err)
				}
				if r.passed() != 0 {
					t.Fatal("a failing write was passed on")
				}
			})

			t.Run("read error", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{ReadErr: devices.BadRequest("no such register")})
				if _, err := w.Read(t.Context(), r.device, r.capability); devices.Classify(err) != devices.OutcomeBadRequest {
					t.Fatalf("read = %v, want a bad request", err)
				}
			})

			t.Run("lost ack", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{LostAck: true})
				err := w.Write(t.Context(), r.device, r.capability, on)
				if devices.Classify(err) != devices.OutcomeUnknown || !errors.Is(err, devicetest.ErrLostAck) {
					t.Fatalf("write with a lost ack = %v, want an unknown outcome", err)
				}
				if r.passed() != 1 || !readBack(t, r, w) {
					t.Fatal("the write whose ack was lost did not take effect")
				}
			})

			t.Run("slow ack past ctx", func(t *testing.T) {
				r, w := each(t, devicetest.Fault{AckDelay: 1 << 62})
				ctx, cancel := context.WithCancel(t.Context())
				r.afterWrite(cancel) // the caller gives up once the device has acted
				err := w.Write(ctx, r.device, r.capability, on)
				if devices.Classify(err) != devices.OutcomeUnknown || !errors.Is(err, context.Canceled) {
					t.Fatalf("write whose ack came too late = %v, want an unknown outcome", err)
				}
				if r.passed() != 1 || !readBack(t, r, w) {
					t.Fatal("the write did not take effect")
				}
			})
		})
	}
}

// The write reaches Received before a delay or an error holds it up, and
// never for an offline device.
func TestReceivedBeforeTheFaultsHoldAWriteUp(t *testing.T) {
	l := newLamps("lamp-1")
	var got []string
	w := devicetest.Wrap(l, devicetest.Options{
		Faults: map[string]devicetest.Fault{"lamp-1": {Offline: true}},
		Received: func(device, capability string, v value.Value) error {
			got = append(got, device+"."+capability+"="+v.String())
			return nil
		},
	})
	if len(w.Devices()) != 0 {
		t.Fatalf("Devices = %v; the only lamp is offline from the start", w.Devices())
	}
	_ = w.Write(t.Context(), "lamp-1", "on", value.Bool(true))
	w.SetFault("lamp-1", devicetest.Fault{WriteDelay: 1 << 62})
	_ = w.Write(cancelled(t), "lamp-1", "on", value.Bool(true))
	w.SetFault("lamp-1", devicetest.Fault{WriteErr: errors.New("relay welded")})
	_ = w.Write(t.Context(), "lamp-1", "on", value.Bool(false))
	if want := []string{"lamp-1.on=true", "lamp-1.on=false"}; !slices.Equal(got, want) || l.written() != 0 {
		t.Fatalf("Received saw %v, the lamp %d writes; want %v and none", got, l.written(), want)
	}
	refuse := errors.New("full")
	w = devicetest.Wrap(l, devicetest.Options{Received: func(string, string, value.Value) error { return refuse }})
	if err := w.Write(t.Context(), "lamp-1", "on", value.Bool(true)); !errors.Is(err, refuse) || l.written() != 0 {
		t.Fatalf("a write Received refused = %v, passed on %d", err, l.written())
	}
}

// Faults change while calls run, from many goroutines; the race detector
// watches, and every call is counted.
func TestFaultsChangeWhileCallsRun(t *testing.T) {
	l := newLamps("lamp-1", "lamp-2")
	w := devicetest.Wrap(l, devicetest.Options{})
	const workers, calls = 4, 200
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for k := range calls {
				if i%2 == 0 {
					w.SetFault("lamp-1", devicetest.Fault{Offline: k%2 == 0, Stuck: k%3 == 0})
					_ = w.Devices()
				}
				_ = w.Write(t.Context(), "lamp-1", "on", value.Bool(k%2 == 0))
				_, _ = w.Read(t.Context(), "lamp-2", "on")
			}
		})
	}
	wg.Wait()
	if n := w.Count("write", "lamp-1", "on"); n != workers*calls {
		t.Fatalf("Count(write) = %d, want %d", n, workers*calls)
	}
	if n := w.Count("read", "lamp-2", "on"); n != workers*calls {
		t.Fatalf("Count(read) = %d, want %d", n, workers*calls)
	}
	if w.Unwrap() != devices.Driver(l) {
		t.Fatal("Unwrap does not return the wrapped driver")
	}
}
