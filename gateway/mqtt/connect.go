package mqtt

import (
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// replierID is the client id of the broker's own client that publishes
// replies; no network client may use it, nor mochi's inline client's id.
const replierID = "shadowgate-replies"

// admit decides whether a CONNECT may be let in: its credentials, its will
// and its client id, in that order, so that only a client with the right
// password learns anything about the ACL or the sessions.
func (b *Broker) admit(cl *mochi.Client, pk packets.Packet) packets.Code {
	u, ok := b.authenticate(cl, pk)
	if !ok {
		return packets.ErrBadUsernameOrPassword
	}
	refuse := func(code packets.Code, why string) packets.Code {
		b.refusedConnects.Add(1)
		b.log.Info("mqtt connection refused", "client", cl.ID, "user", u.Name, "remote", cl.Net.Remote, "why", why)
		return code
	}
	if pk.Connect.WillFlag {
		if why := b.judgeWill(u, pk.Connect.WillTopic); why != "" {
			return refuse(packets.ErrNotAuthorized, why)
		}
	}
	if why := b.sessions.claim(b.srv, cl.ID, string(pk.Connect.Username), b.opts.Now()); why != "" {
		return refuse(packets.ErrClientIdentifierNotValid, why)
	}
	return packets.CodeSuccess
}

// judgeWill says why a user may not leave a will on topic, or "". A will is
// judged by the same ACL as a publish, and more strictly: it may not name
// the gateway's output topics, nor its command topics. A will is published
// by the broker at a time nobody chose, after its client has gone, with no
// one left to read a reply; the broker hands it to subscribers without the
// gateway's command path (mochi does not pass wills through OnPublish), so
// a will on cmd/ or run/ would be a command nobody judged or journaled, seen
// by every bridge that listens there. An actuation must be a deliberate,
// attributable request, so a will that would command is refused (fail
// closed), whatever the user's publish filters say.
func (b *Broker) judgeWill(u *access.User, topic string) string {
	if why := topicName(topic); why != "" {
		return "will topic " + quote(topic) + " is not a topic name: " + why
	}
	if rel, under := strings.CutPrefix(topic, b.opts.Prefix); under {
		switch {
		case command.IsOutput(rel):
			return "will topic " + topic + " is the gateway's own output topic"
		case command.IsCommand(rel):
			return "will topic " + topic + " is a command topic: a will may not command"
		}
	}
	if !b.userMay(u, topic, true) {
		return "will topic " + topic + " is not a topic user " + u.Name + " may publish"
	}
	return ""
}

// quote shows at most 80 bytes of a client's string in a message.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", `\0`), "?")
}

// connackCode turns a v5 reason code into the one a client of its
// protocol version understands; mochi maps most, but not 0x87.
func connackCode(cl *mochi.Client, code packets.Code) packets.Code {
	if cl.Properties.ProtocolVersion < 5 && code == packets.ErrNotAuthorized {
		return packets.Err3NotAuthorized
	}
	return code
}

// claimTTL bounds how long a client id is held for a connection that has
// been admitted but whose session the broker has not established yet.
const claimTTL = 30 * time.Second

// sessions binds each client id to the user whose session it is: the
// broker's own sessions say who holds an id once a client is in; claims
// cover the moment between admitting a client and the broker adding it, so
// that two users connecting at once with one id cannot both get in.
type sessions struct {
	// mu guards claims, and orders a claim after the broker's sessions.
	mu     sync.Mutex
	claims map[string]claim
}

type claim struct {
	user string
	at   time.Time
}

// claim says why user may not take client id, or "" after claiming it.
// A user may take over its own session, as MQTT allows; another user may
// neither take it over nor kick its client off.
func (s *sessions) claim(srv *mochi.Server, id, user string, now time.Time) string {
	if id == replierID {
		return "client id " + id + " is the gateway's own"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if existing, ok := srv.Clients.Get(id); ok {
		if existing.Net.Inline {
			return "client id " + quote(id) + " is the gateway's own"
		}
		if string(existing.Properties.Username) != user {
			return "client id " + quote(id) + " holds the session of another user"
		}
	}
	if c, ok := s.claims[id]; ok && c.user != user && now.Sub(c.at) < claimTTL {
		return "client id " + quote(id) + " is being connected by another user"
	}
	if len(s.claims) >= 1024 {
		for k, c := range s.claims {
			if now.Sub(c.at) >= claimTTL {
				delete(s.claims, k)
			}
		}
	}
	s.claims[id] = claim{user: user, at: now}
	return ""
}

// settled drops the claim on id once the broker holds its session.
func (s *sessions) settled(id, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.claims[id]; ok && c.user == user {
		delete(s.claims, id)
	}
}
