package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/flakeid/flakeid/segment"
)

// tagJSON is a tag row on the wire (GET /v1/segment/tags and the answers
// of the changes): snake_case keys, max_id a string of digits like every
// ID, the time RFC 3339 (absent when the store keeps none).
type tagJSON struct {
	Tag         string    `json:"tag"`
	MaxID       int64     `json:"max_id,string"`
	Step        int64     `json:"step"`
	Description string    `json:"description"`
	Updated     time.Time `json:"update_time,omitzero"`
	// The stride the store records (Tinyid's delta and remainder): the
	// tag's IDs are ≡ remainder (mod delta). Absent when it records none.
	Delta     int64 `json:"delta,omitempty"`
	Remainder int64 `json:"remainder,omitempty"`
	// A series tag's settings (absent for a tag of plain IDs).
	seriesTagFields
}

func newTagJSON(t segment.Tag) tagJSON {
	return tagJSON{Tag: t.Name, MaxID: t.MaxID, Step: t.Step, Description: t.Description, Updated: t.Updated.UTC(),
		Delta: t.Delta, Remainder: t.Remainder, seriesTagFields: newSeriesTagFields(t)}
}

func (s *Server) handleTagsList(w http.ResponseWriter, r *http.Request) error {
	a, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.authorize(r.Header, "", false, false); err != nil {
		return err
	}
	tags, err := a.Tags(r.Context())
	if err != nil {
		return err
	}
	out := make([]tagJSON, 0, len(tags))
	for _, t := range tags {
		out = append(out, newTagJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tags": out})
	return nil
}

// handleTagsCreate answers POST /v1/segment/tags: {"tag": required,
// "step": 1–segment.MaxStep (absent: the allocator's default step),
// "description", "max_id": ≥ 0, a number or a string}, and for a series of
// business numbers "period" and "template" (required together), "tz",
// "start" (default 1) and "masked". Any other key, a key twice or a value
// of the wrong kind is a 400 naming it.
func (s *Server) handleTagsCreate(w http.ResponseWriter, r *http.Request) error {
	a, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return err
	}
	members, err := readObject(w, r, false)
	if err != nil {
		return err
	}
	var t segment.Tag
	var ser segment.Series
	has := map[string]bool{}
	hasTag := false
	for _, m := range members {
		if ok, err := readSeriesMember(m, &ser); ok {
			if err != nil {
				return err
			}
			has[m.key] = true
			continue
		}
		switch m.key {
		case "tag":
			t.Name, err = stringField(m)
			hasTag = true
		case "step":
			t.Step, err = wholeField(m, 1, segment.MaxStep, false)
		case "description":
			t.Description, err = stringField(m)
		case "max_id":
			t.MaxID, err = wholeField(m, 0, maxID, true)
		default:
			err = apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: POST /v1/segment/tags takes tag, step, description and max_id, and for a series period, template, tz, start and masked", clip(m.key))
		}
		if err != nil {
			return err
		}
	}
	if !hasTag {
		return apiErrorf(http.StatusBadRequest, codeInvalid, `tag is required: {"tag":"orders"}`)
	}
	if err := segment.ValidName(t.Name); err != nil {
		return err
	}
	if len(has) > 0 {
		if err := s.prepareSeries(&ser, has); err != nil {
			return err
		}
		t.Series = &ser
	}
	if err := a.Create(r.Context(), t); err != nil { // Step 0 (absent): the default step
		return err
	}
	row, err := s.tagRow(r.Context(), a, t.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, newTagJSON(row))
	return nil
}

func (s *Server) tagRow(ctx context.Context, a *segment.Allocator, name string) (segment.Tag, error) {
	tags, err := a.Tags(ctx)
	if err != nil {
		return segment.Tag{}, err
	}
	for _, t := range tags {
		if t.Name == name {
			return t, nil
		}
	}
	return segment.Tag{}, fmt.Errorf("%w: %q", segment.ErrUnknownTag, name)
}

// adminTag is the start of a request that changes the tag in its path: the
// allocator (404 without segment mode), an admin token, and the tag's name,
// checked.
func (s *Server) adminTag(r *http.Request) (*segment.Allocator, string, error) {
	a, err := s.segments()
	if err != nil {
		return nil, "", err
	}
	if err := s.authorize(r.Header, "", false, true); err != nil {
		return nil, "", err
	}
	tag := r.PathValue("tag")
	if err := segment.ValidName(tag); err != nil {
		return nil, "", err
	}
	return a, tag, nil
}

// handleTagsUpdate answers PATCH /v1/segment/tags/{tag}: {"step",
// "description"}, at least one. tag and max_id cannot be changed; they and
// any other key are a 400 naming them.
func (s *Server) handleTagsUpdate(w http.ResponseWriter, r *http.Request) error {
	a, tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	members, err := readObject(w, r, false)
	if err != nil {
		return err
	}
	var (
		step        *int64
		description *string
	)
	for _, m := range members {
		switch m.key {
		case "step":
			var n int64
			n, err = wholeField(m, 1, segment.MaxStep, false)
			step = &n
		case "description":
			var d string
			d, err = stringField(m)
			description = &d
		case "tag", "max_id":
			err = apiErrorf(http.StatusBadRequest, codeInvalid, "%s cannot be changed: PATCH takes step and description", m.key)
		default:
			err = apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: PATCH takes step and description", clip(m.key))
		}
		if err != nil {
			return err
		}
	}
	if step == nil && description == nil {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "nothing to change: give step or description")
	}
	if err := a.Update(r.Context(), tag, step, description); err != nil {
		return err
	}
	row, err := s.tagRow(r.Context(), a, tag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newTagJSON(row))
	return nil
}

// handleTagsDelete answers DELETE /v1/segment/tags/{tag}: the tag is taken
// out of service and its max_id kept (segment.Allocator.Delete), so that
// creating the name again continues above every ID it handed out. It takes
// no body. An unknown (or already deleted) tag is a 404.
func (s *Server) handleTagsDelete(w http.ResponseWriter, r *http.Request) error {
	a, tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	members, err := readObject(w, r, true)
	if err != nil {
		return err
	}
	if len(members) > 0 {
		return apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: DELETE takes no body", clip(members[0].key))
	}
	if err := a.Delete(r.Context(), tag); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tagDeletedJSON{Tag: tag, Deleted: true})
	return nil
}

// tagDeletedJSON is the answer of DELETE /v1/segment/tags/{tag}.
type tagDeletedJSON struct {
	Tag     string `json:"tag"`
	Deleted bool   `json:"deleted"`
}
