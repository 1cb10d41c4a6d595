package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/idview"
)

// endpoint is what the JSON API knows of a path before its handler runs:
// the query parameters it takes and whether it hands out IDs. Checking
// both first means a request that breaks a rule is answered before
// anything is taken.
type endpoint struct {
	// path is the path pattern as the errors name it
	// ("/v1/segment/{tag}/next").
	path string
	// params are the query parameters the path takes (case-sensitive),
	// each at most once and never empty; none when empty.
	params []string
	// issuing marks a path that takes IDs: only GET reaches it, a HEAD is
	// 405 (ServeMux lets a GET pattern answer HEAD, which would take IDs
	// for an answer nobody reads).
	issuing bool
}

// checked wraps an API handler with the endpoint's rules: the method of an
// issuing path, then the query's names. It allocates nothing for a request
// that keeps them.
func (e endpoint) checked(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if e.issuing && r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			return apiErrorf(http.StatusMethodNotAllowed, codeMethod,
				"method %s is not allowed on %s: it hands out IDs, so only GET is (a HEAD would take IDs for nothing)", clip(r.Method), e.path)
		}
		if r.URL.RawQuery != "" {
			if err := checkQuery(r.URL.RawQuery, e.path, e.params); err != nil {
				return err
			}
		}
		return h(w, r)
	}
}

// checkQuery checks a raw query against the parameters a path takes: every
// name is one of params (case-sensitive), none is given twice and none is
// empty. Escaped names and values are decoded as net/url decodes them
// (url.ParseQuery: %XX, '+' for a space; ';' is refused) before the same
// rules apply. Empty pieces ("a=1&&b=2", a trailing '&') are skipped, as
// net/url skips them. A query without escapes is checked without
// allocating.
func checkQuery(raw, path string, params []string) error {
	var seen uint64 // bit i: params[i] was given
	for raw != "" {
		var piece string
		piece, raw, _ = strings.Cut(raw, "&")
		if piece == "" {
			continue
		}
		key, value, _ := strings.Cut(piece, "=")
		if strings.ContainsAny(piece, "%+;") {
			if strings.IndexByte(piece, ';') >= 0 {
				return apiErrorf(http.StatusBadRequest, codeInvalid, "bad query: %q has a ';' (separate parameters with '&')", clip(piece))
			}
			var err error
			if key, err = url.QueryUnescape(key); err != nil {
				return apiErrorf(http.StatusBadRequest, codeInvalid, "bad query: %v", err)
			}
			if value, err = url.QueryUnescape(value); err != nil {
				return apiErrorf(http.StatusBadRequest, codeInvalid, "bad query: %v", err)
			}
		}
		i := 0
		for i < len(params) && params[i] != key {
			i++
		}
		switch {
		case i == len(params):
			return unknownParam(key, path, params)
		case seen&(1<<i) != 0:
			return apiErrorf(http.StatusBadRequest, codeInvalid, "query parameter %s is given twice: give it once", key)
		case value == "":
			return apiErrorf(http.StatusBadRequest, codeInvalid, "query parameter %s is empty: give it a value (%s=…) or leave it out", key, key)
		}
		seen |= 1 << i
	}
	return nil
}

// unknownParam is the error for a query parameter path does not take.
func unknownParam(key, path string, params []string) error {
	takes := path + " takes no query parameters"
	if len(params) > 0 {
		takes = path + " takes " + list(params, "and")
	}
	hint := ""
	for _, p := range params {
		if strings.EqualFold(p, key) {
			hint = fmt.Sprintf(" (names are case-sensitive: %s)", p)
		}
	}
	return apiErrorf(http.StatusBadRequest, codeInvalid, "unknown query parameter %q%s; %s", clip(key), hint, takes)
}

// list joins names as "a", "a and b", "a, b and c" (with conj for "and").
func list(names []string, conj string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// wholeNumber reads text as a whole number from lo to hi, the value of the
// parameter or field name: plain decimal digits, with a '-' in front for a
// negative number (which is then out of range when lo ≥ 0). A number too
// large for 64 bits is out of range too, not "not a number". The errors
// say which it is and give the range.
func wholeNumber(name, text string, lo, hi int64) (int64, error) {
	digits := strings.TrimPrefix(text, "-")
	ok := digits != ""
	for i := 0; i < len(digits) && ok; i++ {
		ok = digits[i] >= '0' && digits[i] <= '9'
	}
	if !ok {
		return 0, apiErrorf(http.StatusBadRequest, codeInvalid, "%s %q is not a whole number: want %d to %d", name, clip(text), lo, hi)
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, apiErrorf(http.StatusBadRequest, codeInvalid, "%s %q is not a whole number: want %d to %d", name, clip(text), lo, hi)
	}
	if err != nil || n < lo || n > hi {
		return 0, apiErrorf(http.StatusBadRequest, codeInvalid, "%s %s is out of range: want %d to %d", name, clip(text), lo, hi)
	}
	return n, nil
}

// idsQuery is what a request for IDs asks for, read and checked before any
// ID is taken.
type idsQuery struct {
	n       int64 // how many IDs
	ranges  bool  // ?format=ranges
	numeric bool  // ?format=numeric: a series' numbers in their numeric form
	text    bool  // Accept: text/plain
	// uuid is set by ?format=uuid7, typeid or ulid (Snowflake IDs only),
	// and prefix is the TypeID prefix.
	uuid   idview.Form
	prefix string
}

// idsQuery reads and checks count, format and Accept of a request for IDs
// (of tag, "" for Snowflake IDs) answered masked when mk is not nil. The
// query's names were checked by the endpoint. It allocates nothing for a
// request it accepts.
func (s *Server) idsQuery(r *http.Request, tag string, mk *masking) (idsQuery, error) {
	q := idsQuery{n: 1, text: wantsText(r)}
	if v := query(r, "count"); v != "" {
		n, err := wholeNumber("count", v, 1, int64(s.cfg.MaxCount))
		if err != nil {
			return q, err
		}
		q.n = n
	}
	switch format := query(r, "format"); format {
	case "", "ids":
	case "ranges":
		q.ranges = true
	case "numeric":
		if tag == "" {
			return q, apiErrorf(http.StatusBadRequest, codeInvalid, "format=numeric is for the numbers of a series tag; Snowflake IDs are numbers already")
		}
		q.numeric = true
	case "uuid7", "typeid", "ulid":
		if tag != "" {
			return q, apiErrorf(http.StatusBadRequest, codeInvalid, "format=%s is for Snowflake IDs (/v1/snowflake/next): segment IDs%s carry no time", format, forTag(tag))
		}
	default:
		return q, apiErrorf(http.StatusBadRequest, codeInvalid, "format %q: want ids or ranges (or uuid7, typeid or ulid for Snowflake IDs; numeric for a series tag)", clip(format))
	}
	if tag == "" {
		prefix := query(r, "prefix") // never empty when given (checkQuery)
		var err error
		if q.uuid, q.prefix, err = s.uuids.query(query(r, "format"), prefix, prefix != ""); err != nil {
			return q, err
		}
	}
	switch {
	case q.ranges && mk != nil:
		return q, apiErrorf(http.StatusBadRequest, codeInvalid, "format=ranges is not available: this server hands out masked IDs%s, which do not form runs", forTag(tag))
	case q.ranges && q.text:
		return q, apiErrorf(http.StatusBadRequest, codeInvalid, "format=ranges answers JSON, but the request accepts only text/plain: drop format=ranges or accept application/json")
	}
	return q, nil
}

// query returns the value of key in the request's query, without parsing
// the query into a map when there is none (the single-ID hot path). The
// endpoint checked the query's names first (checkQuery), so a key is there
// at most once.
func query(r *http.Request, key string) string {
	q := r.URL.RawQuery
	if q == "" {
		return ""
	}
	if strings.ContainsAny(q, "%+;") { // escapes: let net/url decode them
		return r.URL.Query().Get(key)
	}
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}
