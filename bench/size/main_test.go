package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestGroup(t *testing.T) {
	const nm = `  58d720      10992 T google.golang.org/protobuf/internal/impl.fieldCoder
  6c3350      51360 T github.com/mochi-mqtt/server/v2/packets.init
  39b6d0      11168 T github.com/shadowgate/shadowgate/runtime.(*Engine).write
  3b44b0       3008 T slices.partitionCmpFunc[go.shape.struct { Rule github.com/shadowgate/shadowgate/governance.Rule }]
  231ef0       9872 T crypto/tls.(*Conn).readRecordOrCCS
  f85a0       10400 T time.parse
  1000          100 t vendor/golang.org/x/net/idna.(*Profile).process
  2000           50 T main.main
  3000           40 T type:.eq.[2]github.com/prometheus/client_model/go.Metric
  4000           30 T gopkg.in/yaml.v3.(*parser).parse
  5000           20 T go:buildid
  5ce050       8848 T github.com/prometheus/procfs.parseProcNetstat
 1414b40    1283496 r go:func.*
 1656120   33554432 D crypto/internal/fips140/drbg.memory
`
	modules := []string{"github.com/shadowgate/shadowgate", "google.golang.org/protobuf", "github.com/mochi-mqtt/server/v2",
		"github.com/prometheus/client_model", "github.com/prometheus/procfs", "gopkg.in/yaml.v3", "github.com/prometheus/client_golang"}
	rows, total, err := group(strings.NewReader(nm), "github.com/shadowgate/shadowgate", modules)
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"github.com/mochi-mqtt/server/v2", 51360},
		{"std", 3008 + 9872 + 10400 + 100},
		{"github.com/shadowgate/shadowgate", 11168 + 50},
		{"google.golang.org/protobuf", 10992},
		{"github.com/prometheus/procfs", 8848},
		{"github.com/prometheus/client_model", 40},
		{"gopkg.in/yaml.v3", 30},
		{"(other)", 20},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("group rows = %v, want %v", rows, want)
	}
	if want := int64(51360 + 3008 + 9872 + 10400 + 100 + 11168 + 50 + 10992 + 8848 + 40 + 30 + 20); total != want {
		t.Errorf("group total = %d, want %d", total, want)
	}
}
