package opcua

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestTrustDescribesTheCertificate(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	sc, err := Trust(t.Context(), p.URL())
	if err != nil {
		t.Fatal(err)
	}
	if sc.Thumbprint != p.Thumbprint() || sc.YAML != `server_thumbprint: "`+p.Thumbprint()+`"` {
		t.Errorf("Trust = thumbprint %s, YAML %s; want %s", sc.Thumbprint, sc.YAML, p.Thumbprint())
	}
	if !slices.Contains(sc.URIs, "urn:shadowgate:test:plc") || !sc.SelfSigned || !strings.Contains(sc.Subject, "test plc") {
		t.Errorf("Trust = %+v; want the test PLC's self-signed certificate with its URI", sc)
	}
	if !slices.Equal(sc.Endpoints, []string{"None/None"}) {
		t.Errorf("Trust endpoints = %v", sc.Endpoints)
	}
}

func TestBrowseListsTheVariables(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	objects, err := Browse(t.Context(), p.URL(), "", BrowseOptions{Thumbprint: p.Thumbprint()})
	if err != nil {
		t.Fatal(err)
	}
	folder := "ns=" + strconv.Itoa(int(p.NS())) + ";i=85"
	if !slices.ContainsFunc(objects, func(e BrowseEntry) bool { return e.NodeID == folder }) {
		t.Fatalf("Browse(Objects) = %+v; want the PLC's folder %s", objects, folder)
	}
	vars, err := Browse(t.Context(), p.URL(), folder, BrowseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]BrowseEntry{
		p.node("Tank.Level"):   {NodeClass: "Variable", DataType: "Double", Access: "read/write"},
		p.node("Pump.Running"): {NodeClass: "Variable", DataType: "Boolean", Access: "read"},
		p.node("Setpoint"):     {NodeClass: "Variable", DataType: "Int32", Access: "read/write"},
	}
	for _, e := range vars {
		w, ok := want[e.NodeID]
		if !ok {
			continue
		}
		delete(want, e.NodeID)
		if e.NodeClass != w.NodeClass || e.DataType != w.DataType || e.Access != w.Access || !strings.HasSuffix(e.BrowseName, ":"+e.NodeID[strings.LastIndex(e.NodeID, "s=")+2:]) {
			t.Errorf("Browse entry %+v; want %+v", e, w)
		}
	}
	for id := range want {
		t.Errorf("Browse did not list %s; it listed %+v", id, vars)
	}
	_, err = Browse(t.Context(), p.URL(), "", BrowseOptions{Thumbprint: strings.Repeat("0", 64)})
	if !errors.Is(err, ErrThumbprintMismatch) {
		t.Errorf("Browse with a wrong thumbprint = %v; want a mismatch", err)
	}
}
