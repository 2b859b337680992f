package runtime_test

import (
	"context"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// BenchmarkReadStep compares a governed read step (refresh, resolve, judge,
// journal) with a raw read of the same sim driver, in one run.
func BenchmarkReadStep(b *testing.B) {
	ctx := context.Background()
	g, err := sim.New(sim.Options{Devices: greenhouse()})
	if err != nil {
		b.Fatal(err)
	}
	_ = g.Open(ctx)
	reg := devices.NewRegistry()
	_ = reg.Add("sim", g)
	e, err := runtime.New(ctx, runtime.Options{Registry: reg, Journal: runtimetest.NewMemJournal(), Policies: policies()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Read(ctx, "tank-1", "level"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("governed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obs, err := e.Read(ctx, "gateway:poller", "tank-1", "level")
			if err != nil || obs.Kind != runtime.Completed {
				b.Fatal(obs.Why, err)
			}
		}
	})
}
