package devices

import (
	"slices"
	"strings"
	"testing"
)

func configureNothing(Instance, []Device) Builder { return nil }

func TestRegisterAndLookUpFactories(t *testing.T) {
	Register(Factory{Type: "factory-test-a", Configure: configureNothing})
	Register(Factory{Type: "factory-test-b", Configure: configureNothing})
	f, ok := LookupFactory("factory-test-a")
	if !ok || f.Type != "factory-test-a" || f.Configure == nil {
		t.Fatalf("LookupFactory(factory-test-a) = %+v, %v", f, ok)
	}
	if _, ok := LookupFactory("factory-test-c"); ok {
		t.Fatal("LookupFactory found a type nobody registered")
	}
	types := DriverTypes()
	if !slices.IsSorted(types) || !slices.Contains(types, "factory-test-a") || !slices.Contains(types, "factory-test-b") {
		t.Fatalf("DriverTypes() = %v, want both test types, sorted", types)
	}
}

// A factory registered twice, or without a type or a Configure, is a
// programming error: Register panics at init rather than pick one.
func TestRegisterPanicsOnProgrammingErrors(t *testing.T) {
	Register(Factory{Type: "factory-test-dup", Configure: configureNothing})
	for _, tc := range []struct {
		name string
		f    Factory
		want string
	}{
		{"twice", Factory{Type: "factory-test-dup", Configure: configureNothing}, "twice for driver type factory-test-dup"},
		{"no type", Factory{Configure: configureNothing}, "without a type"},
		{"no configure", Factory{Type: "factory-test-nil"}, "without a type or a Configure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Fatalf("Register(%+v) panicked with %v, want %q", tc.f, r, tc.want)
				}
			}()
			Register(tc.f)
		})
	}
	if _, ok := LookupFactory("factory-test-nil"); ok {
		t.Fatal("a refused factory was registered")
	}
}
