package main

import "fmt"

// figures are the table's rows, with the targets of the performance
// issue: each is worked out from the benchmarks of one make bench run.
var figures = []figure{
	{"judge", "≤ 2 µs/op, ≤ 5 allocs/op", func(r results) (row, bool) {
		worst, allocs, n := 0.0, 0.0, 0
		for _, sub := range []string{"read", "ask", "allow", "rule"} {
			ns, ok := r.get("governance BenchmarkJudge/"+sub, "ns/op")
			a, ok2 := r.get("governance BenchmarkJudge/"+sub, "allocs/op")
			if !ok || !ok2 {
				continue
			}
			worst, allocs, n = max(worst, ns), max(allocs, a), n+1
		}
		return row{result: fmt.Sprintf("%s, %.0f allocs (the slowest case)", dur(worst), allocs), met: worst <= 2000 && allocs <= 5}, n == 4
	}},
	{"governed read step over a raw sim read, bbolt journal", "≤ 20 µs", func(r results) (row, bool) {
		gov, ok := r.get("runtime/journal BenchmarkReadStep/governed-bbolt", "ns/op")
		raw, ok2 := r.get("runtime/journal BenchmarkReadStep/raw", "ns/op")
		return row{result: dur(gov) + " (mean)", baseline: dur(raw) + " raw read", ratio: times(gov / raw), met: gov <= 20_000}, ok && ok2
	}},
	{"sync appends, 64 writers, against one Update per append", "≥ 20×", func(r results) (row, bool) {
		g, ok := r.get("BenchmarkSyncAppend/group/writers=64", "appends/s")
		n, ok2 := r.get("BenchmarkSyncAppend/naive/writers=64", "appends/s")
		return row{result: fmt.Sprintf("%.0f appends/s", g), baseline: fmt.Sprintf("%.0f appends/s", n), ratio: times(g / n), met: g/n >= 20}, ok && ok2
	}},
	{"governed write over MQTT, cmd → reply, sync journal", "p50 ≤ 2 fsyncs + 0.3 ms; p99 ≤ 3× p50", func(r results) (row, bool) {
		p50, ok := r.get("BenchmarkCommandRoundTrip/mqtt", "p50-µs")
		p99, ok2 := r.get("BenchmarkCommandRoundTrip/mqtt", "p99-µs")
		fs, ok3 := r.get("BenchmarkCommandRoundTrip/mqtt", "µs/fsync")
		bound := 2*fs + 300
		return row{result: fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", p50/1000, p99/1000), baseline: fmt.Sprintf("%.2f ms per fsync", fs/1000),
			ratio: fmt.Sprintf("p50 %s of the bound, p99 %s p50", times(p50/bound), times(p99/p50)), met: p50 <= bound && p99 <= 3*p50}, ok && ok2 && ok3
	}},
	roundTrip("engine", "the engine's Go API"), roundTrip("mqtt", "MQTT, cmd → reply"),
	throughput(0), throughput(1),
	{"MQTT connect with a password, repeat connect", "≤ 1 ms", func(r results) (row, bool) {
		rep, ok := r.get("BenchmarkMQTTConnectRepeat", "ns/op")
		first, ok2 := r.get("BenchmarkMQTTConnectRepeat", "first-ns/connect")
		return row{result: dur(rep), baseline: dur(first) + " first connect", ratio: times(rep / first), met: rep <= 1e6}, ok && ok2
	}},
	ready("empty", 30), ready("events=100k", 100), ready("runs=100k", 100),
	start("journal open and load, 100,000 events", "runtime/journal BenchmarkRecovery"),
	start("journal open and load, 100,000 finished runs", "runtime/journal BenchmarkStartWithHistory"),
	{"idle RSS of the demo after 60 s", "≤ 20 MB", func(r results) (row, bool) {
		rss, ok := r.get("BenchmarkIdleRSS", "rss-MiB")
		anon, ok2 := r.get("BenchmarkIdleRSS", "anon-MiB")
		file, ok3 := r.get("BenchmarkIdleRSS", "file-MiB")
		mb := rss * (1 << 20) / 1e6
		return row{result: fmt.Sprintf("%.1f MB (%.1f MiB anonymous, %.1f MiB of files: the binary, the journal)", mb, anon, file), met: mb <= 20}, ok && ok2 && ok3
	}},
	{"RSS per idle MQTT connection, 1,000 connections", "≤ 32 KiB", func(r results) (row, bool) {
		k, ok := r.get("BenchmarkIdleConnections", "KiB/conn")
		return row{result: fmt.Sprintf("%.1f KiB", k), met: k <= 32}, ok
	}},
	binary("binary, arm64, stripped, every part", "BenchmarkBinary/arm64", 20),
	binary("binary, arm64, stripped, without OPC-UA, MCP, uplink, metrics", "BenchmarkBinary/arm64-min", 12),
	{"fdatasyncs per lone governed write (journal of 36k events)", "2", func(r results) (row, bool) {
		f, ok := r.get("BenchmarkWear/lone-write", "log-fdatasync/write")
		s, ok2 := r.get("BenchmarkWear/lone-write", "store-fdatasync/write")
		return row{result: fmt.Sprintf("%.2f of the log; the store's, in the background: %.2f", f, s), met: f <= 2.01}, ok && ok2
	}},
	{"bytes to the card per lone governed write, alone in its 5 s (journal of 36k events)", "≤ 24 KiB", func(r results) (row, bool) {
		log, ok := r.get("BenchmarkWear/lone-write", "device-B/write")
		store, ok2 := r.get("BenchmarkWear/lone-write", "store-device-B/write")
		if !ok || !ok2 {
			return row{result: "not counted: it needs root, for a loop device"}, true
		}
		return row{result: fmt.Sprintf("%.1f KiB (the log %.1f, the store's share %.1f)", (log+store)/1024, log/1024, store/1024), met: log+store <= 24<<10}, true
	}},
	{"fdatasyncs per sensor poll, one sensor every 250 ms", "≤ 0.25", func(r results) (row, bool) {
		f, ok := r.get("BenchmarkWear/poll-250ms", "log-fdatasync/poll")
		return row{result: fmt.Sprintf("%.3f", f), met: f <= 0.25}, ok
	}},
	{"approval asked + approved + its act: fdatasyncs", "4", func(r results) (row, bool) {
		f, ok := r.get("BenchmarkWear/approval", "log-fdatasync/flow")
		return row{result: fmt.Sprintf("%.2f", f), met: f <= 4.01}, ok
	}},
	card("reference site (10 sensors / 5 s, 1 write / min), bytes to the card a day, default flush_interval (30s)", "≤ 60 MB", "BenchmarkWearSite/flush=30s", "device-MB/day", 60, func(v float64) string {
		return fmt.Sprintf("%.0f MB", v)
	}),
	governance("serial (line firmware, 115,200 baud)", "gateway BenchmarkSerialStep/write-confirmed/governed", "rest-%-wire"),
	governance("OPC-UA (the PLC fixture on loopback)", "gateway BenchmarkOPCUAStep/write-confirmed/governed", "rest-%-device"),
	card("idle serve --demo, bytes to the card a day", "≤ 40 MB", "BenchmarkDemoWear", "device-MB/day", 40, func(v float64) string {
		return fmt.Sprintf("%.0f MB", v)
	}),
	{"a sync append while records are pruned", "≤ 2× its time without pruning", func(r results) (row, bool) {
		w, ok := r.get("BenchmarkSyncAppendWhilePruning/while-pruning", "p50-ms")
		a, ok2 := r.get("BenchmarkSyncAppendWhilePruning/alone", "p50-ms")
		mx, ok3 := r.get("BenchmarkSyncAppendWhilePruning/while-pruning", "max-ms")
		return row{result: fmt.Sprintf("p50 %.2f ms, max %.0f ms", w, mx), baseline: fmt.Sprintf("p50 %.2f ms with nothing to prune", a), ratio: times(w / a), met: w <= 2*a}, ok && ok2 && ok3
	}},
}

// roundTrip is the row of a lone governed write's round trip through a
// surface against two durable points as the disk gives them (1 KiB
// written and fdatasync'd), measured in the same run.
func roundTrip(sub, what string) figure {
	return figure{"governed write round trip over two durable points of the disk, " + what, "≤ 1.5×", func(r results) (row, bool) {
		p50, ok := r.get("BenchmarkCommandRoundTrip/"+sub, "p50-µs")
		floor, ok2 := r.get("BenchmarkCommandRoundTrip/floor", "p50-µs")
		return row{result: fmt.Sprintf("p50 %.0f µs", p50), baseline: fmt.Sprintf("2 × %.0f µs", floor),
			ratio: times(p50 / (2 * floor)), met: p50 <= 3*floor}, ok && ok2
	}}
}

// governance is the row of a confirmed write on real firmware: its time
// beyond the device round trip (the same write and read-back without the
// gateway, same run) and the log writes it waited for, over the device
// round trip: unit is rest-%-device, or rest-%-wire where the device is
// reached over a serial line, whose round trip is its bytes' time at the
// line's rate besides what the pseudo-terminal takes.
func governance(what, bench, unit string) figure {
	return figure{"governance beyond a confirmed write's device round trip and durable points, " + what, "< 5 % of the round trip", func(r results) (row, bool) {
		rest, ok := r.get(bench, unit)
		points, ok2 := r.get(bench, "points/op")
		us, ok3 := r.get(bench, "point-µs")
		return row{result: fmt.Sprintf("%.1f %%", rest), baseline: fmt.Sprintf("%.2f durable points of %.0f µs each", points, us), met: rest < 5}, ok && ok2 && ok3
	}}
}

// card is a figure counted on a card (an ext4 on a loop device), which
// needs root: without it the row says so, and is not met.
func card(name, target, bench, unit string, limit float64, show func(float64) string) figure {
	return figure{name, target, func(r results) (row, bool) {
		v, ok := r.get(bench, unit)
		if !ok {
			return row{result: "not counted: it needs root, for a loop device"}, true
		}
		return row{result: show(v), met: v <= limit}, true
	}}
}

// throughput is the broker's row at a QoS. It is judged by the CPU each
// message costs, which sets the rate a busy 2-core machine can carry and
// which the machine's other load does not blur as it does the rate
// itself; the rate, as fast as possible, is shown beside it (at QoS 0 it
// counts what the broker dropped too).
func throughput(qos int) figure {
	return figure{fmt.Sprintf("broker throughput with our hooks against bare mochi, QoS %d", qos), "≥ 0.95× (CPU a message ≤ 1.05×)", func(r results) (row, bool) {
		sg, ok := r.get(fmt.Sprintf("BenchmarkFanIn/shadowgate/qos=%d", qos), "msgs/s")
		bare, ok2 := r.get(fmt.Sprintf("BenchmarkFanIn/bare/qos=%d", qos), "msgs/s")
		sgCPU, ok3 := r.get(fmt.Sprintf("BenchmarkFanIn/shadowgate/qos=%d", qos), "cpu-µs/msg")
		bareCPU, ok4 := r.get(fmt.Sprintf("BenchmarkFanIn/bare/qos=%d", qos), "cpu-µs/msg")
		return row{result: fmt.Sprintf("%.1f µs of CPU a message; %.0f msgs/s", sgCPU, sg),
			baseline: fmt.Sprintf("%.1f µs; %.0f msgs/s bare mochi", bareCPU, bare),
			ratio:    fmt.Sprintf("CPU %s, rate %s", times(sgCPU/bareCPU), times(sg/bare)), met: sgCPU/bareCPU <= 1/0.95}, ok && ok2 && ok3 && ok4
	}}
}

// start is a journal start's row: open and load against bbolt's open.
func start(name, bench string) figure {
	return figure{name, "≤ 100 ms", func(r results) (row, bool) {
		s, ok := r.get(bench+"/open-and-load", "ns/op")
		o, ok2 := r.get(bench+"/bbolt-open", "ns/op")
		return row{result: dur(s), baseline: dur(o) + " bbolt open", ratio: times(s / o), met: s <= 100e6}, ok && ok2
	}}
}

// ready is a row of the binary's cold start to READY=1, against the same
// binary printing its version (a process start and nothing else).
func ready(state string, targetMs float64) figure {
	return figure{"cold start to READY, " + state, fmt.Sprintf("≤ %.0f ms", targetMs), func(r results) (row, bool) {
		ms, ok := r.get("BenchmarkColdStart/"+state, "ready-ms")
		v, ok2 := r.get("BenchmarkColdStart/version", "ns/op")
		return row{result: fmt.Sprintf("%.1f ms", ms), baseline: dur(v) + " shadowgate version", ratio: times(ms * 1e6 / v), met: ms <= targetMs}, ok && ok2
	}}
}

// binary is a row of a binary's stripped size (bench/size -bench).
func binary(name, bench string, targetMB float64) figure {
	return figure{name, fmt.Sprintf("≤ %.0f MB", targetMB), func(r results) (row, bool) {
		b, ok := r.get(bench, "stripped-bytes")
		return row{result: fmt.Sprintf("%.1f MB (%.1f MiB)", b/1e6, b/(1<<20)), met: b <= targetMB*1e6}, ok
	}}
}
