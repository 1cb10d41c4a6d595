package worker

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestDiagnose: every verdict of the renewal rule, with the words an
// operator reads.
func TestDiagnose(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	h := Hold{Owner: "me", WorkerID: 3, Incarnation: "aaaa", Initialised: t0, Stored: t0.Add(5 * time.Second), LeaseEnd: t0.Add(12 * time.Second)}
	mine := func() *Info {
		return &Info{Worker: 3, Holder: "me", Expires: t0.Add(12 * time.Second), HighWater: t0.Add(5 * time.Second)}
	}
	rec := func(inc string, init time.Time) *Namespace { return &Namespace{Incarnation: inc, Initialised: init} }
	for _, tc := range []struct {
		name   string
		h      Hold
		rec    *Namespace
		slot   *Info
		now    time.Time
		want   Verdict
		saying string
	}{
		{"held", h, rec("aaaa", t0), mine(), t0.Add(3 * time.Second), Holds, ""},
		{"record gone", h, nil, mine(), t0.Add(3 * time.Second), Lost, "the namespace record of dc is gone"},
		{"older record", h, rec("bbbb", t0.Add(-time.Second)), mine(), t0.Add(3 * time.Second), Lost,
			"before the one this holder acquired under (2026-12-05T12:00:00.000Z, incarnation aaaa): the store went back to an older copy"},
		{"newer record", h, rec("bbbb", t0.Add(time.Second)), mine(), t0.Add(3 * time.Second), ResetBefore, "another client found it first"},
		{"a record of the same instant, another incarnation", h, rec("bbbb", t0), mine(), t0.Add(3 * time.Second), ResetBefore, "re-initialised"},
		{"slot gone", h, rec("aaaa", t0), nil, t0.Add(3 * time.Second), Lost, "worker 3's slot in dc is gone"},
		{"mark below what was stored", h, rec("aaaa", t0), func() *Info { s := mine(); s.HighWater = t0.Add(4 * time.Second); return s }(),
			t0.Add(3 * time.Second), Lost, "below the 2026-12-05T12:00:05.000Z this holder stored"},
		{"another holder inside the lease", h, rec("aaaa", t0), &Info{Worker: 3, Holder: "newcomer", Expires: t0.Add(20 * time.Second), HighWater: t0.Add(9 * time.Second)},
			t0.Add(3 * time.Second), Lost, `is held by "newcomer" until 2026-12-05T12:00:20.000Z while this holder's lease runs until`},
		{"free inside the lease", h, rec("aaaa", t0), &Info{Worker: 3, HighWater: t0.Add(5 * time.Second)}, t0.Add(3 * time.Second), Lost, "is free while"},
		{"another holder after the lease", h, rec("aaaa", t0), &Info{Worker: 3, Holder: "newcomer", Expires: t0.Add(30 * time.Second), HighWater: t0.Add(9 * time.Second)},
			t0.Add(13 * time.Second), NotHeld, `worker 3 of dc is held by "newcomer"`},
		{"lapsed after the lease", h, rec("aaaa", t0), mine(), t0.Add(13 * time.Second), NotHeld, `lapsed (held by "me" until 2026-12-05T12:00:12.000Z)`},
		{"released: no lease end", func() Hold { r := h; r.LeaseEnd = time.Time{}; return r }(), rec("aaaa", t0),
			&Info{Worker: 3, HighWater: t0.Add(5 * time.Second)}, t0.Add(3 * time.Second), NotHeld, "worker 3 of dc is free"},
		{"the owner's process gone", func() Hold { r := h; r.OwnerGone = true; return r }(), rec("aaaa", t0),
			&Info{Worker: 3, Holder: "other", Expires: t0.Add(20 * time.Second), HighWater: t0.Add(9 * time.Second)}, t0.Add(3 * time.Second), NotHeld, `held by "other"`},
	} {
		d := Diagnose(tc.h, Found{Where: "dc", Store: "the store", Record: tc.rec, Slot: tc.slot, Now: tc.now})
		if d.Verdict != tc.want || !strings.Contains(d.Found, tc.saying) || (tc.want == Holds) != (d.Found == "") {
			t.Errorf("%s: %v %q; want %v saying %q", tc.name, d.Verdict, d.Found, tc.want, tc.saying)
		}
	}
}

// TestDiagnoseRapid: Diagnose says Holds exactly when the coordinator shows
// the claim's own record, its slot with a mark at or above what it stored,
// held by it and live; Lost whenever the record is gone or older, the slot
// gone or its mark lowered; and it never calls a slot that is the claim's
// live lease anything but Holds.
func TestDiagnoseRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		at := func(label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, label)) * time.Second)
		}
		h := Hold{Owner: "me", WorkerID: 1, Incarnation: "a", Initialised: at("initialised"), Stored: at("stored")}
		if rapid.Bool().Draw(rt, "leased") {
			h.LeaseEnd = at("lease end")
		}
		var f Found
		if rapid.Bool().Draw(rt, "record") {
			f.Record = &Namespace{Incarnation: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "incarnation"), Initialised: at("record initialised")}
		}
		if rapid.Bool().Draw(rt, "slot") {
			f.Slot = &Info{Worker: 1, Holder: rapid.SampledFrom([]string{"", "me", "other"}).Draw(rt, "holder"), Expires: at("expires"), HighWater: at("mark")}
		}
		f.Now = at("now")
		d := Diagnose(h, f)
		ownRecord := f.Record != nil && f.Record.Incarnation == h.Incarnation && !f.Record.Initialised.Before(h.Initialised)
		intact := ownRecord && f.Slot != nil && !f.Slot.HighWater.Before(h.Stored)
		live := f.Slot != nil && f.Slot.Holder == h.Owner && f.Slot.Held(f.Now)
		if (d.Verdict == Holds) != (intact && live) {
			rt.Fatalf("%+v %+v: %v %q; intact %v, live %v", h, f, d.Verdict, d.Found, intact, live)
		}
		if f.Record == nil || f.Record.Initialised.Before(h.Initialised) || (ownRecord && !intact) {
			if d.Verdict != Lost {
				rt.Fatalf("%+v %+v: %v %q; want Lost", h, f, d.Verdict, d.Found)
			}
		}
		if d.Verdict == NotHeld && f.Now.Before(h.LeaseEnd) {
			rt.Fatalf("%+v %+v: NotHeld inside the lease the coordinator granted (%q): a rollback taken for an expiry", h, f, d.Found)
		}
	})
}
