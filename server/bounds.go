package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

// boundsJSON is the answer of /v1/snowflake/bounds (and, field for field,
// of the RPC Bounds and RESP ID.BOUNDS).
type boundsJSON struct {
	// Min and Max are the smallest and largest Snowflake IDs whose time lies
	// in the window, both included.
	Min snowflake.ID `json:"min"`
	Max snowflake.ID `json:"max"`
	// From and To are the window the bounds cover exactly, [from, to): the
	// asked window with its ends moved to tick starts, and clamped to the
	// layout's epoch and end.
	From string `json:"from"`
	To   string `json:"to"`
	// Layout is the server's layout, which the bounds are for.
	Layout string `json:"layout"`
	// Note is set on a server that hands out masked Snowflake IDs.
	Note string `json:"note,omitempty"`
}

// maskedBoundsNote says that bounds are internal IDs on a masking server.
const maskedBoundsNote = "min and max are internal IDs: this server hands out masked Snowflake IDs, which do not sort by time, so compare the bounds with the internal IDs (decode a masked ID to get its internal one)"

// bounds answers the bounds of the window [from, to), each given as
// snowflake.ParseTime reads it; an empty from means the layout's epoch, an
// empty to its end.
//
// A '+' sent unescaped in a query string arrives as a space (+1h, an
// offset of +08:00); no time has a space, so a space reads as '+'.
func (s *Server) bounds(from, to string) (boundsJSON, error) {
	from, to = strings.ReplaceAll(from, " ", "+"), strings.ReplaceAll(to, " ", "+")
	l := s.node.Layout()
	now := time.Now()
	start, end := l.Epoch, l.Capacity().RunsUntil
	var err error
	if from != "" {
		if start, err = snowflake.ParseTime(from, now); err != nil {
			return boundsJSON{}, apiErrorf(http.StatusBadRequest, codeInvalid, "from: %v", err)
		}
	}
	if to != "" {
		if end, err = snowflake.ParseTime(to, now); err != nil {
			return boundsJSON{}, apiErrorf(http.StatusBadRequest, codeInvalid, "to: %v", err)
		}
	}
	b, err := l.Bounds(start, end)
	if errors.Is(err, snowflake.ErrEmptyWindow) {
		return boundsJSON{}, apiErrorf(http.StatusBadRequest, codeInvalid, "window [%s, %s): %v", clip(orDefault(from, "epoch")), clip(orDefault(to, "end")), err)
	}
	if err != nil {
		return boundsJSON{}, err
	}
	out := boundsJSON{Min: b.Min, Max: b.Max, From: b.From.UTC().Format(time.RFC3339Nano), To: b.To.UTC().Format(time.RFC3339Nano), Layout: l.String()}
	if s.mask.forSnowflake() != nil {
		out.Note = maskedBoundsNote
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// handleBounds answers GET /v1/snowflake/bounds?from=…&to=…: the smallest
// and largest Snowflake IDs whose time lies in the window.
func (s *Server) handleBounds(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bounds(query(r, "from"), query(r, "to"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}
