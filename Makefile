# Shadowgate: one static binary. Every target is one go command.
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BUILD   := CGO_ENABLED=0 go build -trimpath -ldflags='$(LDFLAGS)'

.PHONY: build run test bench lint fuzz torture soak amd64 arm64 arm64-min armv7 armv6 dist deb FORCE clean

build:
	$(BUILD) -o shadowgate ./cmd/shadowgate

run: build
	./shadowgate serve --demo

test:
	go vet ./...
	go test -race -timeout 25m ./...

# The kill campaign: N random SIGKILLs under load (make test runs 20).
N ?= 100
torture:
	SHADOWGATE_TORTURE=$(N) go test -run '^TestTorture$$' -count=1 -v -timeout 60m ./cmd/shadowgate

# make bench: every benchmark once, at a fixed -benchtime and -count, to
# bench/results.txt (benchstat's input format), then the table of figures
# against their targets (bench/table). A figure not measured fails it.
BENCHTIME  ?= 300ms
BENCHCOUNT ?= 1
bench:
	go test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 60m ./... > bench/results.txt 2>&1; \
	status=$$?; cat bench/results.txt; exit $$status
	go run ./bench/size -goarch arm64 -bench BenchmarkBinary/arm64 | tee -a bench/results.txt
	go run ./bench/size -goarch arm64 -tags '$(MINTAGS)' -bench BenchmarkBinary/arm64-min | tee -a bench/results.txt
	go run ./bench/table bench/results.txt

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }
	go vet ./...
	go vet -tags failpoints ./...
	go vet -tags '$(MINTAGS)' ./...
	go tool staticcheck ./...

# A short run of every fuzz target (FUZZTIME each).
FUZZTIME ?= 20s
fuzz:
	go test -run '^$$' -fuzz FuzzParseValue -fuzztime $(FUZZTIME) ./value
	go test -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./gateway
	go test -run '^$$' -fuzz FuzzDecodeEvent -fuzztime $(FUZZTIME) ./runtime/journal
	go test -run '^$$' -fuzz FuzzParseCheckpoint -fuzztime $(FUZZTIME) ./runtime/journal
	go test -run '^$$' -fuzz FuzzParseCommand -fuzztime $(FUZZTIME) ./gateway/command
	go test -run '^$$' -fuzz FuzzConnect -fuzztime $(FUZZTIME) ./gateway/mqtt
	go test -run '^$$' -fuzz FuzzAPIBodies -fuzztime $(FUZZTIME) ./web
	go test -run '^$$' -fuzz FuzzQueryParams -fuzztime $(FUZZTIME) ./web
	go test -run '^$$' -fuzz FuzzEventSentence -fuzztime $(FUZZTIME) ./web
	go test -run '^$$' -fuzz FuzzMCPArguments -fuzztime $(FUZZTIME) ./web
	go test -run '^$$' -fuzz FuzzHomeAssistantConfig -fuzztime $(FUZZTIME) ./gateway
	go test -run '^$$' -fuzz FuzzPlanSchedule -fuzztime $(FUZZTIME) ./gateway
	go test -run '^$$' -fuzz FuzzClockScheduleNext -fuzztime $(FUZZTIME) ./runtime
	go test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./drivers/serial/line
	go test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./drivers/serial/modbus
	go test -run '^$$' -fuzz FuzzParseNodeID -fuzztime $(FUZZTIME) ./drivers/opcua
	go test -run '^$$' -fuzz FuzzConvert -fuzztime $(FUZZTIME) ./drivers/opcua

# make soak: the gateway under a steady load for DURATION, sampled every
# SHADOWGATE_SOAK_EVERY (1m) to docs/soak.csv, then plotted to
# docs/soak.png (also when the soak fails). The test bounds itself, so
# -timeout 0. CI does not run it.
DURATION ?= 2h
soak:
	SHADOWGATE_SOAK=$(DURATION) SHADOWGATE_SOAK_CSV=$(CURDIR)/docs/soak.csv go test -run '^TestSoak$$' -count=1 -timeout 0 -v ./cmd/shadowgate; \
	status=$$?; go run ./internal/soakplot -in docs/soak.csv -out docs/soak.png && exit $$status

amd64:
	GOOS=linux GOARCH=amd64 $(BUILD) -o dist/shadowgate-linux-amd64 ./cmd/shadowgate

arm64:
	GOOS=linux GOARCH=arm64 $(BUILD) -o dist/shadowgate-linux-arm64 ./cmd/shadowgate

# The gateway without its optional parts (internal/omit): no OPC-UA, MCP,
# uplink or metrics. A configuration that uses one is refused at load.
MINTAGS := shadowgate_omit_opcua shadowgate_omit_mcp shadowgate_omit_uplink shadowgate_omit_metrics
arm64-min:
	GOOS=linux GOARCH=arm64 $(BUILD) -tags '$(MINTAGS)' -o dist/shadowgate-linux-arm64-min ./cmd/shadowgate

armv7:
	GOOS=linux GOARCH=arm GOARM=7 $(BUILD) -o dist/shadowgate-linux-armv7 ./cmd/shadowgate

armv6:
	GOOS=linux GOARCH=arm GOARM=6 $(BUILD) -o dist/shadowgate-linux-armv6 ./cmd/shadowgate

# make dist: a tarball per architecture (the binary, systemd/, the packaged
# configuration, a README) and SHA256SUMS. make deb: a Debian package per
# architecture. Both go to DIST; TARBALLS and DEBS choose the architectures.
DIST     ?= dist
TARBALLS ?= amd64 arm64 armv7 armv6
DEBS     ?= arm64 armhf armel amd64
# The Debian version is VERSION made valid and ordered for dpkg: no leading
# v; "-N-gHASH" (N commits after a tag) becomes "+N.gHASH" and any other
# hyphen "~", so v0.3.0-12-gabc1234-dirty is 0.3.0+12.gabc1234~dirty and
# v0.4.0-rc.1 is 0.4.0~rc.1 (before 0.4.0). Without a tag it is
# 0.0.0+git.HASH.
DEBVERSION := $(shell echo '$(VERSION)' | sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/; s/-/~/g; /^[0-9]+\./!s/^/0.0.0+git./')
# Archives and packages carry the last commit's time, so they are reproducible.
export SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# GOARCH and GOARM of each build: armhf is GOARM=6 because Raspberry Pi OS's
# armhf is ARMv6 (Pi 1, Zero); armel is Debian's ARMv5.
GO_amd64 := GOARCH=amd64
GO_arm64 := GOARCH=arm64
GO_armv7 := GOARCH=arm GOARM=7
GO_armv6 := GOARCH=arm GOARM=6
GO_armhf := GOARCH=arm GOARM=6
GO_armel := GOARCH=arm GOARM=5

$(DIST)/shadowgate-linux-%: FORCE
	GOOS=linux $(GO_$*) $(BUILD) -o $@ ./cmd/shadowgate

dist: $(TARBALLS:%=$(DIST)/shadowgate-linux-%)
	packaging/package.sh tar $(VERSION) $(DIST) $(TARBALLS)

deb: $(DEBS:%=$(DIST)/shadowgate-linux-%)
	packaging/package.sh deb $(DEBVERSION) $(DIST) $(DEBS)

clean:
	rm -rf dist shadowgate
