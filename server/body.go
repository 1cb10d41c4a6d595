package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"strings"
)

// maxBody bounds a JSON request body; a larger one is 413
// payload_too_large.
const maxBody = 64 << 10

// member is one key of a JSON object body and its value, undecoded.
type member struct {
	key   string
	value json.RawMessage
}

// readObject reads a request's JSON body: one object, nothing after it, no
// key twice, sent as application/json (a charset, if given, must be
// utf-8), at most maxBody bytes. It returns the object's members in order;
// the caller checks the keys it knows and refuses the rest, so that
// nothing sent is ignored. With optional set, a request without a body
// (no bytes at all) is fine and gives no members.
func readObject(w http.ResponseWriter, r *http.Request, optional bool) ([]member, error) {
	if r.ContentLength > maxBody {
		return nil, tooLarge()
	}
	if optional && r.ContentLength == 0 {
		return nil, nil
	}
	ctErr := checkJSONType(r.Header)
	if ctErr != nil && !optional {
		return nil, ctErr
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, apiErrorf(http.StatusRequestTimeout, codeTimeout, "the body did not arrive within the read timeout (--read-timeout): send it whole, at once")
		}
		return nil, apiErrorf(http.StatusBadRequest, codeInvalid, "reading the body: %v", err)
	}
	switch {
	case len(body) == 0 && optional:
		return nil, nil
	case ctErr != nil:
		return nil, ctErr
	case len(bytes.TrimSpace(body)) == 0:
		return nil, apiErrorf(http.StatusBadRequest, codeInvalid, "empty body: want a JSON object")
	}
	return parseObject(body)
}

func tooLarge() error {
	return apiErrorf(http.StatusRequestEntityTooLarge, codeBodyTooLarge, "body larger than %d bytes", maxBody)
}

// checkJSONType checks that a body is sent as application/json.
func checkJSONType(h http.Header) error {
	ct := h.Get("Content-Type")
	if ct == "" {
		return apiErrorf(http.StatusUnsupportedMediaType, codeMediaType, "no Content-Type: send the body as application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return apiErrorf(http.StatusUnsupportedMediaType, codeMediaType, "Content-Type %q: %v; send the body as application/json", clip(ct), err)
	case mt != "application/json":
		return apiErrorf(http.StatusUnsupportedMediaType, codeMediaType, "Content-Type %q is not supported: send the body as application/json", clip(ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return apiErrorf(http.StatusUnsupportedMediaType, codeMediaType, "charset %q is not supported: JSON is utf-8", clip(cs))
	}
	return nil
}

// parseObject splits body, which must be one JSON object and nothing else
// (space aside), into its members, refusing a key given twice.
func parseObject(body []byte) ([]member, error) {
	bad := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return apiErrorf(http.StatusBadRequest, codeInvalid, "bad JSON body: it ends before the object does")
		}
		return apiErrorf(http.StatusBadRequest, codeInvalid, "bad JSON body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, bad(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, apiErrorf(http.StatusBadRequest, codeInvalid, "bad JSON body: want an object ({…}), not %s", clip(string(bytes.TrimSpace(body))))
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		key, _ := tok.(string) // inside an object, the decoder gives keys as strings
		for _, m := range members {
			if m.key == key {
				return nil, apiErrorf(http.StatusBadRequest, codeInvalid, "bad JSON body: key %q is given twice: give it once", clip(key))
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, bad(err)
		}
		members = append(members, member{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, bad(err)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return nil, apiErrorf(http.StatusBadRequest, codeInvalid,
			"bad JSON body: data after the object (%s): send one object", clip(string(rest)))
	}
	return members, nil
}

// stringField reads a member that must be a JSON string.
func stringField(m member) (string, error) {
	var s string
	if len(m.value) == 0 || m.value[0] != '"' || json.Unmarshal(m.value, &s) != nil {
		return "", apiErrorf(http.StatusBadRequest, codeInvalid, "%s must be a JSON string, not %s", m.key, clip(string(m.value)))
	}
	return s, nil
}

// wholeField reads a member that must be a whole number from lo to hi: a
// JSON number of plain digits, or, with quoted set (IDs and ID bounds,
// which a JavaScript number cannot hold), a JSON string of them too.
func wholeField(m member, lo, hi int64, quoted bool) (int64, error) {
	text := string(m.value)
	want := "a whole number"
	if quoted {
		want = "a whole number (a JSON number or a string of digits)"
	}
	switch {
	case len(text) == 0:
	case text[0] == '"' && quoted:
		if err := json.Unmarshal(m.value, &text); err != nil {
			break
		}
		return wholeNumber(m.key, text, lo, hi)
	case text[0] == '-' || text[0] >= '0' && text[0] <= '9':
		return wholeNumber(m.key, text, lo, hi)
	}
	return 0, apiErrorf(http.StatusBadRequest, codeInvalid, "%s must be %s from %d to %d, not %s", m.key, want, lo, hi, clip(text))
}

// maxID is the largest max_id (or floor) a body may give.
const maxID = math.MaxInt64
