package opcua

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
)

// ServerCert is what Trust found of a server's certificate.
type ServerCert struct {
	Subject, Issuer     string
	NotBefore, NotAfter time.Time
	// URIs are the certificate's URI SANs: the server's application URI.
	URIs     []string
	DNSNames []string
	IPs      []string
	// SelfSigned is true when the issuer is the subject.
	SelfSigned bool
	// Thumbprint is the SHA-256 of the certificate (DER), as
	// server_thumbprint is written.
	Thumbprint string
	// YAML is the line to paste into the driver's options:
	// server_thumbprint: "…".
	YAML string
	// Endpoints are the endpoints that present this certificate, as
	// policy/mode: "Basic256Sha256/SignAndEncrypt".
	Endpoints []string
	// Others are the other certificates, if the server's endpoints do not
	// all present the same one (unusual; each is described alike).
	Others []ServerCert
}

// Trust asks the server at url for its endpoints (without security, as a
// client must to learn them) and describes the certificate they present,
// the one of the most secure endpoint first. It trusts nothing itself:
// the person who runs it compares the thumbprint with the one the PLC
// shows, then pastes the YAML line. It returns an error when the server
// presents no certificate, or one that cannot be parsed.
func Trust(ctx context.Context, url string) (ServerCert, error) {
	if err := checkURL(url); err != nil {
		return ServerCert{}, err
	}
	eps, err := gopcua.GetEndpoints(ctx, url, gopcua.DialTimeout(DefaultTimeout), gopcua.RequestTimeout(DefaultTimeout))
	if err != nil {
		return ServerCert{}, fmt.Errorf("asking %s for its endpoints: %w", url, err)
	}
	var certs []ServerCert
	var ders [][]byte
	var best []int // security level of each cert's best endpoint
	for _, ep := range eps {
		if ep == nil || len(ep.ServerCertificate) == 0 {
			continue
		}
		name := policyName(ep.SecurityPolicyURI) + "/" + modeName(ep.SecurityMode)
		i := -1
		for k, d := range ders {
			if bytes.Equal(d, ep.ServerCertificate) {
				i = k
			}
		}
		if i < 0 {
			c, err := describeCert(ep.ServerCertificate)
			if err != nil {
				return ServerCert{}, fmt.Errorf("server %s, endpoint %s: %w", url, name, err)
			}
			certs, ders, best = append(certs, c), append(ders, ep.ServerCertificate), append(best, -1)
			i = len(certs) - 1
		}
		certs[i].Endpoints = append(certs[i].Endpoints, name)
		best[i] = max(best[i], int(ep.SecurityLevel))
	}
	if len(certs) == 0 {
		return ServerCert{}, fmt.Errorf("server %s presents no certificate on any of its %d endpoints: there is nothing to pin (it offers security None only)", url, len(eps))
	}
	top := 0
	for i := range certs {
		if best[i] > best[top] {
			top = i
		}
	}
	out := certs[top]
	for i := range certs {
		if i != top {
			out.Others = append(out.Others, certs[i])
		}
	}
	return out, nil
}

// describeCert describes a DER certificate.
func describeCert(der []byte) (ServerCert, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return ServerCert{}, fmt.Errorf("the certificate cannot be parsed: %w", err)
	}
	tp := Thumbprint(der)
	sc := ServerCert{
		Subject: c.Subject.String(), Issuer: c.Issuer.String(), NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		SelfSigned: bytes.Equal(c.RawIssuer, c.RawSubject), Thumbprint: tp,
		YAML:     `server_thumbprint: "` + tp + `"`,
		DNSNames: c.DNSNames,
	}
	for _, u := range c.URIs {
		sc.URIs = append(sc.URIs, u.String())
	}
	for _, ip := range c.IPAddresses {
		sc.IPs = append(sc.IPs, ip.String())
	}
	return sc, nil
}

// BrowseOptions configure Browse. The zero value browses anonymously
// without security and pins nothing.
type BrowseOptions struct {
	// Thumbprint, if set, is checked against the certificate of the
	// endpoint before anything else is sent, as the driver does.
	Thumbprint string
	// Timeout bounds each request. Default 2s.
	Timeout time.Duration
	// Limit bounds the entries returned. Default 1000.
	Limit int
}

// BrowseEntry is one child node.
type BrowseEntry struct {
	// NodeID is the node's id as the configuration writes it:
	// "ns=2;s=Tank.Level".
	NodeID string
	// BrowseName is the node's browse name, with its namespace index:
	// "2:Tank.Level".
	BrowseName  string
	DisplayName string
	// NodeClass is Object, Variable, Method, ….
	NodeClass string
	// DataType is a variable's data type, by name for the built-in types
	// ("Double"), else by node id. Empty for other node classes.
	DataType string
	// Access is a variable's access level for this session: "read",
	// "write", "read/write" or "none". Empty for other node classes.
	Access string
}

// Browse lists the children of node (default the Objects folder, i=85)
// on the server at url, following hierarchical references forward: each
// with its node id, browse name, node class and, for a variable, its data
// type and access level. It connects without security and anonymously.
func Browse(ctx context.Context, url string, node string, opts BrowseOptions) ([]BrowseEntry, error) {
	if err := checkURL(url); err != nil {
		return nil, err
	}
	start := ua.NewNumericNodeID(0, id.ObjectsFolder)
	if node != "" {
		n, err := parseNodeID(node)
		if err != nil {
			return nil, err
		}
		start = n
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = 1000
	}
	pinned := ""
	if opts.Thumbprint != "" {
		tp, err := normalThumbprint(opts.Thumbprint)
		if err != nil {
			return nil, err
		}
		pinned = tp
	}
	eps, err := gopcua.GetEndpoints(ctx, url, gopcua.DialTimeout(timeout), gopcua.RequestTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("asking %s for its endpoints: %w", url, err)
	}
	ep, err := pickEndpoint(eps, ua.SecurityPolicyURINone, ua.MessageSecurityModeNone, pinned)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", url, err)
	}
	c, err := gopcua.NewClient(url, gopcua.AutoReconnect(false), gopcua.DialTimeout(timeout), gopcua.RequestTimeout(timeout),
		gopcua.SecurityPolicy(ua.SecurityPolicyURINone), gopcua.SecurityMode(ua.MessageSecurityModeNone),
		gopcua.AuthAnonymous(), gopcua.SecurityFromEndpoint(ep, ua.UserTokenTypeAnonymous))
	if err != nil {
		return nil, fmt.Errorf("opcua client for %s: %w", url, err)
	}
	if err := c.Connect(ctx); err != nil {
		_ = c.Close(context.Background())
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = c.Close(cctx)
	}()
	refs, err := browseRefs(ctx, c, start, limit)
	if err != nil {
		return nil, err
	}
	return describeRefs(ctx, c, refs)
}

// browseRefs returns the references of node, following continuation
// points, up to limit.
func browseRefs(ctx context.Context, c *gopcua.Client, node *ua.NodeID, limit int) ([]*ua.ReferenceDescription, error) {
	res, err := c.Browse(ctx, &ua.BrowseRequest{
		RequestedMaxReferencesPerNode: 0,
		NodesToBrowse: []*ua.BrowseDescription{{
			NodeID: node, BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, id.HierarchicalReferences), IncludeSubtypes: true,
			ResultMask: uint32(ua.BrowseResultMaskAll),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("browsing %s: %w", node, err)
	}
	var refs []*ua.ReferenceDescription
	for round := 0; ; round++ {
		if res == nil || len(res.Results) != 1 || res.Results[0] == nil {
			return nil, fmt.Errorf("browsing %s: the server answered without a result", node)
		}
		r := res.Results[0]
		if isBad(r.StatusCode) {
			code, text := statusName(r.StatusCode)
			return nil, fmt.Errorf("browsing %s: %s (%s)", node, code, text)
		}
		refs = append(refs, r.References...)
		if len(r.ContinuationPoint) == 0 || len(refs) >= limit || round > 100 {
			if len(r.ContinuationPoint) > 0 {
				_, _ = c.BrowseNext(ctx, &ua.BrowseNextRequest{ReleaseContinuationPoints: true, ContinuationPoints: [][]byte{r.ContinuationPoint}})
			}
			break
		}
		next, err := c.BrowseNext(ctx, &ua.BrowseNextRequest{ContinuationPoints: [][]byte{r.ContinuationPoint}})
		if err != nil {
			return nil, fmt.Errorf("browsing %s further: %w", node, err)
		}
		res = &ua.BrowseResponse{Results: next.Results}
	}
	if len(refs) > limit {
		refs = refs[:limit]
	}
	return refs, nil
}

// describeRefs makes entries of references, reading the data type and
// access level of the variables.
func describeRefs(ctx context.Context, c *gopcua.Client, refs []*ua.ReferenceDescription) ([]BrowseEntry, error) {
	out := make([]BrowseEntry, 0, len(refs))
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	var vars []int
	for _, r := range refs {
		if r == nil || r.NodeID == nil || r.NodeID.NodeID == nil || r.NodeID.HasServerIndex() || r.NodeID.HasNamespaceURI() {
			continue // on another server, or without an id to write
		}
		e := BrowseEntry{NodeID: r.NodeID.NodeID.String(), NodeClass: strings.TrimPrefix(r.NodeClass.String(), "NodeClass")}
		if r.BrowseName != nil {
			e.BrowseName = fmt.Sprintf("%d:%s", r.BrowseName.NamespaceIndex, r.BrowseName.Name)
		}
		if r.DisplayName != nil {
			e.DisplayName = r.DisplayName.Text
		}
		if r.NodeClass == ua.NodeClassVariable {
			vars = append(vars, len(out))
			req.NodesToRead = append(req.NodesToRead,
				&ua.ReadValueID{NodeID: r.NodeID.NodeID, AttributeID: ua.AttributeIDDataType},
				&ua.ReadValueID{NodeID: r.NodeID.NodeID, AttributeID: ua.AttributeIDUserAccessLevel})
		}
		out = append(out, e)
	}
	if len(vars) == 0 {
		return out, nil
	}
	res, err := c.Read(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reading the data types of %d variables: %w", len(vars), err)
	}
	if res == nil || len(res.Results) != len(req.NodesToRead) {
		return nil, errors.New("the server answered the read of the variables' data types with the wrong number of results")
	}
	for k, i := range vars {
		out[i].DataType = dataTypeName(res.Results[2*k])
		out[i].Access = accessName(res.Results[2*k+1])
	}
	return out, nil
}

func dataTypeName(dv *ua.DataValue) string {
	if dv == nil || isBad(dv.Status) || dv.Value == nil {
		return "?"
	}
	var n *ua.NodeID
	switch x := dv.Value.Value().(type) {
	case *ua.NodeID:
		n = x
	case *ua.ExpandedNodeID:
		if x != nil {
			n = x.NodeID
		}
	}
	if n == nil {
		return "?"
	}
	if n.Namespace() == 0 && (n.Type() == ua.NodeIDTypeTwoByte || n.Type() == ua.NodeIDTypeFourByte || n.Type() == ua.NodeIDTypeNumeric) {
		if name := id.Name(n.IntID()); name != "" {
			return name
		}
	}
	return n.String()
}

func accessName(dv *ua.DataValue) string {
	if dv == nil || isBad(dv.Status) || dv.Value == nil {
		return "?"
	}
	var a uint64
	switch x := dv.Value.Value().(type) {
	case uint8:
		a = uint64(x)
	case uint32:
		a = uint64(x)
	case int32:
		a = uint64(uint32(x))
	default:
		return "?"
	}
	r, w := a&uint64(ua.AccessLevelTypeCurrentRead) != 0, a&uint64(ua.AccessLevelTypeCurrentWrite) != 0
	switch {
	case r && w:
		return "read/write"
	case r:
		return "read"
	case w:
		return "write"
	}
	return "none"
}
