package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/web"
)

const approvalsUsage = `usage: shadowgate approvals <list|approve|deny> [flags] [ID]

  list                              the pending approvals
  approve ID [--reason R]           approve one, naming the act it shows
  deny ID --reason R                deny one, saying why

flags:
  --url U         the console (default http://127.0.0.1:8080)
  --token-file F  a bearer token; or SHADOWGATE_TOKEN
  --user U        log in as this user instead; the password comes from
                  SHADOWGATE_PASSWORD or the first line of standard input
`

// apiClient talks to the gateway's HTTP API as a token or a logged-in user.
type apiClient struct {
	base  string
	token string
	csrf  string
	c     *http.Client
}

func newAPIClient(base, tokenFile, user string, stdin io.Reader) (*apiClient, error) {
	jar, _ := cookiejar.New(nil)
	a := &apiClient{base: strings.TrimSuffix(base, "/"), c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	switch {
	case user != "":
		pw := os.Getenv("SHADOWGATE_PASSWORD")
		if pw == "" {
			line, err := bufio.NewReader(stdin).ReadString('\n')
			if err != nil && line == "" {
				return nil, errors.New("no password: set SHADOWGATE_PASSWORD or give it on standard input")
			}
			pw = strings.TrimRight(line, "\r\n")
		}
		return a, a.login(user, pw)
	case tokenFile != "":
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		a.token = strings.TrimSpace(string(b))
	default:
		a.token = os.Getenv("SHADOWGATE_TOKEN")
		if a.token == "" {
			return nil, errors.New("give --token-file, SHADOWGATE_TOKEN or --user")
		}
	}
	return a, nil
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf" content="([^"]*)">`)

func (a *apiClient) login(user, password string) error {
	resp, err := a.c.Get(a.base + "/login")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfMeta.FindSubmatch(body)
	if m == nil {
		return errors.New("the login page has no CSRF token")
	}
	resp, err = a.c.PostForm(a.base+"/login", url.Values{"_csrf": {string(m[1])}, "user": {user}, "password": {password}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("login as %s refused (HTTP %d)", user, resp.StatusCode)
	}
	// The next page carries the token for this session's requests.
	resp, err = a.c.Get(a.base + "/approvals")
	if err != nil {
		return err
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if m = csrfMeta.FindSubmatch(body); m == nil {
		return errors.New("the console page has no CSRF token")
	}
	a.csrf = string(m[1])
	return nil
}

// apiErr is an error the API answered, with its status.
type apiErr struct {
	Status int
	Detail string
}

func (e *apiErr) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Detail) }

func (a *apiClient) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if a.csrf != "" {
		req.Header.Set("X-CSRF-Token", a.csrf)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct{ Detail string }
		_ = json.Unmarshal(b, &e)
		if e.Detail == "" {
			e.Detail = strings.TrimSpace(string(b))
		}
		return &apiErr{Status: resp.StatusCode, Detail: e.Detail}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func approvalsCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, approvalsUsage)
		return exitUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("approvals "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "the console")
	tokenFile := fs.String("token-file", "", "a file holding a bearer token")
	user := fs.String("user", "", "log in as this user")
	reason := fs.String("reason", "", "why (needed to deny)")
	var rest []string
	for i := 1; i < len(args); i++ { // flags may follow the id
		if !strings.HasPrefix(args[i], "-") {
			rest = append(rest, args[i])
			continue
		}
		if err := fs.Parse(args[i:]); err != nil {
			return exitUsage
		}
		rest = append(rest, fs.Args()...)
		break
	}
	switch {
	case sub == "list" && len(rest) == 0:
	case (sub == "approve" || sub == "deny") && len(rest) == 1:
	default:
		fmt.Fprintf(stderr, "shadowgate approvals: bad arguments\n\n%s", approvalsUsage)
		return exitUsage
	}
	a, err := newAPIClient(*base, *tokenFile, *user, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "shadowgate approvals:", err)
		return exitCode(err)
	}
	var pending []runtime.Approval
	if err := a.do("GET", "/api/v1/approvals", nil, &pending); err != nil {
		fmt.Fprintln(stderr, "shadowgate approvals:", err)
		return exitCode(err)
	}
	if sub == "list" {
		w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tACT\tASKED BY\tWHY\tEXPIRES")
		for _, ap := range pending {
			fmt.Fprintf(w, "%s\t%s\t%s via %s\t%s\t%s\n", ap.ID, act(ap), ap.Principal, ap.Origin, ap.Why,
				time.Until(ap.Expires).Round(time.Second))
		}
		_ = w.Flush()
		return exitOK
	}
	id := rest[0]
	var ap *runtime.Approval
	for i := range pending {
		if pending[i].ID == id {
			ap = &pending[i]
		}
	}
	if ap == nil {
		fmt.Fprintf(stderr, "shadowgate approvals: %s is not pending\n", id)
		return exitRefused
	}
	if sub == "deny" && strings.TrimSpace(*reason) == "" {
		fmt.Fprintln(stderr, "shadowgate approvals deny: give --reason")
		return exitUsage
	}
	body := map[string]any{"decision": sub, "reason": *reason, "device": ap.Device, "capability": ap.Capability,
		"value": ap.Value, "mode": ap.Mode}
	var out runtime.Approval
	if err := a.do("POST", "/api/v1/approvals/"+id, body, &out); err != nil {
		fmt.Fprintln(stderr, "shadowgate approvals:", err)
		return exitCode(err)
	}
	fmt.Fprintf(stdout, "%s (%s): %s\n", out.ID, act(out), out.Status)
	return exitOK
}

func act(ap runtime.Approval) string {
	if ap.Kind == "mode_change" {
		return "mode " + ap.Mode
	}
	return ap.Device + "." + ap.Capability + " = " + ap.Value.String()
}

func exitCode(err error) int {
	var e *apiErr
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusForbidden, http.StatusConflict, http.StatusUnauthorized:
			return exitRefused
		case http.StatusBadRequest:
			return exitUsage
		}
	}
	return exitUnavailable
}

// hashPassword reads a password from the first line of stdin and prints
// its bcrypt hash.
func hashPassword(stdin io.Reader, stdout, stderr io.Writer) int {
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(stderr, "shadowgate hash-password: give the password on standard input")
		return exitUsage
	}
	h, err := access.HashPassword([]byte(strings.TrimRight(line, "\r\n")))
	if err != nil {
		fmt.Fprintln(stderr, "shadowgate hash-password:", err)
		return exitUsage
	}
	fmt.Fprintln(stdout, string(h))
	return exitOK
}

// hashToken makes a bearer token and prints it with the hash to configure.
func hashToken(stdout io.Writer) int {
	tok := web.NewToken()
	fmt.Fprintf(stdout, "token:      %s\ntoken_hash: %s\n", tok, web.HashToken(tok))
	return exitOK
}
