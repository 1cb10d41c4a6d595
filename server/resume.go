package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/flakeid/flakeid/segment"
)

// codePrecondition answers an operation the state does not allow yet (a
// resume while the store is still behind).
const codePrecondition = "failed_precondition"

// segmentsRefused is why segment tags are refused (their stores went
// backwards; see segment.ErrRegressed), naming each, or nil.
func (s *Server) segmentsRefused() error {
	if s.segs == nil {
		return nil
	}
	errs := s.segs.Refused()
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return fmt.Errorf("%d segment tag(s) refused (fix the store, then POST /v1/segment/tags/{tag}/resume): %s",
		len(errs), strings.Join(msgs, "; "))
}

// resumeBody is the JSON body of POST /v1/segment/tags/{tag}/resume: Floor
// 0 (or no body) only checks that the store is back above what this node
// fetched; a Floor first raises the tag's max_id to it (see
// segment.Allocator.Resume).
type resumeBody struct {
	Floor int64 `json:"floor"`
}

// handleTagsResume serves a tag refused because its store went backwards
// again, once the store is fixed; it answers the tag's row. A store still
// behind is 409 failed_precondition, naming both values.
func (s *Server) handleTagsResume(w http.ResponseWriter, r *http.Request) error {
	a, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return err
	}
	tag := r.PathValue("tag")
	if err := segment.ValidName(tag); err != nil {
		return err
	}
	var b resumeBody
	if r.ContentLength != 0 {
		if err := readBody(r, &b); err != nil {
			return err
		}
	}
	if err := a.Resume(r.Context(), tag, b.Floor); err != nil {
		if errors.Is(err, segment.ErrRegressed) {
			return apiErrorf(http.StatusConflict, codePrecondition, "%v", err)
		}
		return err
	}
	row, err := s.tagRow(r.Context(), a, tag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, row)
	return nil
}
