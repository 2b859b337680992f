package opcua

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/server/attrs"
	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// gopcua's server prints through the standard logger at every New.
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// leakOpts ignores the goroutines gopcua's server leaves behind for a
// while after its Close (its subscriptions end at their lifetime): they
// are the test's fixture, not the driver's.
var leakOpts = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/gopcua/opcua/server.(*Subscription).run"),
	goleak.IgnoreAnyFunction("github.com/gopcua/opcua/server.(*channelBroker).Close.func1"),
	goleak.IgnoreAnyFunction("github.com/gopcua/opcua/server.(*channelBroker).RegisterConn"),
}

// testPLC is a gopcua server with a few variables, the way the PLC
// simulator will have them, on a port of its own that survives a Restart.
type testPLC struct {
	t      testing.TB
	port   int
	cert   []byte
	key    *rsa.PrivateKey
	mu     sync.Mutex
	srv    *server.Server
	ns     *lockedNS
	cancel context.CancelFunc
	writes atomic.Int64
	// values survive a restart.
	values map[string]any
	// noSubscriptions makes the server refuse every subscription.
	noSubscriptions bool
}

// The test PLC's variables: name, initial value, data type, writable.
var plcVars = []struct {
	name     string
	v        any
	dt       uint32
	writable bool
}{
	{"Tank.Level", float64(1.5), id.Double, true},
	{"Pump.Command", false, id.Boolean, true},
	{"Pump.Running", false, id.Boolean, false},
	{"Valve.Open", false, id.Boolean, true},
	{"Setpoint", int32(20), id.Int32, true},
	{"Speed", float32(0), id.Float, true},
	{"Mode", "auto", id.String, true},
	{"Locked", float64(7), id.Double, false},
	{"Struct", int32(1), id.VariableNode, true},
}

func startPLC(t testing.TB, setup ...func(*testPLC)) *testPLC {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &testPLC{t: t, port: port, values: map[string]any{}}
	p.cert, p.key = testCert(t, "urn:shadowgate:test:plc")
	for _, v := range plcVars {
		p.values[v.name] = v.v
	}
	for _, f := range setup {
		f(p)
	}
	p.start()
	t.Cleanup(p.Stop)
	return p
}

// URL is the server's endpoint.
func (p *testPLC) URL() string { return "opc.tcp://127.0.0.1:" + strconv.Itoa(p.port) }

// Thumbprint is the SHA-256 of the server's certificate.
func (p *testPLC) Thumbprint() string { return Thumbprint(p.cert) }

// NS is the namespace index of the variables.
func (p *testPLC) NS() uint16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ns.ID()
}

func (p *testPLC) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := server.New(
		server.EnableSecurity("None", ua.MessageSecurityModeNone),
		server.EnableAuthMode(ua.UserTokenTypeAnonymous),
		server.EndPoint("127.0.0.1", p.port),
		server.Certificate(p.cert),
		server.PrivateKey(p.key),
	)
	ns := &lockedNS{NodeNameSpace: server.NewNameSpace("urn:shadowgate:test"), srv: s, plc: p}
	idx := s.AddNamespace(ns)
	// gopcua's NewFolderNode panics (a NodeClass is no variant type): the
	// objects folder as NewNodeNameSpace makes it.
	ns.AddNode(server.NewNode(ua.NewNumericNodeID(uint16(idx), id.ObjectsFolder),
		map[ua.AttributeID]*ua.DataValue{
			ua.AttributeIDNodeClass:   server.DataValueFromValue(uint32(ua.NodeClassObject)),
			ua.AttributeIDBrowseName:  server.DataValueFromValue(attrs.BrowseName("PLC")),
			ua.AttributeIDDisplayName: server.DataValueFromValue(attrs.DisplayName("PLC", "PLC")),
		}, []*ua.ReferenceDescription{}, nil))
	root, _ := s.Namespace(0)
	root.Objects().AddRef(ns.Objects(), id.HasComponent, true)
	for _, v := range plcVars {
		access := byte(ua.AccessLevelTypeCurrentRead)
		if v.writable {
			access |= byte(ua.AccessLevelTypeCurrentWrite)
		}
		val := p.values[v.name]
		n := server.NewNode(ua.NewStringNodeID(uint16(idx), v.name),
			map[ua.AttributeID]*ua.DataValue{
				ua.AttributeIDNodeClass:       server.DataValueFromValue(uint32(ua.NodeClassVariable)),
				ua.AttributeIDBrowseName:      server.DataValueFromValue(attrs.BrowseName(v.name)),
				ua.AttributeIDDisplayName:     server.DataValueFromValue(attrs.DisplayName(v.name, v.name)),
				ua.AttributeIDAccessLevel:     server.DataValueFromValue(access),
				ua.AttributeIDUserAccessLevel: server.DataValueFromValue(access),
				ua.AttributeIDDataType:        server.DataValueFromValue(ua.NewNumericExpandedNodeID(0, v.dt)),
			}, nil,
			func() *ua.DataValue { return server.DataValueFromValue(val) })
		ns.AddNode(n)
		ns.Objects().AddRef(n, id.HasComponent, true)
	}
	if p.noSubscriptions {
		s.RegisterHandler(id.CreateSubscriptionRequest_Encoding_DefaultBinary,
			func(_ *uasc.SecureChannel, r ua.Request, _ uint32) (ua.Response, error) {
				// A service result, as a real server answers: the session
				// stays.
				return &ua.CreateSubscriptionResponse{ResponseHeader: &ua.ResponseHeader{
					Timestamp: time.Now(), RequestHandle: r.Header().RequestHandle,
					ServiceResult: ua.StatusBadTooManySubscriptions, ServiceDiagnostics: &ua.DiagnosticInfo{},
					StringTable: []string{}, AdditionalHeader: ua.NewExtensionObject(nil),
				}}, nil
			})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		cancel()
		p.t.Fatal(err)
	}
	p.srv, p.ns, p.cancel = s, ns, cancel
}

// Stop closes the server; Restart starts it again on the same port.
func (p *testPLC) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return
	}
	p.cancel()
	_ = p.srv.Close()
	p.srv = nil
}

func (p *testPLC) Restart() {
	p.Stop()
	p.start()
}

// Set changes a variable as the PLC's program would.
func (p *testPLC) Set(name string, v any) {
	p.mu.Lock()
	ns := p.ns
	p.values[name] = v
	p.mu.Unlock()
	ns.set(ua.NewStringNodeID(ns.ID(), name), v)
}

// Get returns a variable's value.
func (p *testPLC) Get(name string) any {
	p.mu.Lock()
	ns := p.ns
	p.mu.Unlock()
	dv := ns.Attribute(ua.NewStringNodeID(ns.ID(), name), ua.AttributeIDValue)
	return dv.Value.Value()
}

// node is a variable's node id as the configuration writes it.
func (p *testPLC) node(name string) string {
	return "ns=" + strconv.Itoa(int(p.NS())) + ";s=" + name
}

// lockedNS serializes the namespace's attributes (gopcua's server swaps a
// node's value without a lock) and counts the writes that reach it.
type lockedNS struct {
	*server.NodeNameSpace
	srv *server.Server
	plc *testPLC
	mu  sync.Mutex
}

func (l *lockedNS) Attribute(n *ua.NodeID, a ua.AttributeID) *ua.DataValue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.NodeNameSpace.Attribute(n, a)
}

func (l *lockedNS) SetAttribute(n *ua.NodeID, a ua.AttributeID, v *ua.DataValue) ua.StatusCode {
	l.plc.writes.Add(1)
	node := l.Node(n)
	if node == nil {
		return ua.StatusBadNodeIDUnknown
	}
	if !node.Access(ua.AccessLevelTypeCurrentWrite) {
		return ua.StatusBadNotWritable
	}
	l.mu.Lock()
	err := node.SetAttribute(a, v)
	l.mu.Unlock()
	if err != nil && a == ua.AttributeIDValue {
		return ua.StatusBadAttributeIDInvalid
	}
	l.plc.mu.Lock()
	l.plc.values[n.StringID()] = v.Value.Value()
	l.plc.mu.Unlock()
	l.srv.ChangeNotification(n)
	return ua.StatusOK
}

// Browse lists the variables under the namespace's objects folder: the
// namespace's own Browse needs a server gopcua sets only on a namespace
// that registers itself.
func (l *lockedNS) Browse(bd *ua.BrowseDescription) *ua.BrowseResult {
	if !bd.NodeID.Equal(ua.NewNumericNodeID(l.ID(), id.ObjectsFolder)) {
		return &ua.BrowseResult{StatusCode: ua.StatusBadNodeIDUnknown}
	}
	var refs []*ua.ReferenceDescription
	for _, v := range plcVars {
		refs = append(refs, &ua.ReferenceDescription{
			ReferenceTypeID: ua.NewNumericNodeID(0, id.HasComponent), IsForward: true,
			NodeID:         ua.NewStringExpandedNodeID(l.ID(), v.name),
			BrowseName:     &ua.QualifiedName{NamespaceIndex: l.ID(), Name: v.name},
			DisplayName:    &ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: v.name},
			NodeClass:      ua.NodeClassVariable,
			TypeDefinition: ua.NewNumericExpandedNodeID(0, id.BaseDataVariableType),
		})
	}
	return &ua.BrowseResult{StatusCode: ua.StatusGood, References: refs}
}

func (l *lockedNS) set(n *ua.NodeID, v any) {
	l.mu.Lock()
	_ = l.Node(n).SetAttribute(ua.AttributeIDValue, server.DataValueFromValue(v))
	l.mu.Unlock()
	l.srv.ChangeNotification(n)
}

// testCert makes a self-signed certificate with an application URI.
func testCert(t testing.TB, uri string) ([]byte, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(uri)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test plc", Organization: []string{"Test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment,
		URIs:     []*url.URL{u}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}
