package devices

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/shadowgate/shadowgate/value"
)

type listDriver struct {
	mu   sync.Mutex
	devs []Device
}

func (d *listDriver) Open(context.Context) error { return nil }
func (d *listDriver) Devices() []Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.devs)
}
func (d *listDriver) Read(context.Context, string, string) (Reading, error)    { return Reading{}, nil }
func (d *listDriver) Write(context.Context, string, string, value.Value) error { return nil }
func (d *listDriver) Close() error                                             { return nil }
func (d *listDriver) set(ids ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.devs = nil
	for _, id := range ids {
		d.devs = append(d.devs, Device{ID: id})
	}
}

func TestRegistryRefreshReportsChanges(t *testing.T) {
	a, b := &listDriver{}, &listDriver{}
	r := NewRegistry()
	if err := r.Add("a", a); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("b", b); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("a", b); err == nil {
		t.Fatal("Add of a duplicate driver name succeeded")
	}
	a.set("pump-1", "valve-1")
	b.set("tank-1")
	got := r.Refresh()
	want := []Change{{"pump-1", true, a}, {"tank-1", true, b}, {"valve-1", true, a}}
	if !slices.Equal(got, want) {
		t.Fatalf("first Refresh = %v, want %v", got, want)
	}
	if got := r.Refresh(); got != nil {
		t.Fatalf("unchanged Refresh = %v, want none", got)
	}
	a.set("pump-1")
	if got, want := r.Refresh(), []Change{{"valve-1", false, a}}; !slices.Equal(got, want) {
		t.Fatalf("Refresh after unplug = %v, want %v", got, want)
	}
	if _, ok := r.Lookup("valve-1"); ok {
		t.Fatal("Lookup found an unplugged device")
	}
	e, ok := r.Lookup("tank-1")
	if !ok || e.Driver != Driver(b) {
		t.Fatalf("Lookup(tank-1) = %v, %v; want driver b", e, ok)
	}
	b.set("tank-1", "pump-1") // a duplicate id: the first driver keeps it
	r.Refresh()
	if e, _ := r.Lookup("pump-1"); e.Driver != Driver(a) {
		t.Fatal("a duplicate id moved to the second driver")
	}
	if ids := r.Devices(); len(ids) != 2 || ids[0].ID != "pump-1" || ids[1].ID != "tank-1" {
		t.Fatalf("Devices = %v", ids)
	}
}
