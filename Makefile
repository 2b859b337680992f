# Shadowgate: one static binary. Every target is one go command.
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BUILD   := CGO_ENABLED=0 go build -trimpath -ldflags='$(LDFLAGS)'

.PHONY: build run test bench lint fuzz amd64 arm64 armv7 armv6 clean

build:
	$(BUILD) -o shadowgate ./cmd/shadowgate

run: build
	./shadowgate serve --demo

test:
	go vet ./...
	go test -race ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }
	go vet ./...
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
	go test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./drivers/serial/line
	go test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./drivers/serial/modbus
	go test -run '^$$' -fuzz FuzzParseNodeID -fuzztime $(FUZZTIME) ./drivers/opcua
	go test -run '^$$' -fuzz FuzzConvert -fuzztime $(FUZZTIME) ./drivers/opcua

amd64:
	GOOS=linux GOARCH=amd64 $(BUILD) -o dist/shadowgate-linux-amd64 ./cmd/shadowgate

arm64:
	GOOS=linux GOARCH=arm64 $(BUILD) -o dist/shadowgate-linux-arm64 ./cmd/shadowgate

armv7:
	GOOS=linux GOARCH=arm GOARM=7 $(BUILD) -o dist/shadowgate-linux-armv7 ./cmd/shadowgate

armv6:
	GOOS=linux GOARCH=arm GOARM=6 $(BUILD) -o dist/shadowgate-linux-armv6 ./cmd/shadowgate

clean:
	rm -rf dist shadowgate
