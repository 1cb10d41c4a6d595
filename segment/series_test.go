package segment

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestCompileSeriesRefuses(t *testing.T) {
	for _, c := range []struct {
		s    Series
		step int64
		want string
	}{
		{Series{Period: "fortnight", Template: "{yyyy}{seq:3}"}, 1, `period "fortnight"`},
		{Series{Period: Day, TZ: "Mars/Olympus", Template: "{yyyyMMdd}{seq:3}"}, 1, `time zone "Mars/Olympus"`},
		{Series{Period: Day, TZ: "Local", Template: "{yyyyMMdd}{seq:3}"}, 1, `time zone "Local"`},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3}{seq:2}"}, 1, "two counters"},
		{Series{Period: Day, Template: "{yyyyMMdd}"}, 1, "no counter"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:0}"}, 1, "{seq:0}"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:15}"}, 1, "{seq:15}"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:x}"}, 1, "{seq:x}"},
		{Series{Period: Day, Template: "{yyyyMMDD}{seq:3}"}, 1, `unknown placeholder at "DD"`},
		{Series{Period: Day, Template: "{yyyyMM}{seq:3}"}, 1, "cannot show which day"},
		{Series{Period: Month, Template: "{MM}{seq:3}"}, 1, "cannot show which month"},
		{Series{Period: Week, Template: "{yyyy}W{ww}{seq:3}"}, 1, "cannot show which week"},
		{Series{Period: Day, Template: "{yyyyMMddHH}{seq:3}"}, 1, "shows {HH}"},
		{Series{Period: Month, Template: "{yyyyMMdd}{seq:3}"}, 1, "shows {dd}"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3}{yy}"}, 1, "year twice"},
		{Series{Period: Day, Template: "{yyyyMMdd}{MM}{seq:3}"}, 1, "shows {MM} twice"},
		{Series{Period: Day, Template: "{yyyyMMdd{seq:3}"}, 1, `unknown placeholder at "{seq:3"`},
		{Series{Period: Day, Template: "{yyyyMMdd}}{seq:3}"}, 1, "} without a {"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3"}, 1, "{ without a }"},
		{Series{Period: Day, Template: "{}{yyyyMMdd}{seq:3}"}, 1, "empty placeholder"},
		{Series{Period: Day, Template: "A\tB{yyyyMMdd}{seq:3}"}, 1, "control character"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3}" + strings.Repeat("x", 60)}, 1, "template of 77 bytes"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3}", Start: 1000}, 1, "start 1000, want 0–999"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3}", Start: -1}, 1, "start -1"},
		{Series{Period: Day, Template: "{yyyyMMdd}{seq:3}", Start: 1}, 1000, "step 1000 is more than the 999 numbers"},
		{Series{Period: Minute, Template: "{yyyyMMddHHmm}{seq:7}"}, 1, "would be 19 digits"},
	} {
		_, err := CompileSeries(c.s, c.step)
		if !errors.Is(err, ErrInvalidTag) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileSeries(%+v, %d) = %v; want ErrInvalidTag saying %q", c.s, c.step, err, c.want)
		}
	}
}

func TestSeriesCapacityText(t *testing.T) {
	for _, c := range []struct {
		s    Series
		want string
	}{
		{Series{Period: Day, Template: "ORD-{yyyyMMdd}-{seq:6}", Start: 1}, "at most 999,999 numbers a day"},
		{Series{Period: Hour, Template: "{yyyyMMddHH}{seq:4}"}, "at most 10,000 numbers an hour"},
		{Series{Period: Year, Template: "INV{yy}{seq:5}", Start: 1}, "at most 99,999 numbers a year"},
	} {
		f, err := CompileSeries(c.s, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.CapacityText(); got != c.want {
			t.Errorf("%s: %q, want %q", c.s.Template, got, c.want)
		}
	}
}

// TestSeriesPeriods checks labels and bounds at known boundaries: local
// midnight in a zone with DST on both sides of a change, ISO weeks across
// a new year, a repeated and a skipped local hour.
func TestSeriesPeriods(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s          Series
		at         time.Time
		label      int64
		start, end time.Time
	}{
		{Series{Period: Day, TZ: "Europe/Berlin", Template: "{yyyyMMdd}{seq:3}"}, time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC),
			20260329, time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 0, 0, 0, 0, berlin)},
		{Series{Period: Week, Template: "{GGGG}W{ww}-{seq:3}"}, time.Date(2027, 1, 2, 12, 0, 0, 0, time.UTC),
			202653, time.Date(2026, 12, 28, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)},
		{Series{Period: Hour, TZ: "Europe/Berlin", Template: "{yyyyMMddHH}{seq:3}"}, time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), // 02:30 the second time
			2026102502, time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC)},
		{Series{Period: Month, TZ: "America/Los_Angeles", Template: "{yyyyMM}{seq:3}"}, time.Date(2026, 12, 1, 7, 59, 0, 0, time.UTC),
			202611, time.Date(2026, 11, 1, 0, 0, 0, 0, mustZone(t, "America/Los_Angeles")), time.Date(2026, 12, 1, 0, 0, 0, 0, mustZone(t, "America/Los_Angeles"))},
	} {
		f, err := CompileSeries(c.s, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := c.label
		p := f.Period(c.at)
		if p.Label != want || !p.Start.Equal(c.start) || !p.End.Equal(c.end) {
			t.Errorf("%s at %v: %d [%v, %v), want %d [%v, %v)", c.s.Period, c.at, p.Label, p.Start, p.End, want, c.start, c.end)
		}
	}
	f, _ := CompileSeries(Series{Period: Hour, TZ: "Europe/Berlin", Template: "{yyyyMMddHH}-{seq:3}"}, 1)
	if _, _, err := f.Parse("2026032902-001"); err == nil {
		t.Error("Parse accepted 02:00 of 29 March 2026 in Berlin, an hour that does not exist")
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSeriesFormatParse is a property test over random series (period,
// zone, template of random literals and date parts in random order,
// width, start) and instants: the period containing an instant contains
// it; its numbers read back (text and numeric form) as the period and
// counter; two different periods or counters never give the same text or
// numeric form; and damaged texts are refused, never read as another
// number.
func TestSeriesFormatParse(t *testing.T) {
	zones := []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham"}
	need := map[Period][]string{
		Year: {"yyyy"}, Month: {"yyyy", "MM"}, Day: {"yyyy", "MM", "dd"}, Hour: {"yyyy", "MM", "dd", "HH"},
		Minute: {"yyyy", "MM", "dd", "HH", "mm"}, Week: {"GGGG", "ww"},
	}
	rapid.Check(t, func(t *rapid.T) {
		period := rapid.SampledFrom([]Period{Minute, Hour, Day, Week, Month, Year}).Draw(t, "period")
		toks := append([]string(nil), need[period]...)
		if period != Week && rapid.Bool().Draw(t, "yy") {
			toks[0] = "yy"
		}
		if period == Week && rapid.Bool().Draw(t, "weekByDate") {
			toks = []string{"yyyy", "MM", "dd"}
		}
		width := rapid.IntRange(1, 18-period.labelDigits()).Draw(t, "width")
		perm := rapid.Permutation(append(toks, fmt.Sprintf("seq:%d", width))).Draw(t, "order")
		lit := rapid.SampledFrom([]string{"", "-", "ORD-", "/", "x", "7"})
		var tpl strings.Builder
		for _, p := range perm {
			tpl.WriteString(lit.Draw(t, "lit") + "{" + p + "}")
		}
		tpl.WriteString(lit.Draw(t, "tail"))
		pow := int64(1)
		for range width {
			pow *= 10
		}
		s := Series{Period: period, TZ: rapid.SampledFrom(zones).Draw(t, "tz"), Template: tpl.String(), Start: rapid.Int64Range(0, pow-1).Draw(t, "start")}
		f, err := CompileSeries(s, 1)
		if err != nil && strings.Contains(err.Error(), "could be read two ways") {
			// Refused: digits only, as many as the numeric form, in
			// another order. Check that it is so: no literal but digits, and
			// not the numeric form's order (the label's fields, then the
			// counter).
			canonical := "{" + strings.Join(need[period], "}{") + fmt.Sprintf("}{seq:%d}", width)
			lits := regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(s.Template, "")
			if strings.Trim(lits, "0123456789") != "" || s.Template == canonical {
				t.Fatalf("template %q was refused as ambiguous: %v", s.Template, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("CompileSeries(%+v): %v", s, err)
		}
		at := time.Unix(rapid.Int64Range(949363200, 4097174400).Draw(t, "unix"), 0) // Feb 2000 – Nov 2099: {yy} reads 2000–2099
		p := f.Period(at)
		if at.Before(p.Start) || !at.Before(p.End) {
			t.Fatalf("%v is not in its period %d [%v, %v)", at, p.Label, p.Start, p.End)
		}
		counter := rapid.Int64Range(s.Start, pow-1).Draw(t, "counter")
		before, after := f.render(p.Label)
		text := string(appendPadded([]byte(before), counter, width)) + after
		for _, form := range []string{text, fmt.Sprint(f.Numeric(p.Label, counter))} {
			l, c, err := f.Parse(form)
			if err != nil || l != p.Label || c != counter {
				t.Fatalf("Parse(%q) of template %q = %d, %d, %v; want %d, %d", form, s.Template, l, c, err, p.Label, counter)
			}
		}
		// Another period (an instant far enough away) or counter differs.
		other := f.Period(at.Add(time.Duration(rapid.Int64Range(1, 400*24).Draw(t, "hours")) * time.Hour * []time.Duration{1, -1}[rapid.IntRange(0, 1).Draw(t, "sign")]))
		if other.Label != p.Label {
			b2, a2 := f.render(other.Label)
			if t2 := string(appendPadded([]byte(b2), counter, width)) + a2; t2 == text && !strings.Contains(s.Template, "{yy") {
				t.Fatalf("periods %d and %d both give %q", p.Label, other.Label, text)
			}
		}
		// A damaged text: one character changed.
		i := rapid.IntRange(0, len(text)-1).Draw(t, "at")
		c := rapid.SampledFrom([]byte("0123456789-x/")).Draw(t, "char")
		if c != text[i] {
			bad := text[:i] + string(c) + text[i+1:]
			if l, cn, err := f.Parse(bad); err == nil {
				b2, a2 := f.render(l)
				if string(appendPadded([]byte(b2), cn, width))+a2 != bad && fmt.Sprint(f.Numeric(l, cn)) != bad {
					t.Fatalf("Parse(%q) read %d, %d, which reads %q", bad, l, cn, string(appendPadded([]byte(b2), cn, width))+a2)
				}
			}
		}
	})
}
