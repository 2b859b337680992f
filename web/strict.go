package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// What a client sends is taken one way only: a body is valid UTF-8 and
// names no key twice, a numeric query parameter is plain decimal digits
// given once, and what an error quotes back of the client's input is cut
// to maxQuoted characters.

// maxQuoted bounds the characters of client input an error quotes back.
const maxQuoted = 80

// maxDetail bounds an error's detail, whatever it holds: the last guard
// against echoing a large input that reached an error unclipped.
const maxDetail = 1024

// maxDepth bounds the nesting of a body; no body of the API nests deeper
// than 2.
const maxDepth = 32

// repeatedKey returns an error naming the first key that an object of
// data, valid JSON, holds twice, comparing keys as encoding/json matches
// them to fields (unescaped, letter case folded), or data nested deeper
// than maxDepth. It reads data token by token, and never panics.
func repeatedKey(data []byte) error {
	type level struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder has named
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				f := foldKey(k)
				if stack[n-1].keys[f] {
					return fmt.Errorf("key %s appears twice in one object", quoteShort(k))
				}
				stack[n-1].keys[f], stack[n-1].wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return fmt.Errorf("nested deeper than %d levels", maxDepth)
			}
			if tok == json.Delim('{') {
				stack = append(stack, level{keys: map[string]bool{}, wantKey: true})
			} else {
				stack = append(stack, level{})
			}
			continue
		case json.Delim('}'), json.Delim(']'):
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
		// A value has ended: in an object, a key comes next.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
}

// foldKey is a key as encoding/json compares it with a field name, each
// rune replaced by the smallest of its case-fold set: "ID", "Id" and "id"
// are the same field, and so are "K" and the Kelvin sign.
func foldKey(k string) string {
	var sb strings.Builder
	for _, r := range k {
		lo := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			lo = min(lo, f)
		}
		sb.WriteRune(lo)
	}
	return sb.String()
}

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

// quoteShort quotes what a client sent, cut short, for an error message.
func quoteShort(v string) string {
	return strconv.Quote(clip(v))
}

// clipIn returns msg, an error's text that may hold inputs a client sent
// (an id, a name, a reason), with each input longer than maxQuoted
// characters cut short where it appears, raw or quoted.
func clipIn(msg string, inputs ...string) string {
	for _, in := range inputs {
		if utf8.RuneCountInString(in) <= maxQuoted {
			continue
		}
		msg = strings.ReplaceAll(msg, strconv.Quote(in), quoteShort(in))
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
