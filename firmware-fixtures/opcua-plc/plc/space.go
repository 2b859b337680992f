package plc

import (
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/server/attrs"
	"github.com/gopcua/opcua/ua"
)

// space is the PLC's namespace as the gopcua server sees it. It replaces
// server.NodeNameSpace, whose Node.SetAttribute swaps a node's value func
// without a lock while reads and subscription notifications run on other
// goroutines (a data race under -race). Here the nodes are built once and
// never modified; a value is read from the PLC's state under its mutex on
// every Attribute call, and a client write goes to the state, never to the
// node. The AccessLevel attributes are computed from the state too, since
// a tag's writability can change. So no gopcua data is written after Start.
//
// A space belongs to one gopcua server; [PLC.Restart] builds a new one.
type space struct {
	p     *PLC
	srv   *server.Server
	id    uint16
	nodes map[string]*server.Node // by node id string; not modified after newSpace
	tags  map[string]tagDef       // by node id string
	objs  *server.Node            // the PLC's folder under Objects
}

var _ server.NameSpace = (*space)(nil)

func newSpace(p *PLC, srv *server.Server) *space {
	s := &space{p: p, srv: srv, nodes: map[string]*server.Node{}, tags: map[string]tagDef{}}
	s.id = uint16(srv.AddNamespace(s))

	s.objs = server.NewNode(ua.NewNumericNodeID(s.id, id.ObjectsFolder), server.Attributes{
		ua.AttributeIDNodeClass:     server.DataValueFromValue(uint32(ua.NodeClassObject)),
		ua.AttributeIDBrowseName:    server.DataValueFromValue(attrs.BrowseName("PLC")),
		ua.AttributeIDDisplayName:   server.DataValueFromValue(attrs.DisplayName("PLC", "")),
		ua.AttributeIDEventNotifier: server.DataValueFromValue(int16(0)),
	}, nil, nil)
	s.nodes[s.objs.ID().String()] = s.objs

	for _, d := range tagDefs {
		nid := ua.NewStringNodeID(s.id, string(d.tag))
		tag := d.tag
		n := server.NewNode(nid, server.Attributes{
			ua.AttributeIDNodeClass:   server.DataValueFromValue(uint32(ua.NodeClassVariable)),
			ua.AttributeIDBrowseName:  server.DataValueFromValue(attrs.BrowseName(string(d.tag))),
			ua.AttributeIDDisplayName: server.DataValueFromValue(attrs.DisplayName(string(d.tag), "")),
			ua.AttributeIDDescription: server.DataValueFromValue(&ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: d.unit}),
			ua.AttributeIDDataType:    server.DataValueFromValue(ua.NewNumericExpandedNodeID(0, d.dataType)),
			ua.AttributeIDValueRank:   server.DataValueFromValue(int32(-1)), // scalar
		}, nil, func() *ua.DataValue { return s.p.dataValue(tag) })
		s.nodes[nid.String()] = n
		s.tags[nid.String()] = d
		s.objs.AddRef(n, id.HasComponent, true)
	}

	// Make the folder browsable from the standard Objects folder.
	if root, err := srv.Namespace(0); err == nil {
		if objects := root.Objects(); objects != nil {
			objects.AddRef(s.objs, id.Organizes, true)
		}
	}
	return s
}

func (s *space) Name() string          { return NamespaceURI }
func (s *space) ID() uint16            { return s.id }
func (s *space) SetID(id uint16)       { s.id = id }
func (s *space) Objects() *server.Node { return s.objs }
func (s *space) Root() *server.Node    { return nil }

// AddNode is part of server.NameSpace; the PLC's address space is fixed, so
// it adds nothing and returns n.
func (s *space) AddNode(n *server.Node) *server.Node { return n }

func (s *space) Node(nid *ua.NodeID) *server.Node {
	if nid == nil {
		return nil
	}
	return s.nodes[nid.String()]
}

func (s *space) Browse(bd *ua.BrowseDescription) *ua.BrowseResult {
	if bd.NodeID == nil || !bd.NodeID.Equal(s.objs.ID()) {
		if s.Node(bd.NodeID) != nil {
			return &ua.BrowseResult{StatusCode: ua.StatusGood}
		}
		return &ua.BrowseResult{StatusCode: ua.StatusBadNodeIDUnknown}
	}
	if bd.BrowseDirection == ua.BrowseDirectionInverse || !hasComponentMatches(bd) {
		return &ua.BrowseResult{StatusCode: ua.StatusGood}
	}
	var refs []*ua.ReferenceDescription
	for _, d := range tagDefs {
		if bd.NodeClassMask != 0 && bd.NodeClassMask&uint32(ua.NodeClassVariable) == 0 {
			break
		}
		nid := ua.NewStringNodeID(s.id, string(d.tag))
		refs = append(refs, &ua.ReferenceDescription{
			ReferenceTypeID: ua.NewNumericNodeID(0, id.HasComponent),
			IsForward:       true,
			NodeID:          ua.NewExpandedNodeID(nid, "", 0),
			BrowseName:      &ua.QualifiedName{NamespaceIndex: s.id, Name: string(d.tag)},
			DisplayName:     &ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: string(d.tag)},
			NodeClass:       ua.NodeClassVariable,
			TypeDefinition:  ua.NewNumericExpandedNodeID(0, id.BaseDataVariableType),
		})
	}
	return &ua.BrowseResult{StatusCode: ua.StatusGood, References: refs}
}

// hasComponentMatches tells whether a browse for bd's reference type
// includes HasComponent, the only reference the PLC's folder has.
func hasComponentMatches(bd *ua.BrowseDescription) bool {
	rt := bd.ReferenceTypeID
	if rt == nil || rt.Namespace() != 0 {
		return rt == nil
	}
	switch rt.IntID() {
	case 0, id.HasComponent:
		return true
	case id.References, id.HierarchicalReferences, id.Aggregates:
		return bd.IncludeSubtypes
	}
	return false
}

func badValue(code ua.StatusCode) *ua.DataValue {
	return &ua.DataValue{
		EncodingMask:    ua.DataValueServerTimestamp | ua.DataValueStatusCode,
		ServerTimestamp: time.Now(),
		Status:          code,
	}
}

func (s *space) Attribute(nid *ua.NodeID, a ua.AttributeID) *ua.DataValue {
	n := s.Node(nid)
	if n == nil {
		return badValue(ua.StatusBadNodeIDUnknown)
	}
	d, isTag := s.tags[nid.String()]
	switch a {
	case ua.AttributeIDNodeID:
		return server.DataValueFromValue(n.ID())
	case ua.AttributeIDEventNotifier:
		if isTag {
			return badValue(ua.StatusBadAttributeIDInvalid)
		}
		return server.DataValueFromValue(byte(0))
	case ua.AttributeIDNodeClass:
		// NodeClass is an Int32 enumeration on the wire.
		return server.DataValueFromValue(int32(n.NodeClass()))
	case ua.AttributeIDDataType:
		// A NodeId on the wire. The node keeps an ExpandedNodeId, which
		// gopcua's Node.DataType asserts.
		if !isTag {
			return badValue(ua.StatusBadAttributeIDInvalid)
		}
		return server.DataValueFromValue(ua.NewNumericNodeID(0, d.dataType))
	case ua.AttributeIDAccessLevel, ua.AttributeIDUserAccessLevel:
		if !isTag {
			return badValue(ua.StatusBadAttributeIDInvalid)
		}
		level := byte(ua.AccessLevelTypeCurrentRead)
		if s.p.writable(d.tag) {
			level |= byte(ua.AccessLevelTypeCurrentWrite)
		}
		return server.DataValueFromValue(level)
	}
	v, err := n.Attribute(a)
	if err != nil || v == nil || v.Value == nil {
		return badValue(ua.StatusBadAttributeIDInvalid)
	}
	return v.Value
}

// SetAttribute is called by the server's Write service (see
// [PLC.handleWrite]) for each value written. Only a tag's Value may be
// written.
func (s *space) SetAttribute(nid *ua.NodeID, a ua.AttributeID, dv *ua.DataValue) ua.StatusCode {
	d, ok := s.tags[nid.String()]
	if !ok {
		if s.Node(nid) != nil {
			return ua.StatusBadNotWritable
		}
		return ua.StatusBadNodeIDUnknown
	}
	if a != ua.AttributeIDValue {
		return ua.StatusBadNotWritable
	}
	var v any
	if dv != nil && dv.Value != nil {
		v = dv.Value.Value()
	}
	code := s.p.clientWrite(d, v)
	if code == codeGood {
		// Outside the PLC's lock: it calls back into Attribute.
		s.srv.ChangeNotification(nid)
	}
	return ua.StatusCode(code)
}
