package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// Didi Tinyid's HTTP paths (its IdContronller under the context path
// /tinyid), answering as Tinyid answers, so that its clients switch by
// changing a host name. They take bizType, token and (nextId, nextIdSimple)
// batchSize in the query, by GET or POST (Tinyid's Java client POSTs).
const tinyidPrefix = "/tinyid/id/"

// Tinyid's answer codes (its Response and ErrorCode).
const (
	tinyidOK       = 200
	tinyidTokenErr = 5
	tinyidSysErr   = 6
)

// tinyidTokenTTL is how long Tinyid's token table is trusted before it is
// read again (Tinyid reads it once a minute).
const tinyidTokenTTL = time.Minute

// tinyidTokens are Tinyid's tokens (tiny_id_token), read through load and
// kept for tinyidTokenTTL; a failed reload keeps the tokens read before.
type tinyidTokens struct {
	load func(context.Context) (map[string][]string, error)
	set  atomic.Pointer[tinyidTokenSet]
	mu   sync.Mutex // one reload at a time
}

type tinyidTokenSet struct {
	bizTypes map[string]map[string]bool // token → the biz_types it may use
	read     time.Time
}

// allows reports whether token may use bizType by Tinyid's table.
func (t *tinyidTokens) allows(ctx context.Context, token, bizType string) (bool, error) {
	set := t.set.Load()
	if set == nil || time.Since(set.read) > tinyidTokenTTL {
		if set == nil {
			t.mu.Lock() // the first read: everyone waits for it
		} else if !t.mu.TryLock() {
			return set.bizTypes[token][bizType], nil // another request reloads
		}
		fresh, err := t.reload(ctx)
		t.mu.Unlock()
		switch {
		case err == nil:
			set = fresh
		case set == nil:
			return false, err
		}
	}
	return set.bizTypes[token][bizType], nil
}

// reload reads the token table; t.mu is held.
func (t *tinyidTokens) reload(ctx context.Context) (*tinyidTokenSet, error) {
	if set := t.set.Load(); set != nil && time.Since(set.read) <= tinyidTokenTTL {
		return set, nil // read by the request that held the lock before
	}
	all, err := t.load(ctx)
	if err != nil {
		return nil, err
	}
	set := &tinyidTokenSet{bizTypes: make(map[string]map[string]bool, len(all)), read: time.Now()}
	for tok, bizs := range all {
		m := make(map[string]bool, len(bizs))
		for _, b := range bizs {
			m[b] = true
		}
		set.bizTypes[tok] = m
	}
	t.set.Store(set)
	return set, nil
}

// tinyidRoutes registers Tinyid's four paths.
func (s *Server) tinyidRoutes(mux *http.ServeMux) {
	for _, p := range []struct {
		name   string
		params []string
		h      func(http.ResponseWriter, *http.Request, string) error
	}{
		{"nextId", []string{"bizType", "token", "batchSize"}, s.handleTinyidNextID},
		{"nextIdSimple", []string{"bizType", "token", "batchSize"}, s.handleTinyidNextIDSimple},
		{"nextSegmentId", []string{"bizType", "token"}, s.handleTinyidNextSegment},
		{"nextSegmentIdSimple", []string{"bizType", "token"}, s.handleTinyidNextSegmentSimple},
	} {
		path := tinyidPrefix + p.name
		e := endpoint{path: path, params: p.params}
		h := s.instrument(path, e.checked(func(w http.ResponseWriter, r *http.Request) error {
			if r.Method != http.MethodGet && r.Method != http.MethodPost {
				w.Header().Set("Allow", "GET, POST")
				return apiErrorf(http.StatusMethodNotAllowed, codeMethod,
					"method %s is not allowed on %s: it hands out IDs, so only GET and POST are (a HEAD would take IDs for nothing)", clip(r.Method), path)
			}
			biz := query(r, "bizType")
			if err := s.tinyidAllowed(r, biz); err != nil {
				return p.h(w, r, "")
			}
			return p.h(w, r, biz)
		}))
		mux.Handle(path, h)
	}
}

// errTinyidToken is a token Tinyid would refuse.
var errTinyidToken = errors.New("token is error")

// tinyidAllowed applies Tinyid's token rule to a request for bizType: a
// token from Tinyid's table that lists bizType (a store on Tinyid's tables),
// or a flakeid token (Config.Tokens, given as ?token= or as a bearer token)
// that may use the tag. A server with neither is open, as its other paths
// are. It fails with errTinyidToken, or with what reading the table failed
// with.
func (s *Server) tinyidAllowed(r *http.Request, bizType string) error {
	if s.tinyid == nil && s.tokens == nil {
		return nil
	}
	token := query(r, "token")
	if bizType == "" || token == "" && r.Header.Get("Authorization") == "" {
		return errTinyidToken
	}
	if s.tinyid != nil && token != "" {
		ok, err := s.tinyid.allows(r.Context(), token, bizType)
		if err != nil {
			s.log.Warn("tinyid: reading the token table failed", "err", err)
		}
		if ok {
			return nil
		}
	}
	if s.tokens != nil {
		tok := s.lookupToken(token)
		if tok == nil {
			if t, err := s.token(r.Header); err == nil {
				tok = t
			}
		}
		if tok != nil && tokenAllows(tok, bizType, false, false) == nil {
			return nil
		}
	}
	return errTinyidToken
}

// tinyidAnswer is Tinyid's Response: data, code (200 or an error code) and
// message.
type tinyidAnswer struct {
	Data    any    `json:"data"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// tinyidSegment is Tinyid's SegmentId as its server writes it: a client
// hands out currentId + delta, + 2·delta, … up to maxId, and fetches the
// next segment once it passes loadingId.
type tinyidSegment struct {
	CurrentID int64 `json:"currentId"`
	LoadingID int64 `json:"loadingId"`
	MaxID     int64 `json:"maxId"`
	Delta     int64 `json:"delta"`
	Remainder int64 `json:"remainder"`
}

// tinyidIDs takes n IDs of bizType ("" when the token was refused) for
// Tinyid's paths: batchSize defaults to 1 and is capped at MaxCount, as
// Tinyid caps it at batch.size.max.
func (s *Server) tinyidIDs(r *http.Request, bizType string) ([]int64, int, error) {
	if bizType == "" {
		return nil, tinyidTokenErr, errTinyidToken
	}
	n := int64(1)
	if v := query(r, "batchSize"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 1 {
			return nil, tinyidSysErr, apiErrorf(http.StatusBadRequest, codeInvalid, "batchSize %q: want a whole number of at least 1", clip(v))
		}
		n = min(n, int64(s.cfg.MaxCount))
	}
	if err := s.tinyidTag(bizType); err != nil {
		return nil, tinyidSysErr, err
	}
	spans, err := s.nextSegment(r.Context(), bizType, n, nil)
	if err != nil {
		return nil, tinyidSysErr, err
	}
	ids := make([]int64, 0, n)
	for _, sp := range spans {
		for id := range sp.All() {
			ids = append(ids, id)
		}
	}
	return ids, tinyidOK, nil
}

// tinyidTag refuses what Tinyid's paths cannot hand out: tags whose IDs are
// masked (Tinyid's clients read numbers, and a masked ID is text), and an
// invalid name.
func (s *Server) tinyidTag(bizType string) error {
	if err := segment.ValidName(bizType); err != nil {
		return err
	}
	if s.mask.forTag(bizType) != nil {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "tag %q is masked on this server, and Tinyid's paths hand out plain numbers: use /v1/segment/%s/next", bizType, bizType)
	}
	return nil
}

// tinyidCodeHeader carries, on every failed answer of Tinyid's paths
// (which Tinyid answers with HTTP 200 and its own codes 5 and 6), the code
// flakeid's own API would answer (not_found, unavailable, …): for clients
// that tell a missing tag from a store that is down, as flakeid's Go client
// does.
const tinyidCodeHeader = "X-Flakeid-Error-Code"

// writeTinyidError writes Tinyid's JSON answer of a failed call, and the
// flakeid code in tinyidCodeHeader.
func writeTinyidError(w http.ResponseWriter, code int, err error) {
	w.Header().Set(tinyidCodeHeader, tinyidErrorCode(err))
	writeJSON(w, http.StatusOK, tinyidAnswer{Code: code, Message: tinyidMessage(err)})
}

// tinyidErrorCode is the code flakeid's API answers err with.
func tinyidErrorCode(err error) string {
	if errors.Is(err, errTinyidToken) {
		return codeForbidden
	}
	return classify(err).Code
}

// tinyidMessage is the message of a failed Tinyid call.
func tinyidMessage(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Message
	}
	if errors.Is(err, segment.ErrSeries) {
		return err.Error() + "; its numbers are text: use /v1/segment/{tag}/next"
	}
	return err.Error()
}

func (s *Server) handleTinyidNextID(w http.ResponseWriter, r *http.Request, bizType string) error {
	ids, code, err := s.tinyidIDs(r, bizType)
	if err != nil {
		s.log.Debug("tinyid: nextId failed", "bizType", clip(query(r, "bizType")), "err", err)
		writeTinyidError(w, code, err)
		return nil
	}
	writeJSON(w, http.StatusOK, tinyidAnswer{Data: ids, Code: tinyidOK})
	return nil
}

// nextIdSimple answers the IDs joined by commas, or, as Tinyid, an empty
// body when it cannot (the reason goes to the log, and to the
// X-Flakeid-Error header).
func (s *Server) handleTinyidNextIDSimple(w http.ResponseWriter, r *http.Request, bizType string) error {
	ids, _, err := s.tinyidIDs(r, bizType)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return s.writeTinyidSimple(w, b.String(), err)
}

// writeTinyidSimple answers a …Simple path: text, or, as Tinyid, an empty
// body when err is not nil (its reason in the X-Flakeid-Error header).
func (s *Server) writeTinyidSimple(w http.ResponseWriter, text string, err error) error {
	w.Header()["Content-Type"] = s.ctText
	if err != nil {
		w.Header().Set("X-Flakeid-Error", clip(tinyidMessage(err)))
		w.Header().Set(tinyidCodeHeader, tinyidErrorCode(err))
		return nil
	}
	_, err = io.WriteString(w, text)
	return err
}

// tinyidTake hands a whole segment of the tag's step to the caller
// (Allocator.TakeSegment), as Tinyid's SegmentId.
func (s *Server) tinyidTake(r *http.Request, bizType string) (tinyidSegment, int, error) {
	if bizType == "" {
		return tinyidSegment{}, tinyidTokenErr, errTinyidToken
	}
	if err := s.tinyidTag(bizType); err != nil {
		return tinyidSegment{}, tinyidSysErr, err
	}
	if s.segs == nil {
		return tinyidSegment{}, tinyidSysErr, apiErrorf(http.StatusNotFound, codeNotFound, "segment mode is not enabled on this server")
	}
	sp, err := s.segs.TakeSegment(r.Context(), bizType)
	if err != nil {
		return tinyidSegment{}, tinyidSysErr, err
	}
	s.metrics.segmentIssued(bizType).Add(float64(sp.Count))
	cur := sp.First - sp.Stride
	return tinyidSegment{
		CurrentID: cur,
		// Tinyid loads the next segment 20 % into this one.
		LoadingID: cur + sp.Count*sp.Stride*20/100,
		MaxID:     sp.Last(),
		Delta:     sp.Stride,
		Remainder: sp.First % sp.Stride,
	}, tinyidOK, nil
}

func (s *Server) handleTinyidNextSegment(w http.ResponseWriter, r *http.Request, bizType string) error {
	seg, code, err := s.tinyidTake(r, bizType)
	if err != nil {
		writeTinyidError(w, code, err)
		return nil
	}
	writeJSON(w, http.StatusOK, tinyidAnswer{Data: seg, Code: tinyidOK})
	return nil
}

// nextSegmentIdSimple answers currentId,loadingId,maxId,delta,remainder,
// or an empty body as nextIdSimple does.
func (s *Server) handleTinyidNextSegmentSimple(w http.ResponseWriter, r *http.Request, bizType string) error {
	seg, _, err := s.tinyidTake(r, bizType)
	return s.writeTinyidSimple(w, fmt.Sprintf("%d,%d,%d,%d,%d", seg.CurrentID, seg.LoadingID, seg.MaxID, seg.Delta, seg.Remainder), err)
}
