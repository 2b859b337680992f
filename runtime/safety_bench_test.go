package runtime_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// BenchmarkRunningInterlocks measures what keeping one sensor reading
// costs with 200 running actuators whose running interlocks (two each,
// over 50 sensors) read it, against the same reading with no running
// interlocks configured, in one run. At 1,000 sensor updates a second the
// share of one core is ns/op × 1000 / 1e9; the target is at most 5%.
func BenchmarkRunningInterlocks(b *testing.B) {
	const actuators, sensors = 200, 50
	build := func(b *testing.B, guarded bool) *runtime.Engine {
		safe := value.Bool(false)
		pols := map[string]runtime.CapPolicy{}
		for i := range actuators {
			p := runtime.CapPolicy{Effects: &runtime.Declared{Reversible: true}, Safe: &safe}
			if guarded {
				p.While = []governance.Condition{
					{Sensor: fmt.Sprintf("s-%d.level", i%sensors), Op: governance.OpGT, Value: value.Number(5), MaxAge: time.Minute},
					{Sensor: fmt.Sprintf("s-%d.level", (i+1)%sensors), Op: governance.OpLT, Value: value.Number(95), MaxAge: time.Minute},
				}
			}
			pols[fmt.Sprintf("a-%d.on", i)] = p
		}
		e, err := runtime.New(context.Background(), runtime.Options{Registry: devices.NewRegistry(), Journal: runtimetest.NewMemJournal(), Policies: pols})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = e.Close() })
		now := time.Now()
		for i := range actuators { // every actuator runs: away from safe
			runtime.KeepReading(e, fmt.Sprintf("a-%d", i), "on", devices.Reading{Value: value.Bool(true), At: now, Quality: devices.QualityGood})
		}
		for i := range sensors {
			runtime.KeepReading(e, fmt.Sprintf("s-%d", i), "level", devices.Reading{Value: value.Number(50), At: now, Quality: devices.QualityGood})
		}
		return e
	}
	names := make([]string, sensors)
	for i := range names {
		names[i] = fmt.Sprintf("s-%d", i)
	}
	for _, c := range []struct {
		name    string
		guarded bool
	}{{"baseline", false}, {"running-interlocks", true}} {
		b.Run(c.name, func(b *testing.B) {
			e := build(b, c.guarded)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				runtime.KeepReading(e, names[i%sensors], "level", devices.Reading{Value: value.Number(float64(40 + i%20)), At: time.Now(), Quality: devices.QualityGood})
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*1000/1e9*100, "%core@1k/s")
		})
	}
}
