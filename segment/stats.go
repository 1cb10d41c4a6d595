package segment

import (
	"time"
)

// TagStats is a snapshot of one loaded tag.
type TagStats struct {
	Tag string `json:"tag"`
	// Current is the segment being handed out and Used how many of its IDs
	// are gone; Next is the prefetched one (zero when none).
	Current Range `json:"current"`
	Used    int64 `json:"used"`
	Size    int64 `json:"size"` // IDs in the current segment
	Next    Range `json:"next"`
	// Step is the dynamic step now; MinStep the tag's configured step.
	Step    int64 `json:"step"`
	MinStep int64 `json:"min_step"`
	// Fetches and Failures count fetches from the stores; Waits the times a
	// request waited for a fetch.
	Fetches  int64 `json:"fetches"`
	Failures int64 `json:"failures"`
	Waits    int64 `json:"waits"`
	// LastFetch and MeanFetch are fetch latencies.
	LastFetch time.Duration `json:"last_fetch_ns"`
	MeanFetch time.Duration `json:"mean_fetch_ns"`
	// Issued counts IDs handed out by Next (NextID is not counted: it
	// stays one atomic add).
	Issued int64 `json:"issued"`
	// HighMark is the end of the newest segment fetched (the largest over
	// the sources): the store's max_id is never accepted below it.
	HighMark int64 `json:"high_mark"`
	// Refused is why the tag is refused (a store went backwards; see
	// Resume), empty while it is served. Regressions counts the times a
	// store was seen going backwards.
	Refused     string `json:"refused,omitempty"`
	Regressions int64  `json:"regressions"`
}

// Stats returns a snapshot of every loaded tag, in no particular order.
func (a *Allocator) Stats() []TagStats {
	var out []TagStats
	for _, b := range *a.tags.Load() {
		out = append(out, b.stats())
	}
	return out
}
