package gateway

import (
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/shadowgate/shadowgate/gateway/mqtt"
)

// IntegrationsConfig connects the gateway to tools people already run.
// Each is off unless configured.
type IntegrationsConfig struct {
	HomeAssistant *HomeAssistantConfig `yaml:"homeassistant"`
}

// HomeAssistantConfig announces every capability to Home Assistant by MQTT
// discovery on the embedded broker. Every key is restart-only: a reload
// names "integrations" as waiting for a restart.
type HomeAssistantConfig struct {
	// Enabled must be true to announce anything; the other keys are
	// checked either way.
	Enabled bool `yaml:"enabled"`
	// Prefix is Home Assistant's discovery prefix. Default homeassistant.
	Prefix string `yaml:"prefix"`
	// ConsoleURL is the console's address as Home Assistant's users reach
	// it, http:// or https://, for each device's "Visit" link. Default: the
	// console's listen address, with this machine's host name when it
	// listens on every interface.
	ConsoleURL string `yaml:"console_url"`
	// DeviceClasses sets the device class of a capability, by
	// "device.capability", over the one its unit suggests: humidity for a
	// "%", water for a meter in litres, outlet for a switch.
	DeviceClasses map[string]string `yaml:"device_classes"`
}

// haPrefixPattern is a discovery prefix: topic levels of [A-Za-z0-9_-].
var haPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$`)

// homeAssistant checks the Home Assistant integration, turned on or not,
// and sets it on the broker's options when it is on.
func (c *checker) homeAssistant(p path, hc *HomeAssistantConfig, b *Built) {
	if hc == nil {
		return
	}
	if hc.Enabled && b.MQTT == nil {
		c.errf(p.with("enabled"), "Home Assistant discovery needs the embedded broker, and mqtt.enabled is false")
	}
	gatewayPrefix := "shadowgate/" + b.GatewayID + "/"
	if b.MQTT != nil {
		gatewayPrefix = b.MQTT.Prefix
	}
	ha := &mqtt.HomeAssistant{Prefix: hc.Prefix, GatewayID: b.GatewayID, Devices: b.Devices,
		Models: map[string]string{}, Classes: map[string]string{}}
	if ha.Prefix == "" {
		ha.Prefix = "homeassistant"
	}
	switch {
	case !haPrefixPattern.MatchString(ha.Prefix):
		c.errf(p.with("prefix"), "%q is not a discovery prefix: topic levels of letters, digits, '-' and '_', without a leading or trailing /", ha.Prefix)
	case strings.HasPrefix(ha.Prefix+"/", gatewayPrefix) || strings.HasPrefix(gatewayPrefix, ha.Prefix+"/"):
		c.errf(p.with("prefix"), "%q overlaps the gateway's own topics (%s); Home Assistant's prefix is usually homeassistant", ha.Prefix, gatewayPrefix)
	}
	ha.ConsoleURL = c.consoleURL(p.with("console_url"), hc.ConsoleURL, b)
	types := map[string]string{}
	for _, d := range b.Drivers {
		types[d.Name] = d.Type
	}
	for _, d := range b.Devices {
		if t := types[d.Driver]; t != "" {
			ha.Models[d.ID] = t
		}
	}
	keys := make([]string, 0, len(hc.DeviceClasses))
	for k := range hc.DeviceClasses {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		class := hc.DeviceClasses[k]
		kp := p.with("device_classes", k)
		cp, ok := c.caps[k]
		if !ok {
			c.errf(kp, "%s is not a capability of a configured device (write device.capability)", k)
			continue
		}
		if err := mqtt.CheckDeviceClass(cp, class); err != nil {
			c.errf(kp, "%v", err)
			continue
		}
		ha.Classes[k] = class
	}
	if hc.Enabled && b.MQTT != nil {
		b.MQTT.HomeAssistant = ha
	}
}

// consoleURL checks the console's address for Home Assistant, or makes one
// from the console's listen address; "" when there is no console.
func (c *checker) consoleURL(p path, s string, b *Built) string {
	if s != "" {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			c.errf(p, "%q is not the console's address: write it like http://gateway.local:8080", s)
			return ""
		}
		return strings.TrimRight(s, "/")
	}
	if b.Web == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(b.Web.Listen)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if host, err = os.Hostname(); err != nil || host == "" {
			return ""
		}
	}
	scheme := "http"
	if b.Web.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
