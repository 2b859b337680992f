package mqtt

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestSubscribingWhileRetainedAreInFlight: a client that subscribes one
// filter at a time, at QoS 1, while the retained messages of its first
// are in flight, gets every subscription and their retained messages.
// Client and broker both number their packets from 1, and the broker's
// library took the client's SUBSCRIBE 2 for its own PUBLISH 2: the
// subscription failed, and nothing of it came (a bridge, and Home
// Assistant, subscribe this way).
func TestSubscribingWhileRetainedAreInFlight(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	for round := range 5 {
		c := gw.mustClient("hass", "hass-password")
		got := make(chan string, 256)
		h := func(_ paho.Client, m paho.Message) { got <- m.Topic() }
		for _, f := range []string{"homeassistant/+/+/config", prefix + "ha/#", prefix + "status"} {
			tok := c.Subscribe(f, 1, h)
			if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("round %d: subscribing %s: %v", round, f, tok.Error())
			}
			if code := tok.(*paho.SubscribeToken).Result()[f]; code != 1 {
				t.Fatalf("round %d: subscribing %s: SUBACK %#x, want QoS 1 granted", round, f, code)
			}
		}
		seen := map[string]bool{}
		for deadline := time.After(10 * time.Second); !seen["config"] || !seen["ha"] || !seen["status"]; {
			select {
			case topic := <-got:
				switch {
				case strings.HasSuffix(topic, "/config"):
					seen["config"] = true
				case strings.HasPrefix(topic, prefix+"ha/"):
					seen["ha"] = true
				case topic == prefix+"status":
					seen["status"] = true
				}
			case <-deadline:
				t.Fatalf("round %d: the retained messages of each filter did not all come: %v", round, seen)
			}
		}
		c.Disconnect(0)
	}
}
