package server

import (
	"net/http"
	"time"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// statusJSON is the answer of /v1/status.
type statusJSON struct {
	Ready        bool               `json:"ready"`
	Reason       string             `json:"reason,omitempty"`
	Held         bool               `json:"lease_held"`
	DatacenterID int64              `json:"datacenter_id"`
	WorkerID     int64              `json:"worker_id"`
	ReservedTo   time.Time          `json:"reserved_until,omitzero"`
	Leases       int64              `json:"leases"`
	Layout       string             `json:"layout"`
	Snowflake    snowflake.Stats    `json:"snowflake"`
	Segments     []segment.TagStats `json:"segments"`
	// Mask tells what the server masks, when it has mask keys (never the
	// keys themselves).
	Mask   *maskStatusJSON `json:"mask,omitempty"`
	Uptime string          `json:"uptime"`
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", false, false); err != nil {
		return err
	}
	st := s.node.Status()
	out := statusJSON{Held: st.Held, DatacenterID: st.DatacenterID, WorkerID: st.WorkerID, ReservedTo: st.Until,
		Leases: st.Leases, Layout: s.node.Layout().String(), Snowflake: st.Stats, Segments: []segment.TagStats{},
		Mask: s.mask.status(), Uptime: time.Since(s.started).Round(time.Second).String()}
	if err := s.Ready(); err != nil {
		out.Reason = err.Error()
	} else {
		out.Ready = true
	}
	if s.segs != nil {
		if st := s.segs.Stats(); st != nil {
			out.Segments = st
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
