package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// identity is who makes a request.
type identity struct {
	User string
	Role access.Role
	// Principal is how the engine knows them: "console:ann", "api:ci".
	Principal string
	Token     bool
}

const (
	sessionCookie = "sg_session"
	ctxIdentity   = "identity"
)

func userOf(c echo.Context) *identity {
	id, _ := c.Get(ctxIdentity).(*identity)
	return id
}

// isPage reports whether the request is for a console page, not the API.
func isPage(c echo.Context) bool {
	p := c.Request().URL.Path
	return !strings.HasPrefix(p, "/api/") && p != "/metrics" && p != "/healthz" && p != "/readyz"
}

// HashToken returns the stored form of a bearer token.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a random bearer token.
func NewToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// identify finds who makes the request: a bearer token or a session. It
// does not refuse anyone; need does.
func (s *Server) identify(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
			// A wrong token is a failed login: counted per address with
			// the console's, summed up in the journal, and locked out.
			ip := c.RealIP()
			if s.limiter.Blocked(ip) {
				s.limiter.Failed("api", ip, "", "too many failures from this address")
				return problem(http.StatusTooManyRequests, "too many failed logins from this address; wait a minute")
			}
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				s.limiter.Failed("api", ip, "", "an Authorization header that is not Bearer")
				return problem(http.StatusUnauthorized, "the Authorization header must be Bearer <token>")
			}
			hash := HashToken(strings.TrimSpace(tok))
			for _, t := range s.opts.Tokens {
				if subtle.ConstantTimeCompare([]byte(hash), []byte(t.Hash)) == 1 {
					if s.agentToken(t.Name) && c.Request().URL.Path != MCPPath {
						// An agent's checks (mcp.modes, mcp:* rules, its
						// rate) hold only on /mcp: elsewhere its token
						// would command, change the mode and answer
						// alarms as api:<name>, beyond them.
						return problem(http.StatusForbidden, "token "+t.Name+" is an agent's (named in mcp.tokens): it works only on "+
							MCPPath+"; give an API client a token of its own")
					}
					c.Set(ctxIdentity, &identity{User: t.Name, Role: t.Role, Principal: "api:" + t.Name, Token: true})
					return next(c)
				}
			}
			s.limiter.Failed("api", ip, "", "unknown bearer token")
			return problem(http.StatusUnauthorized, "unknown bearer token")
		}
		if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
			sess, ok, err := s.opts.Sessions.Get(ck.Value, s.opts.Now())
			if err != nil {
				return s.internal(c, http.StatusServiceUnavailable, "sessions cannot be read", err)
			}
			if ok {
				role, _ := access.ParseRole(sess.Role)
				c.Set(ctxIdentity, &identity{User: sess.User, Role: role, Principal: "console:" + sess.User})
			}
		}
		return next(c)
	}
}

// agentToken reports whether the token named name is an agent's: named
// in MCPOptions.Tokens. Such a token is refused on every route but
// [MCPPath].
func (s *Server) agentToken(name string) bool {
	return s.opts.MCP != nil && slices.Contains(s.opts.MCP.Tokens, name)
}

// need refuses a request without a login (401) or without the role (403).
func need(min access.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := userOf(c)
			if id == nil {
				return problem(http.StatusUnauthorized, "log in, or send Authorization: Bearer <token>")
			}
			if !id.Role.AtLeast(min) {
				return problem(http.StatusForbidden, "this needs the "+min.String()+" role; "+id.User+" is "+article(id.Role.String())+" "+
					id.Role.String())
			}
			return next(c)
		}
	}
}

// csrf protects cookie-authenticated requests. A bearer-token request
// carries no cookie a browser could replay, so it needs no token.
func (s *Server) csrf() echo.MiddlewareFunc {
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		Skipper: func(c echo.Context) bool {
			if id := userOf(c); id != nil && id.Token {
				return true // a bearer token is no cookie a browser could replay
			}
			// An API request with no session at all is refused as
			// unauthenticated (401) by need, not as a CSRF failure.
			_, err := c.Cookie(sessionCookie)
			return err != nil && strings.HasPrefix(c.Request().URL.Path, "/api/")
		},
		TokenLookup:    "header:X-CSRF-Token,form:_csrf",
		CookieName:     "sg_csrf",
		CookiePath:     "/",
		CookieHTTPOnly: true,
		CookieSameSite: http.SameSiteStrictMode,
		ErrorHandler: func(err error, c echo.Context) error {
			return problem(http.StatusForbidden, "missing or wrong CSRF token: a request made with the login cookie sends the sg_csrf cookie's value in the X-CSRF-Token header (a form, in its _csrf field); a script is simpler with an API token (Authorization: Bearer)")
		},
	})
}

// csrfToken is the token for forms and scripts on this page.
func csrfToken(c echo.Context) string {
	if t, ok := c.Get("csrf").(string); ok {
		return t
	}
	return ""
}

// formToken is the CSRF token a form repeated on a page (a device card's)
// carries: none when the page was asked for by a browser that sends
// Sec-Fetch-Site. Such a browser's form posts are judged by that header
// (same-origin is let through, cross-site refused), and the token it is
// given is a placeholder that no check compares. A browser that does not
// send it is given the session's token, in every form, so that a form
// works without the script there too.
func formToken(page string) string {
	if page == middleware.CSRFUsingSecFetchSite {
		return ""
	}
	return page
}

func (s *Server) loginPage(c echo.Context) error {
	if userOf(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return s.pages.render(c, http.StatusOK, "login", pageData{Title: "Log in", Next: safeNext(c.QueryParam("next"))})
}

func (s *Server) login(c echo.Context) error {
	ip := c.RealIP()
	name := c.FormValue("user")
	next := safeNext(c.FormValue("next"))
	if s.limiter.Blocked(ip) {
		s.limiter.Failed("console", ip, name, "too many failures from this address")
		return problem(http.StatusTooManyRequests, "too many failed logins from this address; wait a minute")
	}
	u, ok := s.opts.Users.Check(name, []byte(c.FormValue("password")))
	if !ok {
		// Journaled as a summary per address and window, not one by one.
		s.limiter.Failed("console", ip, name, "wrong user or password")
		return s.pages.render(c, http.StatusUnauthorized, "login", pageData{Title: "Log in", Next: next,
			Error: "Wrong user or password."})
	}
	s.limiter.Succeeded(ip)
	var b [32]byte
	_, _ = rand.Read(b[:])
	cookie := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.opts.Now()
	if err := s.opts.Sessions.Put(cookie, store.Session{User: u.Name, Role: u.Role.String(), Remote: ip, Created: now,
		Expires: now.Add(s.opts.SessionTTL)}); err != nil {
		return s.internal(c, http.StatusServiceUnavailable, "the session cannot be stored", err)
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.opts.TLS != nil, MaxAge: int(s.opts.SessionTTL.Seconds())})
	_, _ = s.eng.Note(c.Request().Context(), runtime.KindLogin, "", runtime.LoginBody{
		Surface: "console", User: u.Name, Remote: ip, Action: "login"})
	return c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		_ = s.opts.Sessions.Delete(ck.Value)
		s.endStreams(ck.Value)
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	if id := userOf(c); id != nil {
		_, _ = s.eng.Note(c.Request().Context(), runtime.KindLogin, "", runtime.LoginBody{
			Surface: "console", User: id.User, Remote: c.RealIP(), Action: "logout"})
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// noteFailures journals a summary of failed logins from one address in
// one window: how many, as whom, never a password or a token.
func (s *Server) noteFailures(sum access.Summary) {
	// Its own context: the request that closed the window may be gone.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.eng.Note(ctx, runtime.KindLogin, "", command.LoginFailures(sum)); err != nil {
		s.log.Warn("failed logins not journaled", "remote", sum.Remote, "failures", sum.Failures, "error", err)
	}
}

// article is "a" or "an" before word: an admin, an operator, a viewer.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// watchSession returns a channel that is closed when the session with the
// cookie logs out, and the function that stops watching.
func (s *Server) watchSession(cookie string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ends[cookie] == nil {
		s.ends[cookie] = map[chan struct{}]struct{}{}
	}
	s.ends[cookie][ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.ends[cookie][ch]; ok {
			delete(s.ends[cookie], ch)
			if len(s.ends[cookie]) == 0 {
				delete(s.ends, cookie)
			}
		}
	}
}

// endStreams ends the event streams of the session with the cookie.
func (s *Server) endStreams(cookie string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.ends[cookie] {
		close(ch)
	}
	delete(s.ends, cookie)
}
