package opcua

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// connect checks the server's certificate and opens a session: it asks
// for the endpoints, picks the one with the configured policy and mode,
// compares its certificate's SHA-256 with the pinned thumbprint, and only
// then opens a secure channel, encrypting to that very certificate, and a
// session. It then reads the data type of every node once.
// testConnectHook, set by a test, runs at the start of every connection.
var testConnectHook func()

func (d *Driver) connect(ctx context.Context, ident *identity) (*session, error) {
	if testConnectHook != nil {
		testConnectHook()
	}
	cctx, cancel := context.WithTimeout(ctx, 3*d.o.Timeout)
	defer cancel()
	eps, err := gopcua.GetEndpoints(cctx, d.o.URL, gopcua.DialTimeout(d.o.Timeout), gopcua.RequestTimeout(d.o.Timeout))
	if err != nil {
		return nil, fmt.Errorf("asking %s for its endpoints: %w", d.o.URL, err)
	}
	ep, err := pickEndpoint(eps, d.o.Policy, d.o.Mode, d.o.Thumbprint)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", d.o.URL, err)
	}
	tokenType := ua.UserTokenTypeAnonymous
	if d.o.Username != "" {
		tokenType = ua.UserTokenTypeUserName
	}
	if !offersToken(ep, tokenType) {
		return nil, fmt.Errorf("server %s offers no %s login on its %s/%s endpoint", d.o.URL, tokenName(tokenType), policyName(d.o.Policy), modeName(d.o.Mode))
	}
	opts := []gopcua.Option{
		// Reconnection is the keeper's, so that it sees every loss.
		gopcua.AutoReconnect(false),
		gopcua.DialTimeout(d.o.Timeout),
		gopcua.RequestTimeout(d.o.Timeout),
		gopcua.ApplicationName("shadowgate"),
		gopcua.SessionName("shadowgate " + d.o.Name),
		gopcua.SecurityPolicy(d.o.Policy),
		gopcua.SecurityMode(d.o.Mode),
	}
	if d.o.Mode != ua.MessageSecurityModeNone {
		// Certificate also sets the application URI from the certificate.
		opts = append(opts, gopcua.Certificate(ident.der), gopcua.PrivateKey(ident.key))
	}
	if d.o.Username != "" {
		opts = append(opts, gopcua.AuthUsername(d.o.Username, d.o.Password))
	} else {
		opts = append(opts, gopcua.AuthAnonymous())
	}
	// SecurityFromEndpoint sets the remote certificate to the endpoint's,
	// the one whose thumbprint was just checked, and the token's policy id.
	opts = append(opts, gopcua.SecurityFromEndpoint(ep, tokenType))
	c, err := gopcua.NewClient(d.o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("opcua client for %s: %w", d.o.URL, err)
	}
	if err := c.Connect(cctx); err != nil {
		_ = c.Close(context.Background())
		return nil, fmt.Errorf("connecting to %s: %w", d.o.URL, err)
	}
	s := &session{c: c, types: map[string]dataType{}, misfit: map[string]error{}}
	if err := d.learnTypes(cctx, s); err != nil {
		d.closeClient(s)
		return nil, fmt.Errorf("server %s: %w", d.o.URL, err)
	}
	return s, nil
}

func offersToken(ep *ua.EndpointDescription, t ua.UserTokenType) bool {
	for _, p := range ep.UserIdentityTokens {
		if p != nil && p.TokenType == t {
			return true
		}
	}
	return false
}

func tokenName(t ua.UserTokenType) string {
	if t == ua.UserTokenTypeUserName {
		return "user name"
	}
	return "anonymous"
}

// learnTypes reads the DataType attribute of every node once (and the value
// of a node whose type is abstract), and records for each capability why
// its nodes cannot be used, if they cannot.
func (d *Driver) learnTypes(ctx context.Context, s *session) error {
	var nodes []*ua.NodeID
	index := map[string]int{}
	add := func(n *ua.NodeID) {
		if n == nil {
			return
		}
		if _, ok := index[n.String()]; !ok {
			index[n.String()] = len(nodes)
			nodes = append(nodes, n)
		}
	}
	for _, dev := range d.o.Devices {
		for _, c := range dev.Capabilities {
			p := d.o.points[dev.ID][c.Name]
			add(p.node)
			add(p.readBack)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	for _, n := range nodes {
		req.NodesToRead = append(req.NodesToRead,
			&ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDDataType},
			&ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDValue})
	}
	res, err := s.c.Read(ctx, req)
	if err != nil {
		return fmt.Errorf("reading the data types of %d nodes: %w", len(nodes), err)
	}
	if res == nil || len(res.Results) != len(req.NodesToRead) {
		return fmt.Errorf("reading the data types of %d nodes: the server answered with %d results for %d", len(nodes), resultCount(res), len(req.NodesToRead))
	}
	why := map[string]error{}
	for i, n := range nodes {
		dt, vv := res.Results[2*i], res.Results[2*i+1]
		t, err := nodeType(dt, vv)
		if err != nil {
			why[n.String()] = fmt.Errorf("node %s: %w", n, err)
			continue
		}
		s.types[n.String()] = t
	}
	for _, dev := range d.o.Devices {
		for _, c := range dev.Capabilities {
			p := d.o.points[dev.ID][c.Name]
			logged := false
			check := func(op string, n *ua.NodeID) {
				err := why[n.String()]
				if err == nil {
					if e := fits(&c, s.types[n.String()]); e != nil {
						err = fmt.Errorf("node %s: %w", n, e)
					}
				}
				if err != nil {
					s.misfit[misfitKey(dev.ID, c.Name, op)] = err
					if !logged {
						d.log.Warn("opcua node does not fit its capability", "device_id", dev.ID, "capability", c.Name, "error", err)
						logged = true
					}
				}
			}
			if c.Kind == devices.KindActuator {
				check("write", p.node)
			}
			if c.Readable() {
				check("read", p.readNode())
			}
		}
	}
	return nil
}

// nodeType is a node's data type from its DataType attribute and value.
func nodeType(dt, vv *ua.DataValue) (dataType, error) {
	if dt == nil {
		return 0, errors.New("the server sent no DataType attribute")
	}
	if isBad(dt.Status) {
		code, _ := statusName(dt.Status)
		return 0, fmt.Errorf("reading its DataType: %s", code)
	}
	t, abstract, err := dataTypeOf(dt.Value)
	if err != nil {
		return 0, err
	}
	if !abstract {
		return t, nil
	}
	if vv == nil || isBad(vv.Status) {
		return 0, fmt.Errorf("data type %s, and its value could not be read to tell which", id.Name(uint32(t)))
	}
	return concrete(t, vv.Value)
}

// watched is one capability followed by subscription.
type watched struct {
	device, capability string
	c                  *devices.Capability
	node               *ua.NodeID
	p                  *point
	last               value.Value // the last value delivered
	have               bool
}

// serve follows the session until it is lost or ctx is done, and returns
// why it was lost. It builds the subscription, delivers its readings, looks
// at the session every o.check (its state; every pingEvery checks a read of
// the server's clock), and looks after the subscription: one that reports
// an error, or that has been silent while a node it follows changed, is
// built anew.
func (d *Driver) serve(ctx context.Context, s *session) error {
	items := d.watchList(s)
	notes := make(chan *gopcua.PublishNotificationData, 64)
	var sub *gopcua.Subscription
	var stallAfter time.Duration
	lastHeard := time.Now()
	build := func() error {
		if sub != nil {
			cctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
			_ = sub.Cancel(cctx)
			cancel()
			sub = nil
		}
		if len(items) == 0 {
			return nil
		}
		var err error
		sub, stallAfter, err = d.subscribe(ctx, s, items, notes)
		lastHeard = time.Now()
		return err
	}
	// A subscription the server will not make is not a lost session: the
	// nodes are still read when asked, and the subscription is tried
	// again with its own backoff, not by reconnecting.
	subBack := backoff{min: d.o.backoffMin, max: d.o.backoffMax}
	var retryAt time.Time
	rebuild := func(why string) {
		err := build()
		if err == nil {
			subBack.reset()
			retryAt = time.Time{}
			return
		}
		wait := subBack.next()
		retryAt = time.Now().Add(wait)
		d.log.Warn("opcua subscription could not be made; its nodes are read when asked, and it is tried again",
			"why", why, "error", err, "retry_in", wait)
	}
	rebuild("the session began")
	tick := time.NewTicker(d.o.check)
	defer tick.Stop()
	checks, missed := 0, 0
	for {
		select {
		case <-ctx.Done():
			if sub != nil {
				// Closing: the server frees the subscription now rather
				// than at the end of its lifetime.
				cctx, cancel := context.WithTimeout(context.Background(), min(d.o.Timeout, time.Second))
				_ = sub.Cancel(cctx)
				cancel()
			}
			return ctx.Err()
		case n := <-notes:
			if sub == nil || n.SubscriptionID != sub.SubscriptionID && n.SubscriptionID != 0 {
				continue // from a subscription given up
			}
			if n.Error != nil {
				if st := s.c.State(); st != gopcua.Connected {
					return fmt.Errorf("the session with %s was lost: %w", d.o.URL, n.Error)
				}
				d.log.Warn("opcua subscription failed; building it anew", "error", n.Error)
				rebuild("the subscription failed")
				continue
			}
			lastHeard = time.Now()
			d.deliver(items, n.Value)
			continue
		case <-d.kick:
		case <-tick.C:
		}
		if st := s.c.State(); st != gopcua.Connected {
			return fmt.Errorf("the session with %s was lost (the client is %s)", d.o.URL, st)
		}
		checks++
		if checks%pingEvery == 0 {
			if err := d.ping(ctx, s); err != nil {
				missed++
				if missed >= missedPings {
					return fmt.Errorf("server %s stopped answering: %w", d.o.URL, err)
				}
			} else {
				missed = 0
			}
		}
		if sub == nil && !retryAt.IsZero() && time.Now().After(retryAt) {
			rebuild("a retry was due")
		}
		if sub != nil && time.Since(lastHeard) > stallAfter {
			stalled, err := d.missedChange(ctx, s, items)
			switch {
			case err != nil:
				d.log.Debug("opcua subscription check failed", "error", err)
			case stalled:
				d.log.Warn("opcua subscription missed a change; building it anew")
				rebuild("it missed a change")
			default:
				lastHeard = time.Now()
			}
		}
	}
}

// watchList returns the capabilities to follow, in client handle order.
func (d *Driver) watchList(s *session) []*watched {
	var out []*watched
	for i := range d.o.Devices {
		dev := &d.o.Devices[i]
		for k := range dev.Capabilities {
			c := &dev.Capabilities[k]
			p := d.o.points[dev.ID][c.Name]
			if !p.watch || s.misfit[misfitKey(dev.ID, c.Name, "read")] != nil {
				continue
			}
			out = append(out, &watched{device: dev.ID, capability: c.Name, c: c, node: p.readNode(), p: p})
		}
	}
	return out
}

// keepAliveCount is how many publishing intervals the server may be
// silent before it sends a keep-alive.
const keepAliveCount = 10

// subscribe creates one subscription for items, its publishing interval
// the shortest sampling, and returns it with how long it may be silent
// before the driver checks that it did not miss a change.
func (d *Driver) subscribe(ctx context.Context, s *session, items []*watched, notes chan *gopcua.PublishNotificationData) (*gopcua.Subscription, time.Duration, error) {
	interval := items[0].p.sampling
	for _, it := range items {
		interval = min(interval, it.p.sampling)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*d.o.Timeout)
	defer cancel()
	sub, err := s.c.Subscribe(sctx, &gopcua.SubscriptionParameters{
		Interval: interval, MaxKeepAliveCount: keepAliveCount, LifetimeCount: 4 * keepAliveCount,
	}, notes)
	if err != nil {
		return nil, 0, fmt.Errorf("subscribing at %s: %w", d.o.URL, err)
	}
	reqs := make([]*ua.MonitoredItemCreateRequest, len(items))
	for i, it := range items {
		r := gopcua.NewMonitoredItemCreateRequestWithDefaults(it.node, ua.AttributeIDValue, uint32(i))
		r.RequestedParameters.SamplingInterval = float64(it.p.sampling) / float64(time.Millisecond)
		r.RequestedParameters.QueueSize = 1
		if it.p.deadband > 0 {
			r.RequestedParameters.Filter = ua.NewExtensionObject(&ua.DataChangeFilter{
				Trigger: ua.DataChangeTriggerStatusValue, DeadbandType: uint32(ua.DeadbandTypeAbsolute), DeadbandValue: it.p.deadband,
			})
		}
		reqs[i] = r
	}
	res, err := sub.Monitor(sctx, ua.TimestampsToReturnNeither, reqs...)
	if err != nil {
		_ = sub.Cancel(sctx)
		return nil, 0, fmt.Errorf("monitoring %d nodes at %s: %w", len(items), d.o.URL, err)
	}
	for i, r := range res.Results {
		if i < len(items) && r != nil && isBad(r.StatusCode) {
			code, _ := statusName(r.StatusCode)
			d.log.Warn("opcua server refused to monitor a node; it is read when polled", "device_id", items[i].device, "capability", items[i].capability, "node", items[i].node.String(), "status", code)
		}
	}
	// A keep-alive comes at the latest every keepAliveCount intervals; the
	// client does not pass keep-alives on, so silence is measured against
	// three of them before the nodes are read to see whether a change was
	// missed.
	pub := max(sub.RevisedPublishingInterval, interval)
	return sub, 3 * keepAliveCount * pub, nil
}

// deliver tells of the readings in a data change notification.
func (d *Driver) deliver(items []*watched, v any) {
	dc, ok := v.(*ua.DataChangeNotification)
	if !ok {
		return
	}
	now := time.Now()
	for _, m := range dc.MonitoredItems {
		if m == nil || m.Value == nil || int(m.ClientHandle) >= len(items) {
			continue
		}
		it := items[m.ClientHandle]
		rd, err := readingOf(it.c, it.node, m.Value, now, func(e error) error { return e })
		if err != nil {
			d.log.Debug("opcua notification not taken", "device_id", it.device, "capability", it.capability, "error", err)
			continue
		}
		it.last, it.have = rd.Value, true
		d.notices.Tell(devices.Notice{Device: it.device, Capability: it.capability, Reading: &rd})
	}
}

// missedChange reads the followed nodes and reports whether one of them
// holds another value than the subscription last delivered; the new
// values are told. A subscription that is silent while nothing changed
// missed nothing; one that missed a change is built anew.
func (d *Driver) missedChange(ctx context.Context, s *session, items []*watched) (bool, error) {
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	for _, it := range items {
		req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: it.node, AttributeID: ua.AttributeIDValue})
	}
	rctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	res, err := s.c.Read(rctx, req)
	if err != nil {
		return false, err
	}
	if res == nil || len(res.Results) != len(items) {
		return false, fmt.Errorf("the server answered %d results for %d nodes", resultCount(res), len(items))
	}
	missed := false
	now := time.Now()
	for i, it := range items {
		rd, err := readingOf(it.c, it.node, res.Results[i], now, func(e error) error { return e })
		if err != nil {
			continue
		}
		if !it.have || changedBeyond(rd.Value, it.last, it.p.deadband) {
			missed = true
			it.last, it.have = rd.Value, true
			d.notices.Tell(devices.Notice{Device: it.device, Capability: it.capability, Reading: &rd})
		}
	}
	return missed, nil
}

// changedBeyond reports whether v differs from last by more than the
// subscription's absolute deadband would let pass unreported (numbers), or
// at all (other types).
func changedBeyond(v, last value.Value, deadband float64) bool {
	if v.Type == value.TypeNumber && last.Type == value.TypeNumber {
		return math.Abs(v.Num-last.Num) > deadband
	}
	return !v.Equal(last)
}

// ping reads the server's clock.
func (d *Driver) ping(ctx context.Context, s *session) error {
	rctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	res, err := s.c.Read(rctx, &ua.ReadRequest{
		NodesToRead:        []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_ServerStatus_CurrentTime), AttributeID: ua.AttributeIDValue}},
		TimestampsToReturn: ua.TimestampsToReturnNeither,
	})
	if err != nil {
		return err
	}
	if res == nil || len(res.Results) != 1 {
		return errors.New("no answer to a read of the server's clock")
	}
	return nil
}
