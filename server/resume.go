package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/flakeid/flakeid/segment"
)

// segmentsRefused is why segment tags are refused (their stores went
// backwards; see segment.ErrRegressed), naming each, and which series are
// full until their next period (segment.ErrPeriodFull), or nil.
func (s *Server) segmentsRefused() error {
	if s.segs == nil {
		return nil
	}
	join := func(errs []error) string {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return strings.Join(msgs, "; ")
	}
	var out []error
	if errs := s.segs.Refused(); len(errs) > 0 {
		out = append(out, fmt.Errorf("%d segment tag(s) refused (fix the store, then POST /v1/segment/tags/{tag}/resume): %s", len(errs), join(errs)))
	}
	if full := s.segs.Full(); len(full) > 0 {
		out = append(out, fmt.Errorf("%d series full until their next period: %s", len(full), join(full)))
	}
	return errors.Join(out...)
}

// handleTagsResume serves a tag refused because its store went backwards
// again, once the store is fixed; it answers the tag's row. The body is
// optional: none (or {}) only checks that the store is back above what this
// node fetched; {"floor": N} (a number or a string of digits) first raises
// the tag's max_id to N (see segment.Allocator.Resume). Any other key is a
// 400 naming it. A store still behind is 409 failed_precondition, naming
// both values.
func (s *Server) handleTagsResume(w http.ResponseWriter, r *http.Request) error {
	a, tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	members, err := readObject(w, r, true)
	if err != nil {
		return err
	}
	var floor int64
	for _, m := range members {
		if m.key != "floor" {
			return apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: resume takes floor (or no body)", clip(m.key))
		}
		if floor, err = wholeField(m, 0, maxID, true); err != nil {
			return err
		}
	}
	if err := a.Resume(r.Context(), tag, floor); err != nil {
		if errors.Is(err, segment.ErrRegressed) {
			return apiErrorf(http.StatusConflict, codePrecondition, "%v", err)
		}
		return err
	}
	row, err := s.tagRow(r.Context(), a, tag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newTagJSON(row))
	return nil
}
