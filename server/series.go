package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/segment"
)

// readSeriesMember reads one member of a series' settings into ser; it
// reports false for a member that is not one.
func readSeriesMember(m member, ser *segment.Series) (bool, error) {
	var err error
	switch m.key {
	case "period":
		var p string
		p, err = stringField(m)
		ser.Period = segment.Period(p)
	case "tz":
		ser.TZ, err = stringField(m)
	case "template":
		ser.Template, err = stringField(m)
	case "start":
		ser.Start, err = wholeField(m, 0, 99_999_999_999_999, false)
	case "masked":
		ser.Masked, err = boolField(m)
	default:
		return false, nil
	}
	return true, err
}

// boolField reads a member that must be a JSON true or false.
func boolField(m member) (bool, error) {
	switch string(m.value) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, apiErrorf(http.StatusBadRequest, codeInvalid, "%s must be true or false, not %s", m.key, clip(string(m.value)))
}

// prepareSeries completes the settings of a series about to be created:
// period and template are required; a masked series takes the server's
// current mask key.
func (s *Server) prepareSeries(ser *segment.Series, has map[string]bool) error {
	if !has["period"] || !has["template"] {
		return apiErrorf(http.StatusBadRequest, codeInvalid,
			`a series needs period and template: {"tag":"orders","period":"day","template":"ORD-{yyyyMMdd}-{seq:6}"} (tz, start and masked are optional)`)
	}
	if !has["start"] {
		ser.Start = 1
	}
	if ser.Masked {
		if s.mask == nil {
			return apiErrorf(http.StatusBadRequest, codeInvalid, "masked is true, but this server has no mask keys (serve --mask-keyring): a masked series is masked with the server's current key")
		}
		ser.KeyID = s.mask.ring.Current().KeyID()
	}
	return nil
}

// seriesTagFields are the series settings of a tag on the wire (flat in
// tagJSON), with its capacity.
type seriesTagFields struct {
	Period   string `json:"period,omitempty"`
	TZ       string `json:"tz,omitempty"`
	Template string `json:"template,omitempty"`
	Start    *int64 `json:"start,omitempty"`
	Masked   bool   `json:"masked,omitempty"`
	KeyID    *uint8 `json:"key_id,omitempty"`
	// Capacity says how many numbers a period holds: "at most 999,999
	// numbers a day".
	Capacity string `json:"capacity,omitempty"`
}

func newSeriesTagFields(t segment.Tag) seriesTagFields {
	ser := t.Series
	if ser == nil {
		return seriesTagFields{}
	}
	out := seriesTagFields{Period: string(ser.Period), TZ: ser.TZ, Template: ser.Template, Start: &ser.Start, Masked: ser.Masked}
	if out.TZ == "" {
		out.TZ = "UTC"
	}
	if ser.Masked {
		out.KeyID = &ser.KeyID
	}
	if f, err := segment.CompileSeries(*ser, 1); err == nil {
		out.Capacity = f.CapacityText()
	}
	return out
}

// nextNumbers takes n numbers of a series tag, counting them as the tag's
// issued IDs.
func (s *Server) nextNumbers(ctx context.Context, tag string, n int64) ([]segment.Number, error) {
	if s.segs == nil {
		return nil, apiErrorf(http.StatusNotFound, codeNotFound, "segment mode is not enabled on this server")
	}
	if n < 1 || n > int64(s.cfg.MaxCount) {
		return nil, apiErrorf(http.StatusBadRequest, codeInvalid, "count %d is out of range: want 1 to %d", n, s.cfg.MaxCount)
	}
	nums, err := s.segs.NextNumbers(ctx, tag, int(n))
	if err != nil {
		return nil, err
	}
	s.metrics.segmentIssued(tag).Add(float64(n))
	return nums, nil
}

// numberText is a number as the request asked for it: its template form,
// or its numeric form in digits.
func numberText(n segment.Number, numeric bool) string {
	if numeric {
		return strconv.FormatInt(n.Numeric, 10)
	}
	return n.Text
}

// writeNumbers answers the numbers of a series tag for GET
// /v1/segment/{tag}/next: {"tag":…,"series":true,"ids":["ORD-…",…]}, or one
// per line for Accept: text/plain.
func (s *Server) writeNumbers(w http.ResponseWriter, q idsQuery, tag string) func([]segment.Number) error {
	return func(nums []segment.Number) error {
		if q.text {
			w.Header()["Content-Type"] = s.ctText
			buf := make([]byte, 0, len(nums)*24)
			for _, n := range nums {
				buf = append(buf, numberText(n, q.numeric)...)
				buf = append(buf, '\n')
			}
			_, err := w.Write(buf)
			return err
		}
		ids := make([]string, len(nums))
		for i, n := range nums {
			ids[i] = numberText(n, q.numeric)
		}
		writeJSON(w, http.StatusOK, seriesNextJSON{Tag: tag, Series: true, IDs: ids})
		return nil
	}
}

// seriesNextJSON is the JSON answer of a series tag's numbers.
type seriesNextJSON struct {
	Tag    string   `json:"tag"`
	Series bool     `json:"series"`
	IDs    []string `json:"ids"`
}

// serveSeriesNext answers a request for numbers of a series tag, whose
// query was read: format=ranges does not apply; format=numeric answers the
// numeric forms.
func (s *Server) serveSeriesNext(ctx context.Context, tag string, q idsQuery, write func([]segment.Number) error) error {
	if q.ranges {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "format=ranges is not available: tag %q is a series of business numbers, which do not form runs; drop format or ask format=numeric", tag)
	}
	nums, err := s.nextNumbers(ctx, tag, q.n)
	if err != nil {
		return err
	}
	return write(nums)
}

// decodeNumberJSON is the answer of GET /v1/segment/{tag}/decode/{number}.
type decodeNumberJSON struct {
	Tag     string `json:"tag"`
	Number  string `json:"number"`
	Numeric string `json:"numeric"`
	Period  string `json:"period"`
	// Label names the period: 20261128 for a day.
	Label       string `json:"label"`
	PeriodStart string `json:"period_start"`
	PeriodEnd   string `json:"period_end"`
	// Counter is the counter the number shows; Seq the real one (they
	// differ in a masked series).
	Counter int64 `json:"counter"`
	Seq     int64 `json:"seq"`
	Masked  bool  `json:"masked"`
}

// decodeNumber reads a number of a series tag. Unmasking a masked series'
// counter needs a token allowed to unmask, as masked IDs do.
func (s *Server) decodeNumber(ctx context.Context, tag, text string, mayUnmask func() error) (decodeNumberJSON, error) {
	a, err := s.segments()
	if err != nil {
		return decodeNumberJSON{}, err
	}
	if err := segment.ValidName(tag); err != nil {
		return decodeNumberJSON{}, err
	}
	f, err := a.Format(ctx, tag)
	if err != nil {
		return decodeNumberJSON{}, err
	}
	masked := f.Series().Masked
	if masked {
		if err := mayUnmask(); err != nil {
			return decodeNumberJSON{}, err
		}
	}
	d, err := a.DecodeNumber(ctx, tag, text)
	if err != nil {
		return decodeNumberJSON{}, err
	}
	return decodeNumberJSON{Tag: tag, Number: d.Text, Numeric: strconv.FormatInt(d.Numeric, 10), Period: string(f.Series().Period),
		Label: strconv.FormatInt(d.Label, 10), PeriodStart: d.Start.Format(time.RFC3339), PeriodEnd: d.End.Format(time.RFC3339),
		Counter: d.Counter, Seq: d.Seq, Masked: masked}, nil
}

// handleSeriesDecode answers GET /v1/segment/{tag}/decode/{number}.
func (s *Server) handleSeriesDecode(w http.ResponseWriter, r *http.Request) error {
	tag := r.PathValue("tag")
	if err := s.authorize(r.Header, tag, false, false); err != nil {
		return err
	}
	d, err := s.decodeNumber(r.Context(), tag, r.PathValue("number"), s.unmaskCheck(r.Header))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// CounterKeys returns the keys masked series are masked with, by key id, for
// segment.Config.CounterKeys: the config's keys (every listed key, so that
// a series keeps its key while newer keys come first). It returns nil when
// the config has no keys.
func (c MaskConfig) CounterKeys() (func(uint8) (segment.CounterMasker, error), error) {
	if len(c.Keys) == 0 {
		return nil, nil
	}
	byID := map[uint8]*idmask.Masker{}
	for i, k := range c.Keys {
		key, err := idmask.ParseKey(k.Key)
		if err != nil {
			return nil, fmt.Errorf("mask key %d: %v", i, err)
		}
		m, err := idmask.New(key, k.ID, idmask.Bits63)
		if err != nil {
			return nil, err
		}
		byID[k.ID] = m
	}
	return func(id uint8) (segment.CounterMasker, error) {
		if m, ok := byID[id]; ok {
			return m, nil
		}
		return nil, fmt.Errorf("no mask key has id %d (the series was created with it; put it back in the keyring)", id)
	}, nil
}

// isSeriesErr reports whether err says a tag is a series.
func isSeriesErr(err error) bool { return errors.Is(err, segment.ErrSeries) }
