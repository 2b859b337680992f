package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/shadowgate/shadowgate/firmware-fixtures/opcua-plc/plc"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// BenchmarkOPCUAStep measures what governance costs a step on a PLC over
// OPC-UA on loopback: a write of the valve and its read-back with gopcua's
// client alone (raw), and the same through the engine (governed: judged,
// journaled, the write's intent and receipt waiting for fsync, confirmed by
// its read-back); then a read of the tank level alike. It only measures:
// every operation is checked to have done what it should. x-raw is the
// governed time over the raw one of the same run.
func BenchmarkOPCUAStep(b *testing.B) {
	ctx := context.Background()
	plc.Quiet()
	p, err := plc.Start(plc.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	c, err := gopcua.NewClient(p.URL(), gopcua.SecurityMode(ua.MessageSecurityModeNone), gopcua.AutoReconnect(false))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(ctx) })
	valve, level := ua.MustParseNodeID(p.NodeID(plc.ValveOpen)), ua.MustParseNodeID(p.NodeID(plc.TankLevel))
	r := startHardwareWith(b, hwOptions{Header: opcuaHeader, Quiet: true},
		strings.NewReplacer("URL", p.URL(), "THUMB", p.Thumbprint()).Replace(opcuaHardware))
	r.WaitEvent(0, runtime.KindDeviceOnline, "valve-1")

	read := func(b *testing.B, id *ua.NodeID) any {
		res, err := c.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: id, AttributeID: ua.AttributeIDValue}}})
		if err != nil || len(res.Results) != 1 || res.Results[0].Status != ua.StatusOK {
			b.Fatalf("raw read: %v %+v", err, res)
		}
		return res.Results[0].Value.Value()
	}
	open := false
	var raw = map[string]time.Duration{}
	step := func(name string, raw0 func(b *testing.B), governed func(b *testing.B)) {
		b.Run(name+"/raw", func(b *testing.B) {
			raw0(b) // once before timing
			b.ResetTimer()
			for range b.N {
				raw0(b)
			}
			raw[name] = b.Elapsed() / time.Duration(b.N)
		})
		b.Run(name+"/governed", func(b *testing.B) {
			governed(b)
			share := r.durableShare()
			b.ResetTimer()
			for range b.N {
				governed(b)
			}
			if d := raw[name]; d > 0 {
				b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(d), "x-raw")
			}
			share.report(b, raw[name])
		})
	}
	step("write-confirmed", func(b *testing.B) {
		open = !open
		res, err := c.Write(ctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{NodeID: valve, AttributeID: ua.AttributeIDValue,
			Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(open)}}}})
		if err != nil || res.Results[0] != ua.StatusOK {
			b.Fatalf("raw write: %v %+v", err, res)
		}
		if got := read(b, valve); got != open {
			b.Fatalf("raw read-back %v after writing %v", got, open)
		}
	}, func(b *testing.B) {
		open = !open
		obs, err := r.Engine.Do(ctx, runtime.Command{Principal: "bench", Origin: "bench", RequestID: serialBenchID(),
			Device: "valve-1", Capability: "open", Value: value.Bool(open)})
		if err != nil || obs.Kind != runtime.Acted || obs.Receipt.Confirmation != runtime.Confirmed || p.Valve() != open {
			b.Fatalf("governed write %v = %+v, %v (PLC valve %v)", open, obs, err, p.Valve())
		}
	})
	want := p.Level()
	step("read-level", func(b *testing.B) {
		if got := read(b, level); got == nil {
			b.Fatal("raw read gave nothing")
		}
	}, func(b *testing.B) {
		obs, err := r.Engine.Read(ctx, "bench", "tank-1", "level")
		if err != nil || obs.Kind != runtime.Completed || obs.Reading == nil || obs.Reading.Value.Type != value.TypeNumber {
			b.Fatalf("governed read = %+v, %v (PLC level %v)", obs, err, want)
		}
	})
}
