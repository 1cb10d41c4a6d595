package server

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// statusJSON is the answer of GET /v1/status. Its wire shape is fixed here,
// in structs of its own (never a library type with Go field names), by these
// rules:
//
//   - Every key is snake_case.
//   - IDs and ID bounds (segment starts and ends, high_mark) are JSON strings
//     of decimal digits, as everywhere in the API: a 64-bit ID does not fit a
//     JavaScript number.
//   - Counts are JSON numbers.
//   - Durations are JSON numbers of milliseconds, with a fraction where the
//     clock has one, in keys ending in _ms.
//   - Instants are RFC 3339 strings in UTC.
//
// For example (one tag loaded, its next segment not fetched yet):
//
//	{"ready":true,"lease_held":true,"on_reservation":false,
//	 "datacenter_id":0,"worker_id":3,
//	 "reserved_until":"2026-01-02T10:00:04.5Z","leases":1,"lease_resets":0,
//	 "skew_refusals":0,"clock_skew_ms":0.21,
//	 "layout":"41/5/5/12 × 1ms since 2025-01-01T00:00:00Z",
//	 "snowflake":{"issued":7,"waits":0,"borrowed_ticks":0,"lead_ms":0,
//	   "last_tick":31654800123,"high_water":"2026-01-02T09:00:00.124Z",
//	   "clock_backwards":0,"clock_forwards":0,"clock_offset_ms":0},
//	 "snowflake_totals":{"issued":7,"waits":0,"borrowed_ticks":0,
//	   "clock_backwards":0,"clock_forwards":0},
//	 "segments":[{"tag":"orders","current":{"start":"1","end":"501"},
//	   "used":3,"size":500,"next":null,"step":1000,"min_step":1000,
//	   "fetches":1,"failures":0,"waits":1,"last_fetch_ms":0.412,
//	   "mean_fetch_ms":0.412,"issued":3,"high_mark":"501","regressions":0}],
//	 "uptime_ms":5000}
//
// The keys lease_held, datacenter_id, worker_id, leases and layout are read
// by the verifier (cmd/flakeid/internal/verify) and scripts: keep them.
type statusJSON struct {
	// Ready is what /readyz answers; Reason says why not, when not.
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// Held is whether a worker-id lease is held now; DatacenterID and
	// WorkerID are those of the current (or last) lease.
	Held bool `json:"lease_held"`
	// OnReservation is true while the lease is lost and the node still
	// issues on the reservation it stored (until reserved_until), acquiring
	// another lease meanwhile.
	OnReservation bool  `json:"on_reservation"`
	DatacenterID  int64 `json:"datacenter_id"`
	WorkerID      int64 `json:"worker_id"`
	// ReservedTo is the end of the reservation: IDs may be issued before it.
	ReservedTo time.Time `json:"reserved_until,omitzero"`
	// Leases counts the leases acquired since start; Resets those ended
	// because the coordinator lost or rolled back its state; SkewRefusals
	// those refused or ended because the clocks differ too much.
	Leases       int64 `json:"leases"`
	Resets       int64 `json:"lease_resets"`
	SkewRefusals int64 `json:"skew_refusals"`
	// ClockSkewMs is this node's clock minus the coordinator's, at the last
	// renewal.
	ClockSkewMs float64 `json:"clock_skew_ms"`
	// Layout is the node's layout, as snowflake.Layout.String writes it.
	Layout    string              `json:"layout"`
	Snowflake snowflakeStatusJSON `json:"snowflake"`
	// SnowflakeTotals are the counters summed over every generator since
	// the server started: they never decrease when the lease changes.
	SnowflakeTotals snowflakeTotalsJSON `json:"snowflake_totals"`
	// Segments are the loaded segment tags, sorted by name; empty (never
	// null) when none is.
	Segments []segmentStatusJSON `json:"segments"`
	// Mask tells what the server masks, when it has mask keys (never the
	// keys themselves).
	Mask *maskStatusJSON `json:"mask,omitempty"`
	// UptimeMs is the time since the server started, in whole milliseconds.
	UptimeMs int64 `json:"uptime_ms"`
}

// snowflakeStatusJSON is the "snowflake" object of /v1/status: the current
// generator's counters (snowflake.Stats). They start again from zero when a
// new lease starts a new generator.
type snowflakeStatusJSON struct {
	// Issued, Waits and BorrowedTicks: see snowflake.Stats.
	Issued        uint64 `json:"issued"`
	Waits         uint64 `json:"waits"`
	BorrowedTicks uint64 `json:"borrowed_ticks"`
	// LeadMs is how far the newest issued tick is ahead of the clock.
	LeadMs float64 `json:"lead_ms"`
	// LastTick is the tick (time units since the epoch) of the newest ID, as
	// /v1/decode gives a tick; HighWater the end of that tick.
	LastTick  int64     `json:"last_tick"`
	HighWater time.Time `json:"high_water"`
	// ClockBackwards and ClockForwards count the wall clock's steps;
	// ClockOffsetMs is the wall clock minus the generator's clock.
	ClockBackwards uint64  `json:"clock_backwards"`
	ClockForwards  uint64  `json:"clock_forwards"`
	ClockOffsetMs  float64 `json:"clock_offset_ms"`
}

// snowflakeTotalsJSON is the "snowflake_totals" object of /v1/status: the
// counters of snowflakeStatusJSON summed over every generator since start
// (node.Status.Total), as the metrics count them.
type snowflakeTotalsJSON struct {
	Issued         uint64 `json:"issued"`
	Waits          uint64 `json:"waits"`
	BorrowedTicks  uint64 `json:"borrowed_ticks"`
	ClockBackwards uint64 `json:"clock_backwards"`
	ClockForwards  uint64 `json:"clock_forwards"`
}

// segmentStatusJSON is one loaded tag in /v1/status (segment.TagStats).
type segmentStatusJSON struct {
	Tag string `json:"tag"`
	// Current is the segment being handed out, null before the first fetch;
	// Used is how many of its Size IDs are gone.
	Current *segmentRangeJSON `json:"current"`
	Used    int64             `json:"used"`
	Size    int64             `json:"size"`
	// Next is the prefetched segment, null when there is none.
	Next *segmentRangeJSON `json:"next"`
	// Step is the dynamic step now, MinStep the tag's configured step.
	Step    int64 `json:"step"`
	MinStep int64 `json:"min_step"`
	// Fetches and Failures count fetches from the stores, Waits the
	// requests that waited for one.
	Fetches  int64 `json:"fetches"`
	Failures int64 `json:"failures"`
	Waits    int64 `json:"waits"`
	// LastFetchMs and MeanFetchMs are fetch latencies.
	LastFetchMs float64 `json:"last_fetch_ms"`
	MeanFetchMs float64 `json:"mean_fetch_ms"`
	// Issued counts the IDs handed out.
	Issued int64 `json:"issued"`
	// HighMark is the end of the newest segment fetched: the store's max_id
	// is never accepted below it.
	HighMark int64 `json:"high_mark,string"`
	// Refused is why the tag is refused (its store went backwards), absent
	// while it is served; Regressions counts the times a store went
	// backwards.
	Refused     string `json:"refused,omitempty"`
	Regressions int64  `json:"regressions"`
}

// segmentRangeJSON is a segment of IDs: Start is its first ID, End the first ID
// after it (half-open, as segment.Range), both decimal strings.
type segmentRangeJSON struct {
	Start int64 `json:"start,string"`
	End   int64 `json:"end,string"`
}

// newSegmentRangeJSON is r on the wire, or nil when r is empty.
func newSegmentRangeJSON(r segment.Range) *segmentRangeJSON {
	if r.Len() <= 0 {
		return nil
	}
	return &segmentRangeJSON{Start: r.Start, End: r.End}
}

// durationMs is d in milliseconds.
func durationMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// newSnowflakeStatusJSON is st on the wire.
func newSnowflakeStatusJSON(st snowflake.Stats) snowflakeStatusJSON {
	return snowflakeStatusJSON{Issued: st.Issued, Waits: st.Waits, BorrowedTicks: st.BorrowedTicks, LeadMs: durationMs(st.Lead),
		LastTick: st.LastTick, HighWater: st.HighWater.UTC(), ClockBackwards: st.ClockBackwards,
		ClockForwards: st.ClockForwards, ClockOffsetMs: durationMs(st.ClockOffset)}
}

// newSegmentStatusJSON is st on the wire.
func newSegmentStatusJSON(st segment.TagStats) segmentStatusJSON {
	return segmentStatusJSON{Tag: st.Tag, Current: newSegmentRangeJSON(st.Current), Used: st.Used, Size: st.Size,
		Next: newSegmentRangeJSON(st.Next), Step: st.Step, MinStep: st.MinStep, Fetches: st.Fetches, Failures: st.Failures,
		Waits: st.Waits, LastFetchMs: durationMs(st.LastFetch), MeanFetchMs: durationMs(st.MeanFetch), Issued: st.Issued,
		HighMark: st.HighMark, Refused: st.Refused, Regressions: st.Regressions}
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", false, false); err != nil {
		return err
	}
	st := s.node.Status()
	out := statusJSON{Held: st.Held, OnReservation: st.OnReservation, DatacenterID: st.DatacenterID, WorkerID: st.WorkerID, ReservedTo: st.Until.UTC(),
		Leases: st.Leases, Resets: st.Resets, SkewRefusals: st.SkewRefusals, ClockSkewMs: durationMs(st.ClockSkew),
		Layout: s.node.Layout().String(), Snowflake: newSnowflakeStatusJSON(st.Stats),
		SnowflakeTotals: snowflakeTotalsJSON{Issued: st.Total.Issued, Waits: st.Total.Waits, BorrowedTicks: st.Total.BorrowedTicks,
			ClockBackwards: st.Total.ClockBackwards, ClockForwards: st.Total.ClockForwards},
		Segments: []segmentStatusJSON{},
		Mask:     s.mask.status(), UptimeMs: time.Since(s.started).Milliseconds()}
	if err := s.Ready(); err != nil {
		out.Reason = err.Error()
	} else {
		out.Ready = true
	}
	if s.segs != nil {
		for _, ts := range s.segs.Stats() {
			out.Segments = append(out.Segments, newSegmentStatusJSON(ts))
		}
		slices.SortFunc(out.Segments, func(a, b segmentStatusJSON) int { return strings.Compare(a.Tag, b.Tag) })
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
