package segmenttest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/segment"
)

// counterKeys is a CounterKeys with key ids 1 and 2.
func counterKeys(id uint8) (segment.CounterMasker, error) {
	if id != 1 && id != 2 {
		return nil, fmt.Errorf("no key %d", id)
	}
	return idmask.New([]byte(strings.Repeat(string(rune('a'+id)), idmask.KeySize)), id, idmask.Bits63)
}

// seriesAdmin: a series' settings are kept by the store (another client's
// allocator lists them), survive a description update, and its periods
// get rows <tag>::<label> that Tags leaves out; names with "::" and
// descriptions that look like settings are refused; a deleted series,
// created again, continues every period's counter.
func seriesAdmin(t *testing.T, c Connector) {
	ctx := ctxT(t)
	clock := &fakeClock{now: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)}
	a := allocator(t, c.Connect(t), segment.Config{Now: clock.Now, CounterKeys: counterKeys})
	ser := segment.Series{Period: segment.Day, TZ: "Europe/Berlin", Template: "ORD-{yyyyMMdd}-{seq:6}", Start: 1}
	if err := a.Create(ctx, segment.Tag{Name: "orders", Step: 10, Description: "web shop", Series: &ser}); err != nil {
		t.Fatal(err)
	}
	other := allocator(t, c.Connect(t), segment.Config{Now: clock.Now})
	tags, err := other.Tags(ctx)
	if err != nil || len(tags) != 1 || tags[0].Series == nil || *tags[0].Series != ser || tags[0].Description != "web shop" {
		t.Fatalf("Tags = %+v, %v; want orders with %+v and its description", tags, err, ser)
	}
	n, err := a.NextNumber(ctx, "orders")
	if err != nil || n.Text != "ORD-20261128-000001" || n.Numeric != 20261128000001 || n.Seq != 1 {
		t.Fatalf("first number %+v, %v; want ORD-20261128-000001", n, err)
	}
	desc := "web shop, EU"
	if err := other.Update(ctx, "orders", nil, &desc); err != nil {
		t.Fatal(err)
	}
	tags, _ = a.Tags(ctx)
	if len(tags) != 1 || tags[0].Series == nil || *tags[0].Series != ser || tags[0].Description != desc {
		t.Fatalf("after Update, Tags = %+v; want the series kept and the new description", tags)
	}
	rows, err := c.Connect(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := tagNames(rows); !slices.Equal(names, []string{"orders", "orders::20261128"}) {
		t.Fatalf("the store's rows are %v; want orders and orders::20261128", names)
	}
	for _, bad := range []segment.Tag{
		{Name: "orders::20261129", Step: 1},
		{Name: "plain", Step: 1, Description: "flakeid-series:v1 {}"},
	} {
		if err := a.Create(ctx, bad); !errors.Is(err, segment.ErrInvalidTag) {
			t.Errorf("Create(%+v): %v, want ErrInvalidTag", bad, err)
		}
	}
	if _, err := a.NextID(ctx, "orders"); !errors.Is(err, segment.ErrSeries) {
		t.Fatalf("NextID of a series: %v, want ErrSeries", err)
	}
	if _, err := a.NextID(ctx, "orders::20261128"); err == nil {
		t.Fatal("NextID of a period row handed out an ID")
	}
	if err := a.Delete(ctx, "orders::20261128"); !errors.Is(err, segment.ErrInvalidTag) {
		t.Fatalf("Delete of a period row: %v, want ErrInvalidTag", err)
	}
	mustCreate(t, c.Connect(t), segment.Tag{Name: "plain", Step: 5})
	if _, err := a.NextNumber(ctx, "plain"); !errors.Is(err, segment.ErrNotSeries) {
		t.Fatalf("NextNumber of a plain tag: %v, want ErrNotSeries", err)
	}

	// Deleted and created again: the day's counter goes on above.
	if err := a.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NextNumber(ctx, "orders"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("NextNumber of a deleted series: %v, want ErrUnknownTag", err)
	}
	changed := ser
	changed.Template = "ORD-{yyyyMMdd}-{seq:7}"
	if err := a.Create(ctx, segment.Tag{Name: "orders", Step: 10, Series: &changed}); !errors.Is(err, segment.ErrInvalidTag) || !strings.Contains(err.Error(), "same settings") {
		t.Fatalf("creating the deleted series again with another template: %v, want ErrInvalidTag asking for the same settings", err)
	}
	if err := a.Create(ctx, segment.Tag{Name: "orders", Step: 10, Series: &ser}); err != nil {
		t.Fatal(err)
	}
	n2, err := a.NextNumber(ctx, "orders")
	if err != nil || n2.Seq <= n.Seq || !strings.HasPrefix(n2.Text, "ORD-20261128-") {
		t.Fatalf("after deleting and creating the series again: %+v, %v; want a counter above %d", n2, err, n.Seq)
	}
}

func tagNames(ts []segment.Tag) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// seriesNeverDuplicates: three allocators on their own clients and clocks
// (seconds apart, one stepped back over a boundary, one restarted) take
// numbers of a minute series through several boundaries. No text and no
// numeric form is handed out twice; every number reads back (DecodeNumber)
// as the period and counter it was issued with and carries a period its
// allocator's clock was in; counters start at Start and the holes of a
// period stay within one step per allocator instance that loaded it.
func seriesNeverDuplicates(t *testing.T, c Connector) {
	ctx := ctxT(t)
	const step = 7
	ser := segment.Series{Period: segment.Minute, TZ: "Asia/Kolkata", Template: "T{yy}{MM}{dd}-{HH}{mm}.{seq:5}", Start: 100}
	base := time.Date(2026, 11, 28, 18, 29, 50, 0, time.UTC)
	admin := allocator(t, c.Connect(t), segment.Config{})
	if err := admin.Create(ctx, segment.Tag{Name: "tickets", Step: step, Series: &ser}); err != nil {
		t.Fatal(err)
	}
	type issued struct {
		n     segment.Number
		clock time.Time
	}
	var mu sync.Mutex
	var all []issued
	instances := map[int64]int{} // period label → allocator instances that issued in it
	var wg sync.WaitGroup
	for node := range 3 {
		wg.Go(func() {
			clock := &fakeClock{now: base.Add(time.Duration(node) * 3 * time.Second)}
			a := allocator(t, c.Connect(t), segment.Config{Now: clock.Now, Prefetch: 0.3})
			labels := map[int64]bool{}
			flush := func() {
				mu.Lock()
				for l := range labels {
					instances[l]++
				}
				mu.Unlock()
				clear(labels)
			}
			for i := range 600 {
				switch {
				case node == 1 && i == 300:
					clock.add(-25 * time.Second) // stepped back over a boundary
				case node == 2 && i == 300:
					a.Close() // restarted: its buffers are lost
					flush()
					a = allocator(t, c.Connect(t), segment.Config{Now: clock.Now, Prefetch: 0.3})
				}
				clock.add(400 * time.Millisecond)
				var got []segment.Number
				if i%3 == 0 {
					ns, err := a.NextNumbers(ctx, "tickets", 4)
					if err != nil {
						t.Error(err)
						return
					}
					got = ns
				} else {
					n, err := a.NextNumber(ctx, "tickets")
					if err != nil {
						t.Error(err)
						return
					}
					got = []segment.Number{n}
				}
				now := clock.Now()
				mu.Lock()
				for _, n := range got {
					all = append(all, issued{n, now})
					labels[n.Label] = true
				}
				mu.Unlock()
			}
			flush()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	f, err := admin.Format(ctx, "tickets")
	if err != nil {
		t.Fatal(err)
	}
	texts, numerics := map[string]bool{}, map[int64]bool{}
	seqs := map[int64][]int64{}
	for _, x := range all {
		if texts[x.n.Text] || numerics[x.n.Numeric] {
			t.Fatalf("number %s (%d) handed out twice", x.n.Text, x.n.Numeric)
		}
		texts[x.n.Text], numerics[x.n.Numeric] = true, true
		if p := f.Period(x.clock); p.Label != x.n.Label {
			t.Fatalf("%s carries period %d; its allocator's clock was at %v, in period %d", x.n.Text, x.n.Label, x.clock, p.Label)
		}
		for _, form := range []string{x.n.Text, fmt.Sprint(x.n.Numeric)} {
			d, err := admin.DecodeNumber(ctx, "tickets", form)
			if err != nil || d.Label != x.n.Label || d.Seq != x.n.Seq || d.Text != x.n.Text || d.Numeric != x.n.Numeric {
				t.Fatalf("DecodeNumber(%s) = %+v, %v; want period %d counter %d", form, d, err, x.n.Label, x.n.Seq)
			}
		}
		seqs[x.n.Label] = append(seqs[x.n.Label], x.n.Seq)
	}
	if len(seqs) < 4 {
		t.Fatalf("the run covered %d periods, want at least 4", len(seqs))
	}
	for label, s := range seqs {
		slices.Sort(s)
		holes := (s[len(s)-1] - s[0] + 1) - int64(len(s))
		// One step per allocator instance that issued in the period, and
		// one for the restarted node's instance, which may have prefetched
		// it and issued nothing there.
		bound := int64(instances[label]+1) * step
		if holes > bound {
			t.Errorf("period %d: %d numbers between %d and %d, %d holes; the bound is one step per allocator instance, %d",
				label, len(s), s[0], s[len(s)-1], holes, bound)
		}
		if s[0] < ser.Start || s[0] >= ser.Start+bound {
			t.Errorf("period %d starts at counter %d; want %d, or within %d of it", label, s[0], ser.Start, bound)
		}
	}
}

// seriesPeriodFull: a period whose counters are used up refuses with
// ErrPeriodFull (and Full lists it) — never a wider number, never a wrap —
// until the next period, which starts again at Start; a masked series
// shows each period's counters shuffled, fixed width, unique, and decodes
// them back.
func seriesPeriodFull(t *testing.T, c Connector) {
	ctx := ctxT(t)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := allocator(t, c.Connect(t), segment.Config{Now: clock.Now, CounterKeys: counterKeys})
	small := segment.Series{Period: segment.Hour, Template: "{yyyyMMddHH}-{seq:1}", Start: 3}
	if err := a.Create(ctx, segment.Tag{Name: "small", Step: 2, Series: &small}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 7 {
		n, err := a.NextNumber(ctx, "small")
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, n.Text)
	}
	if want := []string{"2026010100-3", "2026010100-4", "2026010100-5", "2026010100-6", "2026010100-7", "2026010100-8", "2026010100-9"}; !slices.Equal(got, want) {
		t.Fatalf("numbers %v, want %v", got, want)
	}
	for range 2 {
		if n, err := a.NextNumber(ctx, "small"); !errors.Is(err, segment.ErrPeriodFull) {
			t.Fatalf("the eighth number of a period of 7: %+v, %v; want ErrPeriodFull", n, err)
		}
	}
	if full := a.Full(); len(full) != 1 || !strings.Contains(full[0].Error(), `"small"`) {
		t.Fatalf("Full() = %v, want the small series", full)
	}
	clock.add(time.Hour)
	if n, err := a.NextNumber(ctx, "small"); err != nil || n.Text != "2026010101-3" {
		t.Fatalf("the next hour's first number: %+v, %v; want 2026010101-3", n, err)
	}
	if full := a.Full(); len(full) != 0 {
		t.Fatalf("Full() in the next period = %v, want none", full)
	}

	masked := segment.Series{Period: segment.Day, Template: "M{yyyyMMdd}{seq:3}", Start: 1, Masked: true, KeyID: 2}
	if err := a.Create(ctx, segment.Tag{Name: "masked", Step: 50, Series: &masked}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	ordered := 0
	var prev int64
	for i := range 999 {
		n, err := a.NextNumber(ctx, "masked")
		if err != nil {
			t.Fatalf("masked number %d: %v", i, err)
		}
		if seen[n.Text] || len(n.Text) != len("M20260101")+3 || n.Seq != int64(i)+1 {
			t.Fatalf("masked number %d: %+v (seen before, wrong width or counter)", i, n)
		}
		seen[n.Text] = true
		shown := n.Numeric % 1000
		if shown == prev+1 {
			ordered++
		}
		prev = shown
		if d, err := a.DecodeNumber(ctx, "masked", n.Text); err != nil || d.Seq != n.Seq || d.Counter != shown {
			t.Fatalf("DecodeNumber(%s) = %+v, %v; want counter %d shown as %d", n.Text, d, err, n.Seq, shown)
		}
	}
	if ordered > 20 {
		t.Fatalf("%d of 999 masked counters follow the one before: not shuffled", ordered)
	}
	if _, err := a.NextNumber(ctx, "masked"); !errors.Is(err, segment.ErrPeriodFull) {
		t.Fatalf("the 1000th masked number of a 999-number day: %v, want ErrPeriodFull", err)
	}
	noKeys := allocator(t, c.Connect(t), segment.Config{Now: clock.Now})
	if _, err := noKeys.NextNumber(ctx, "masked"); !errors.Is(err, segment.ErrNoKey) {
		t.Fatalf("a masked series without its key: %v, want ErrNoKey", err)
	}
}
