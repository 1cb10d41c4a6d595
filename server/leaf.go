package server

import (
	"io"
	"net/http"
	"strconv"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// Leaf's snowflake path answers one decimal ID as text; the key is ignored
// (Leaf ignores it too). ?format=uuid7, typeid (with ?prefix=) or ulid
// answers the ID's UUID-shaped text instead.
func (s *Server) handleLeafSnowflake(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", true, false); err != nil {
		return err
	}
	var f idview.Form
	var prefix string
	if r.URL.RawQuery != "" {
		format := query(r, "format")
		if format != "" && idview.FormOf(format) == 0 {
			return apiErrorf(http.StatusBadRequest, codeInvalid, "format %q: want uuid7, typeid or ulid (or none, for the decimal ID)", clip(format))
		}
		var err error
		if f, prefix, err = s.uuids.query(format, query(r, "prefix"), query(r, "prefix") != ""); err != nil {
			return err
		}
	}
	var arr [1]snowflake.Batch
	b, err := s.nextSnowflake(1, arr[:0])
	if err != nil {
		return err
	}
	if f != 0 {
		return s.writeOneUUID(w, int64(b[0].First), f, prefix, s.mask.forSnowflake())
	}
	return s.writeOne(w, int64(b[0].First), s.mask.forSnowflake())
}

// writeOneUUID answers one ID as its UUIDv7, TypeID or ULID text.
func (s *Server) writeOneUUID(w http.ResponseWriter, id int64, f idview.Form, prefix string, mk *masking) error {
	bp := s.getBuf()
	defer s.putBuf(bp)
	r := s.uuids.rng()
	defer s.uuids.putRNG(r)
	var err error
	if *bp, err = s.uuids.appendText((*bp)[:0], id, f, prefix, mk, r); err != nil {
		return err
	}
	w.Header()["Content-Type"] = s.ctText
	_, err = w.Write(*bp)
	return err
}

// Leaf's segment path answers the next ID of tag key as text; for a series
// tag, its next number (ORD-20261128-000123).
func (s *Server) handleLeafSegment(w http.ResponseWriter, r *http.Request) error {
	tag := pathName(r, leafSegmentPrefix, "")
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	if err := s.authorize(r.Header, tag, false, false); err != nil {
		return err
	}
	var arr [1]segment.Span
	spans, err := s.nextSegment(r.Context(), tag, 1, arr[:0])
	if isSeriesErr(err) {
		return s.serveSeriesNext(r.Context(), tag, idsQuery{n: 1}, func(nums []segment.Number) error {
			w.Header()["Content-Type"] = s.ctText // as Leaf: the text, no newline
			_, err := io.WriteString(w, nums[0].Text)
			return err
		})
	}
	if err != nil {
		return err
	}
	return s.writeOne(w, spans[0].First, s.mask.forTag(tag))
}

// Leaf's decode answers {"timestamp","workerId","sequenceId"} as Leaf's
// LeafMonitorController does (timestamp in ms, as a string), plus the
// datacenter and an RFC 3339 time.
func (s *Server) handleLeafDecode(w http.ResponseWriter, r *http.Request) error {
	text := query(r, "snowflakeId")
	if text == "" {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "snowflakeId is required: /decodeSnowflakeId?snowflakeId=<id>")
	}
	in, p, err := s.decode(text, query(r, "as"), s.unmaskCheck(r.Header))
	if err != nil {
		return err
	}
	id := in.id
	writeJSON(w, http.StatusOK, map[string]any{
		"snowflakeId":  id.String(),
		"timestamp":    strconv.FormatInt(p.Time.UnixMilli(), 10),
		"workerId":     strconv.FormatInt(p.Worker, 10),
		"datacenterId": strconv.FormatInt(p.Datacenter, 10),
		"sequenceId":   strconv.FormatInt(p.Sequence, 10),
		"time":         p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	})
	return nil
}
