package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/line"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	linefirmware "github.com/shadowgate/shadowgate/firmware-fixtures/line-firmware"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// The benchmark below measures what governance costs a device step on the
// line firmware: the same step through the line driver alone (raw), through
// the engine (governed: judged, journaled, confirmed by its read-back), and
// through the engine from an MQTT client (governed-mqtt). It only measures;
// it asserts no time. Every operation is checked to have done what it
// should, so that a step that failed fast is never timed as a fast step.
//
// The firmware runs on a pseudo-terminal, which ignores the baud rate: a
// byte crosses it in no time, where on a real line at 115200 baud 8N1 it
// takes 10 bits, about 87µs. So each pair also reports the governance
// overhead against raw plus the wire time of the bytes its step puts on the
// line (requests and replies), which is what the round trip to a real board
// at 115200 baud is at the least.

// serialBenchBaud is the line's rate the wire time is computed for.
const serialBenchBaud = 115200

// serialBenchTemperature is what the firmware's temperature sensor reads.
const serialBenchTemperature = 18.2 // lineBoard's

// serialBenchDevices are the devices of lineHardware (line_test.go) the
// benchmark uses, for the raw driver.
var serialBenchDevices = []devices.Device{
	{ID: "relay-1", Driver: "arduino", Address: "relay", Capabilities: []devices.Capability{
		{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
	{ID: "temp-1", Driver: "arduino", Address: "temperature", Capabilities: []devices.Capability{
		{Name: "celsius", Kind: devices.KindSensor, Type: value.TypeNumber, Unit: "C"}}},
}

// serialBenchSeq makes request ids unique across every run of the benchmark.
var serialBenchSeq atomic.Uint64

func serialBenchID() string { return "bench-" + strconv.FormatUint(serialBenchSeq.Add(1), 10) }

// serialBenchDriver opens the line driver on path and waits until the
// board answers.
func serialBenchDriver(b *testing.B, path string, log *slog.Logger) *line.Driver {
	b.Helper()
	d := line.New(line.Options{
		Port:    port.Settings{Path: path, Baud: serialBenchBaud, DataBits: 8, StopBits: 1},
		Timeout: 300 * time.Millisecond, Discover: true, Devices: serialBenchDevices, Logger: log,
	})
	if err := d.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := d.Close(); err != nil {
			b.Errorf("closing the line driver: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for d.Health(context.Background()) != nil {
		if time.Now().After(deadline) {
			b.Fatalf("the board on %s did not answer within 10s: %v", path, d.Health(context.Background()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return d
}

// serialBenchReplyLen is the length of a reply line with body: the body,
// " *", the CRC's two hex digits and the newline.
func serialBenchReplyLen(body string) int { return len(body) + len(" *XX\n") }

// serialBenchWire is the time n bytes take on the line: a start bit, 8
// data bits and a stop bit each.
func serialBenchWire(n float64) time.Duration {
	return time.Duration(n * 10 * float64(time.Second) / serialBenchBaud)
}

// The wire bytes of each step, for a four-digit request id (the ids a
// running gateway is at after its first thousand requests).
const serialBenchWireID = 1000

// serialBenchConfirmedWriteBytes is the bytes of a SET of the relay and the
// GET that reads it back, with their replies, averaged over true and false.
func serialBenchConfirmedWriteBytes() float64 {
	id := strconv.Itoa(serialBenchWireID)
	total := 0
	for _, v := range []string{"true", "false"} {
		total += len(line.AppendRequest(nil, serialBenchWireID, "SET", "relay", v)) + serialBenchReplyLen("OK "+id) +
			len(line.AppendRequest(nil, serialBenchWireID, "GET", "relay")) + serialBenchReplyLen("OK "+id+" "+v)
	}
	return float64(total) / 2
}

// serialBenchReadBytes is the bytes of a GET of the temperature and its reply.
func serialBenchReadBytes() float64 {
	id := strconv.Itoa(serialBenchWireID)
	return float64(len(line.AppendRequest(nil, serialBenchWireID, "GET", "temperature")) +
		serialBenchReplyLen("OK "+id+" "+strconv.FormatFloat(serialBenchTemperature, 'f', -1, 64)))
}

// BenchmarkSerialStep compares, in one run, a device step on the line
// firmware through the line driver alone with the same step governed:
//
//   - write-confirmed: set the relay, alternately true and false, and read
//     it back (the round trip a confirmed actuation needs); governed, a
//     command that must come back acted with its read-back confirmed.
//   - read-temperature: read the temperature sensor; governed, a read step
//     that must complete with the firmware's value.
//
// Each governed sub-benchmark reports x-raw (governed/raw), overhead-%-wire
// ((governed-raw)/(raw+wire), wire being the step's bytes at 115200 baud
// 8N1), raw being the mean of the pair's raw runs; every sub-benchmark
// reports line-req/op (the requests the firmware received, to show the
// governed step puts the same traffic on the line as the raw one). The
// last sub-benchmark logs the ratios of the means of every pair.
func BenchmarkSerialStep(b *testing.B) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(&syncBuffer{}, nil))
	rawBoard := lineBoard(b, filepath.Join(b.TempDir(), "ttyACM0"))
	drv := serialBenchDriver(b, rawBoard.Path(), log)
	gwBoard := lineBoard(b, filepath.Join(b.TempDir(), "ttyACM1"))
	// The MQTT rate limit (60 commands a minute by default) would refuse a
	// benchmark's commands: it is raised, the rest is hwHeader.
	header := strings.Replace(hwHeader, `mqtt: {listen: "127.0.0.1:0"}`,
		`mqtt: {listen: "127.0.0.1:0", commands: {per_minute: 1000000, burst: 100000}}`, 1)
	if header == hwHeader {
		b.Fatal("hwHeader has no mqtt line to raise the rate limit on")
	}
	gw := startHardwareWith(b, hwOptions{Header: header, Quiet: true}, strings.Replace(lineHardware, "PORT", gwBoard.Path(), 1))
	for _, dev := range []string{"relay-1", "temp-1"} {
		gw.WaitEvent(0, runtime.KindDeviceOnline, dev)
	}

	// Each board's relay is flipped by every write to it, so that every
	// write changes it.
	var rawRelay, gwRelay bool

	rawWrite := func(b *testing.B) {
		rawRelay = !rawRelay
		v := rawRelay
		if err := drv.Write(ctx, "relay-1", "on", value.Bool(v)); err != nil {
			b.Fatalf("raw write %v: %v", v, err)
		}
		rd, err := drv.Read(ctx, "relay-1", "on")
		if err != nil || rd.Value != value.Bool(v) {
			b.Fatalf("raw read-back after writing %v = %v, %v", v, rd.Value, err)
		}
	}
	governedWrite := func(b *testing.B) {
		gwRelay = !gwRelay
		v := gwRelay
		obs, err := gw.Engine.Do(ctx, runtime.Command{Principal: "bench", Origin: "bench", RequestID: serialBenchID(),
			Device: "relay-1", Capability: "on", Value: value.Bool(v)})
		if err != nil || obs.Kind != runtime.Acted || obs.Receipt == nil || obs.Receipt.Confirmation != runtime.Confirmed {
			b.Fatalf("governed write %v = %+v, %v; want acted and confirmed\n%s", v, obs, err, gw.Log)
		}
		if gwBoard.State().Relay != v {
			b.Fatalf("governed write %v acted, yet the board's relay is %v", v, !v)
		}
	}
	mqttWrite := func(b *testing.B) {
		gwRelay = !gwRelay
		v := gwRelay
		rep := gw.CommandFor(b, "relay-1", "on", strconv.FormatBool(v))
		if rep.Outcome != "acted" || rep.Receipt == nil || rep.Receipt.Confirmation != runtime.Confirmed {
			b.Fatalf("write %v over MQTT = %+v; want acted and confirmed\n%s", v, rep, gw.Log)
		}
		if gwBoard.State().Relay != v {
			b.Fatalf("write %v over MQTT acted, yet the board's relay is %v", v, !v)
		}
	}
	want := value.Number(serialBenchTemperature)
	rawRead := func(b *testing.B) {
		rd, err := drv.Read(ctx, "temp-1", "celsius")
		if err != nil || rd.Value != want {
			b.Fatalf("raw read = %v, %v; want %v", rd.Value, err, want)
		}
	}
	governedRead := func(b *testing.B) {
		obs, err := gw.Engine.Read(ctx, "bench", "temp-1", "celsius")
		if err != nil || obs.Kind != runtime.Completed || obs.Reading == nil || obs.Reading.Value != want {
			b.Fatalf("governed read = %+v, %v; want completed with %v\n%s", obs, err, want, gw.Log)
		}
	}
	mqttRead := func(b *testing.B) {
		rep := gw.CommandFor(b, "temp-1", "celsius", "")
		if rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != want {
			b.Fatalf("read over MQTT = %+v; want completed with %v\n%s", rep, want, gw.Log)
		}
	}

	// Once each before timing: the engine learns where the relay stands
	// (its first write reads it first), and the journal has its first
	// entries.
	governedWrite(b)
	governedWrite(b)
	governedRead(b)
	rawWrite(b)
	rawRead(b)

	type pair struct {
		name                 string
		wireBytes            float64
		raw, governed, mqttd func(*testing.B)
	}
	pairs := []pair{
		{"write-confirmed", serialBenchConfirmedWriteBytes(), rawWrite, governedWrite, mqttWrite},
		{"read-temperature", serialBenchReadBytes(), rawRead, governedRead, mqttRead},
	}
	kinds := []string{"raw", "governed", "governed-mqtt"}
	// -count runs each sub-benchmark that many times in a row, so a
	// governed run is compared with the mean of the raw runs of its pair,
	// all of which come before it.
	tallies := map[string]*serialBenchTally{}
	for _, p := range pairs {
		for _, kind := range kinds {
			tallies[p.name+"/"+kind] = &serialBenchTally{}
		}
	}
	summary := func() string {
		var out []string
		for _, p := range pairs {
			raw, wire := tallies[p.name+"/raw"].mean(), serialBenchWire(p.wireBytes)
			s := fmt.Sprintf("%s: raw %v, wire %v (%.1f bytes at %d 8N1)", p.name, raw, wire.Round(time.Microsecond), p.wireBytes, serialBenchBaud)
			for _, kind := range kinds[1:] {
				if g := tallies[p.name+"/"+kind].mean(); g > 0 && raw > 0 {
					s += fmt.Sprintf("; %s %v = %.2fx raw, overhead %.1f%% of raw+wire", kind, g, float64(g)/float64(raw), 100*float64(g-raw)/float64(raw+wire))
				}
			}
			out = append(out, s)
		}
		return strings.Join(out, " | ")
	}
	steps := map[string]func(*testing.B){}
	boards := map[string]*linefirmware.Board{"raw": rawBoard, "governed": gwBoard, "governed-mqtt": gwBoard}
	for pi, p := range pairs {
		steps["raw"], steps["governed"], steps["governed-mqtt"] = p.raw, p.governed, p.mqttd
		wire := serialBenchWire(p.wireBytes)
		for ki, kind := range kinds {
			op, bd, tally, rawTally := steps[kind], boards[kind], tallies[p.name+"/"+kind], tallies[p.name+"/raw"]
			last := pi == len(pairs)-1 && ki == len(kinds)-1
			b.Run(p.name+"/"+kind, func(b *testing.B) {
				before := bd.Requests()
				share := gw.durableShare()
				for b.Loop() {
					op(b)
				}
				perOp := b.Elapsed() / time.Duration(b.N)
				tally.add(b.Elapsed(), b.N)
				b.ReportMetric(float64(bd.Requests()-before)/float64(b.N), "line-req/op")
				b.ReportMetric(float64(wire.Nanoseconds())/1e3, "wire-us/op")
				if raw := rawTally.mean(); kind != "raw" && raw > 0 {
					b.ReportMetric(float64(perOp)/float64(raw), "x-raw")
					b.ReportMetric(100*float64(perOp-raw)/float64(raw+wire), "overhead-%-wire")
					// On a wire the device round trip is the bytes' time
					// at the line's rate besides what the pty takes.
					rest := share.report(b, raw)
					b.ReportMetric(100*float64(rest)/float64(raw+wire), "rest-%-wire")
				}
				if last {
					b.Logf("governed/raw on the line firmware (pty), means so far: %s", summary())
				}
			})
		}
	}
}

// serialBenchTally adds up the runs of one sub-benchmark.
type serialBenchTally struct {
	d time.Duration
	n int
}

func (t *serialBenchTally) add(d time.Duration, n int) { t.d += d; t.n += n }

// mean is the time per operation over every run so far, or 0 before any.
func (t *serialBenchTally) mean() time.Duration {
	if t.n == 0 {
		return 0
	}
	return t.d / time.Duration(t.n)
}
