package segmenttest

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/segment"
)

// deleteKeepsMark: a deleted tag is unknown to every operation of every
// client (Fetch, Get, Update, a second Delete) and missing from List; the
// name created again continues above every ID it handed out, whatever
// MaxID the new Create asks for, and a MaxID above the kept one is taken.
func deleteKeepsMark(t *testing.T, c Connector) {
	s, other := c.Connect(t), c.Connect(t)
	ctx := ctxT(t)
	mustCreate(t, s, segment.Tag{Name: "gone", Step: 10, Description: "to delete"})
	mustCreate(t, s, segment.Tag{Name: "kept", Step: 10})
	r1, err := s.Fetch(ctx, "gone", 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, st := range []segment.Store{s, other} {
		if _, err := st.Fetch(ctx, "gone", 1); !errors.Is(err, segment.ErrUnknownTag) {
			t.Fatalf("Fetch of a deleted tag: %v, want ErrUnknownTag", err)
		}
		if _, err := st.Get(ctx, "gone"); !errors.Is(err, segment.ErrUnknownTag) {
			t.Fatalf("Get of a deleted tag: %v, want ErrUnknownTag", err)
		}
		step := int64(7)
		if err := st.Update(ctx, "gone", &step, nil); !errors.Is(err, segment.ErrUnknownTag) {
			t.Fatalf("Update of a deleted tag: %v, want ErrUnknownTag", err)
		}
		if err := st.Delete(ctx, "gone"); !errors.Is(err, segment.ErrUnknownTag) {
			t.Fatalf("Delete of a deleted tag: %v, want ErrUnknownTag", err)
		}
		tags, err := st.List(ctx)
		if err != nil || len(tags) != 1 || tags[0].Name != "kept" {
			t.Fatalf("List after Delete = %+v, %v; want only kept", tags, err)
		}
	}
	if err := s.Delete(ctx, "never-was"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("Delete of an unknown tag: %v, want ErrUnknownTag", err)
	}
	if err := s.Delete(ctx, "bad tag!"); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Delete of an invalid name: %v, want ErrInvalidTag", err)
	}

	// Created again (by another client, asking to start at 1): above r1.
	mustCreate(t, other, segment.Tag{Name: "gone", Step: 5, Description: "again", MaxID: 1})
	if err := s.Create(ctx, segment.Tag{Name: "gone", Step: 5}); !errors.Is(err, segment.ErrTagExists) {
		t.Fatalf("Create of a tag created again: %v, want ErrTagExists", err)
	}
	got, err := s.Get(ctx, "gone")
	if err != nil || got.Step != 5 || got.Description != "again" || got.MaxID < r1.End {
		t.Fatalf("the tag created again = %+v, %v; want step 5, description again, max_id ≥ %d", got, err, r1.End)
	}
	r2, err := s.Fetch(ctx, "gone", 10)
	if err != nil || r2.Start < r1.End {
		t.Fatalf("Fetch after creating again = %+v, %v; want it to start at or above %d", r2, err, r1.End)
	}
	// A MaxID above the kept one is taken.
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, segment.Tag{Name: "gone", Step: 5, MaxID: r2.End + 1000})
	if r3, err := s.Fetch(ctx, "gone", 1); err != nil || r3.Start != r2.End+1000 {
		t.Fatalf("Fetch after creating again at %d = %+v, %v", r2.End+1000, r3, err)
	}
}

// allocatorDelete: an allocator stops serving a tag it deletes at once;
// another allocator of the store serves what it buffered, then fails at its
// next fetch; the tag created again on use (AutoCreate) continues above
// every ID either handed out, and the other allocator's next fetch too.
func allocatorDelete(t *testing.T, c Connector) {
	ctx := ctxT(t)
	s := c.Connect(t)
	mustCreate(t, s, segment.Tag{Name: "orders", Step: 10})
	a := allocator(t, s, segment.Config{})
	b := allocator(t, c.Connect(t), segment.Config{})
	seen := map[int64]bool{}
	take := func(al *segment.Allocator) (int64, error) {
		id, err := al.NextID(ctx, "orders")
		if err == nil {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
		}
		return id, err
	}
	var top int64
	for range 15 {
		for _, al := range []*segment.Allocator{a, b} {
			id, err := take(al)
			if err != nil {
				t.Fatal(err)
			}
			top = max(top, id)
		}
	}
	h, err := a.Tag(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "orders"); err != nil {
		t.Fatalf("Allocator.Delete: %v", err)
	}
	if _, err := a.NextID(ctx, "orders"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("NextID after Delete: %v, want ErrUnknownTag", err)
	}
	if _, err := h.NextID(ctx); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("a Handle's NextID after Delete: %v, want ErrUnknownTag", err)
	}
	// b serves its buffers (IDs fetched before the Delete), then fails.
	var err2 error
	for range 40 {
		var id int64
		if id, err2 = take(b); err2 != nil {
			break
		}
		top = max(top, id)
	}
	if !errors.Is(err2, segment.ErrUnknownTag) {
		t.Fatalf("b after the Delete and its buffers: %v, want ErrUnknownTag", err2)
	}
	// Created again on use: above everything handed out.
	auto := allocator(t, c.Connect(t), segment.Config{AutoCreate: true, DefaultStep: 10})
	id, err := take(auto)
	if err != nil || id <= top {
		t.Fatalf("the tag created again on use: first ID %d, %v; want above %d", id, err, top)
	}
	// b's next fetch finds the tag again, above too.
	waitErr := err
	for range 100 {
		if id, waitErr = take(b); waitErr == nil {
			break
		}
	}
	if waitErr != nil || id <= top {
		t.Fatalf("b after the tag came back: %d, %v; want above %d", id, waitErr, top)
	}
}

// deleteNeverReissues: random Create, Fetch, Delete and Create-again of a
// few tags through two clients never hand out a range that overlaps one
// handed out before for the same name, and each operation's outcome is the
// one the tag's state calls for.
func deleteNeverReissues(t *testing.T, c Connector) {
	clients := []segment.Store{c.Connect(t), c.Connect(t)}
	ctx := ctxT(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		names := []string{fmt.Sprintf("r%d-a", run), fmt.Sprintf("r%d-b", run)}
		live := map[string]bool{}
		var handed [][3]int64 // name index, start, end
		for i := range rapid.IntRange(1, 30).Draw(rt, "ops") {
			st := clients[rapid.IntRange(0, 1).Draw(rt, fmt.Sprintf("client%d", i))]
			ni := rapid.IntRange(0, 1).Draw(rt, fmt.Sprintf("name%d", i))
			name := names[ni]
			switch rapid.IntRange(0, 2).Draw(rt, fmt.Sprintf("op%d", i)) {
			case 0:
				maxID := rapid.Int64Range(0, 500).Draw(rt, fmt.Sprintf("maxid%d", i))
				err := st.Create(ctx, segment.Tag{Name: name, Step: 10, MaxID: maxID})
				if live[name] != errors.Is(err, segment.ErrTagExists) || (err != nil && !live[name]) {
					rt.Fatalf("Create(%s, max_id %d) with live=%v: %v", name, maxID, live[name], err)
				}
				live[name] = true
			case 1:
				n := rapid.Int64Range(1, 50).Draw(rt, fmt.Sprintf("n%d", i))
				r, err := st.Fetch(ctx, name, n)
				if !live[name] {
					if !errors.Is(err, segment.ErrUnknownTag) {
						rt.Fatalf("Fetch(%s) of a tag not live: %+v, %v", name, r, err)
					}
					continue
				}
				if err != nil {
					rt.Fatalf("Fetch(%s): %v", name, err)
				}
				for _, h := range handed {
					if h[0] == int64(ni) && r.Start < h[2] && h[1] < r.End {
						rt.Fatalf("Fetch(%s) = [%d, %d) overlaps [%d, %d) handed out before", name, r.Start, r.End, h[1], h[2])
					}
				}
				handed = append(handed, [3]int64{int64(ni), r.Start, r.End})
			case 2:
				err := st.Delete(ctx, name)
				if live[name] != (err == nil) || (err != nil && !errors.Is(err, segment.ErrUnknownTag)) {
					rt.Fatalf("Delete(%s) with live=%v: %v", name, live[name], err)
				}
				live[name] = false
			}
		}
	})
}
