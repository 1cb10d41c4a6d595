package server

import (
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// rangeJSON is a run of IDs in a JSON answer.
type rangeJSON struct {
	First  snowflake.ID `json:"first"`
	Count  int64        `json:"count"`
	Stride int64        `json:"stride"`
}

// wantsText reports whether the client asked for text/plain.
func wantsText(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "text/plain") && !strings.Contains(a, "application/json")
}

// getBuf returns a buffer for an answer from the server's pool; putBuf
// returns it. Answers are written in chunks of at most flushAt bytes, so
// pooled buffers stay small.
func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 512)
	return &b
}

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= 2*flushAt {
		*b = (*b)[:0]
		s.bufs.Put(b)
	}
}

// flushAt is the size at which a long answer is written out and its buffer
// reused.
const flushAt = 30 << 10

// run is a run of IDs: first, first+stride, … (count of them).
type run struct{ first, count, stride int64 }

// batchRuns appends the runs of Snowflake batches to dst.
func batchRuns(dst []run, batches []snowflake.Batch) []run {
	for _, b := range batches {
		dst = append(dst, run{int64(b.First), int64(b.Count), 1})
	}
	return dst
}

// spanRuns appends the runs of segment spans to dst.
func spanRuns(dst []run, spans []segment.Span) []run {
	for _, sp := range spans {
		dst = append(dst, run{sp.First, sp.Count, sp.Stride})
	}
	return dst
}

// ids yields the IDs of runs in order, with their index among them all.
func ids(runs []run) iter.Seq2[int, int64] {
	return func(yield func(int, int64) bool) {
		n := 0
		for _, rn := range runs {
			for i := range rn.count {
				if !yield(n, rn.first+i*rn.stride) {
					return
				}
				n++
			}
		}
	}
}

// writeIDs answers runs of IDs as the request asks (see idsQuery); tag,
// when not "", is echoed in the JSON answers, and mk, when not nil, masks
// every ID. The handlers check the request with idsQuery before they take
// IDs and call writeRuns.
func (s *Server) writeIDs(w http.ResponseWriter, r *http.Request, tag string, runs []run, mk *masking) error {
	q, err := s.idsQuery(r, tag, mk)
	if err != nil {
		return err
	}
	return s.writeRuns(w, q, tag, runs, mk)
}

// writeRuns answers runs of IDs: JSON strings by default, ranges with
// ?format=ranges, UUIDv7, TypeID or ULID texts with ?format=uuid7, typeid
// or ulid, one per line for Accept: text/plain. tag, when not "", is
// echoed in the JSON answers. With mk not nil every ID is written as its
// masked text (idsQuery refused ranges: masked IDs do not form runs).
func (s *Server) writeRuns(w http.ResponseWriter, q idsQuery, tag string, runs []run, mk *masking) error {
	text := q.text
	if q.ranges && mk == nil && !text {
		body := map[string]any{}
		if tag != "" {
			body["tag"] = tag
		}
		rs := make([]rangeJSON, 0, len(runs))
		var total int64
		for _, rn := range runs {
			rs = append(rs, rangeJSON{snowflake.ID(rn.first), rn.count, rn.stride})
			total += rn.count
		}
		body["ranges"], body["count"] = rs, total
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	if mk != nil {
		if err := mk.check(runs); err != nil {
			return err
		}
	}
	// One allocation-free pass: {"ids":["…",…]}, or one ID per line.
	bp := s.getBuf()
	defer s.putBuf(bp)
	buf := *bp
	if text {
		w.Header()["Content-Type"] = s.ctText
	} else {
		w.Header()["Content-Type"] = s.ctJSON
		buf = append(buf, '{')
		if tag != "" {
			buf = append(buf, `"tag":`...)
			buf = strconv.AppendQuote(buf, tag) // tag names are ASCII letters, digits and _-.:
			buf = append(buf, ',')
		}
		if mk != nil {
			buf = append(buf, `"masked":true,`...)
		}
		buf = append(buf, `"ids":[`...)
	}
	var err error
	if q.uuid != 0 {
		buf, err = s.uuids.appendTexts(w, buf, runs, q.uuid, q.prefix, mk, !text)
	} else {
		buf, err = appendIDs(w, buf, runs, mk, !text)
	}
	if err != nil {
		*bp = buf[:0]
		return err
	}
	if !text {
		buf = append(buf, "]}\n"...)
	}
	_, err = w.Write(buf)
	*bp = buf
	return err
}

// appendIDs appends the IDs of runs to buf, masked when mk is not nil: as
// JSON strings separated by commas when json is set, else one per line. It
// writes buf out to w whenever it passes flushAt.
func appendIDs(w io.Writer, buf []byte, runs []run, mk *masking, json bool) ([]byte, error) {
	if mk != nil {
		return mk.appendTexts(w, buf, runs, json)
	}
	for i, id := range ids(runs) {
		if json {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
			buf = strconv.AppendInt(buf, id, 10)
			buf = append(buf, '"')
		} else {
			buf = strconv.AppendInt(buf, id, 10)
			buf = append(buf, '\n')
		}
		if len(buf) > flushAt {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	return buf, nil
}

// writeOne answers one ID as text, as Leaf does: decimal, or its masked
// text when mk is not nil.
func (s *Server) writeOne(w http.ResponseWriter, id int64, mk *masking) error {
	bp := s.getBuf()
	defer s.putBuf(bp)
	if mk != nil {
		var err error
		if *bp, err = mk.appendText((*bp)[:0], id); err != nil {
			return err
		}
	} else {
		*bp = strconv.AppendInt((*bp)[:0], id, 10)
	}
	w.Header()["Content-Type"] = s.ctText
	_, err := w.Write(*bp)
	return err
}
