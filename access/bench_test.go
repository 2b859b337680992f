package access

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// benchUsers is one user whose hash has the cost shadowgate hash-password
// gives, so that a check costs what it costs in the field.
func benchUsers(b *testing.B, hash []byte) *Users {
	b.Helper()
	us, err := NewUsers([]User{{Name: "sensor-17", Role: Operator, Hash: hash}})
	if err != nil {
		b.Fatal(err)
	}
	return us
}

func benchHash(b *testing.B) []byte {
	b.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte("sensor-17-password"), bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkPasswordCheckFirst is a client's first connect: nothing is
// remembered, so bcrypt compares (each round gets a fresh set of users).
func BenchmarkPasswordCheckFirst(b *testing.B) {
	h, pw := benchHash(b), []byte("sensor-17-password")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := benchUsers(b, h).CheckCached("sensor-17", pw); !ok {
			b.Fatal("the right password was refused")
		}
	}
}

// BenchmarkPasswordCheckRepeat is the same client connecting again.
func BenchmarkPasswordCheckRepeat(b *testing.B) {
	us, pw := benchUsers(b, benchHash(b)), []byte("sensor-17-password")
	if _, ok := us.CheckCached("sensor-17", pw); !ok {
		b.Fatal("the right password was refused")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := us.CheckCached("sensor-17", pw); !ok {
			b.Fatal("the right password was refused")
		}
	}
}

// BenchmarkLoad starts this test binary and reports what loading the
// package cost it, as the runtime's init trace tells: the package's part
// of every process start, shadowgate version and check included.
func BenchmarkLoad(b *testing.B) {
	var clock float64
	var bytes, n int
	for b.Loop() {
		l := loadCost(b)
		clock += l.clockMS
		bytes += l.bytes
		n++
	}
	b.ReportMetric(clock/float64(n), "init-ms/op")
	b.ReportMetric(float64(bytes/n), "init-B/op")
}

// load is the runtime's init trace line of this package.
type load struct {
	clockMS float64
	bytes   int
	line    string
}

// loadCost runs this test binary with no test and GODEBUG=inittrace=1 and
// returns what initializing the package cost; zero if it had nothing to
// initialize.
func loadCost(tb testing.TB) load {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", os.Args[0], err, out)
	}
	// Compiled here, not in a package variable: this file is part of the
	// package whose init is measured.
	initLine := regexp.MustCompile(`(?m)^init github\.com/shadowgate/shadowgate/access @\S+ ms, (\S+) ms clock, (\d+) bytes, \d+ allocs$`)
	m := initLine.FindSubmatch(out)
	if m == nil {
		return load{}
	}
	clock, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatal(err)
	}
	bytes, err := strconv.Atoi(string(m[2]))
	if err != nil {
		tb.Fatal(err)
	}
	return load{clockMS: clock, bytes: bytes, line: string(m[0])}
}
