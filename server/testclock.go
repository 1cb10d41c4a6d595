package server

import (
	"net/http"
	"time"
)

// handleTestClock shifts the node's test clock by ?shift= (a Go duration,
// e.g. -5s); mounted only when Options.TestClock is set.
func (s *Server) handleTestClock(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return err
	}
	shift := query(r, "shift")
	d, err := time.ParseDuration(shift)
	if err != nil {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "shift %q: %v", clip(shift), err)
	}
	off := s.clock.Shift(d)
	s.log.Warn("server: TEST clock shifted", "by", d, "offset", off)
	writeJSON(w, http.StatusOK, map[string]string{"shifted": d.String(), "offset": off.String()})
	return nil
}

// ClockShifter moves a test clock by d and returns its offset from the
// real time.
type ClockShifter interface {
	Shift(d time.Duration) time.Duration
}
