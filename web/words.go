package web

import (
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// stateText shows a capability's value for people, with its unit: a
// bool as ON or OFF, a number with its unit, "unknown" for none.
func stateText(v any, unit string) string {
	var x value.Value
	switch v := v.(type) {
	case value.Value:
		x = v
	case *value.Value:
		if v != nil {
			x = *v
		}
	case *devices.Reading:
		if v != nil {
			x = v.Value
		}
	}
	switch x.Type {
	case value.TypeNone:
		return "unknown"
	case value.TypeBool:
		if x.Bool {
			return "ON"
		}
		return "OFF"
	case value.TypeNumber:
		if unit != "" {
			return x.String() + " " + unit
		}
	}
	return x.String()
}

// decisionText says a person's answer in words.
func decisionText(d runtime.Decision) string {
	switch d {
	case runtime.Approve:
		return "Approved"
	case runtime.ApproveAndRule:
		return "Approved with a rule"
	case runtime.Deny:
		return "Denied"
	}
	return string(d)
}
