package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/gateway/command"
)

// What a client sends is taken one way only: a body is valid UTF-8 and
// names no key twice (command.RepeatedKey, as on MQTT), a numeric query
// parameter is plain decimal digits given once, and what an error quotes
// back of the client's input is cut to maxQuoted characters
// (command.QuoteShort cuts to the same).

// maxQuoted bounds the characters of client input an error quotes back.
const maxQuoted = 80

// maxDetail bounds an error's detail, whatever it holds: the last guard
// against echoing a large input that reached an error unclipped.
const maxDetail = 1024

// checkBody refuses a body that is not valid UTF-8: decoded, each bad
// byte would read as U+FFFD, so that different ids would be one.
func checkBody(body []byte) error {
	if !utf8.Valid(body) {
		return problem(http.StatusBadRequest, "the body is not valid UTF-8 text")
	}
	return nil
}

// clip cuts what a client sent to maxQuoted characters, with an ellipsis,
// for an error message that shows it unquoted.
func clip(v string) string {
	v = strings.ToValidUTF8(v, "?")
	if utf8.RuneCountInString(v) > maxQuoted {
		v = string([]rune(v)[:maxQuoted]) + "…"
	}
	return v
}

// clipIn returns msg, an error's text that may hold inputs a client sent
// (an id, a name, a reason), with each input longer than maxQuoted
// characters cut short where it appears, raw or quoted.
func clipIn(msg string, inputs ...string) string {
	for _, in := range inputs {
		if utf8.RuneCountInString(in) <= maxQuoted {
			continue
		}
		msg = strings.ReplaceAll(msg, strconv.Quote(in), command.QuoteShort(in))
		msg = strings.ReplaceAll(msg, in, clip(in))
	}
	return clipDetail(msg)
}

// clipDetail cuts an error's detail to maxDetail bytes.
func clipDetail(d string) string {
	if len(d) <= maxDetail {
		return d
	}
	return strings.ToValidUTF8(d[:maxDetail], "") + "…"
}

// numParam returns the numeric query parameter name ("" when absent),
// refusing one given more than once: which one is meant cannot be told.
func numParam(c echo.Context, name string) (string, error) {
	vs := c.QueryParams()[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", problem(http.StatusBadRequest, fmt.Sprintf(`query %q: given %d times; give it once`, name, len(vs)))
}

// digits reports whether v is plain decimal digits: no sign, no space,
// no underscore, no prefix.
func digits(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}
