package idview

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"go.jetify.com/typeid"
	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/snowflake"
)

// uuidDrawLayout draws a layout whose IDs the view can map: any widths,
// units from 1 µs to 1 h (sub-millisecond ones included), epochs, with a
// time field that ends before year 9999's cap.
func uuidDrawLayout(t *rapid.T) (snowflake.Layout, int64) {
	_, n := layoutDraw(t)
	maxTick := usableTicks(n)
	if maxTick < 0 {
		t.Skip("no tick before year 9999")
	}
	return n, maxTick
}

// TestUUIDViewJudged maps random IDs of random layouts to UUIDv7s and
// checks them with implementations nobody here wrote: google/uuid parses
// the text as version 7 of the RFC variant with flakeid's time; oklog/ulid
// reads the ULID text as the same 128 bits and time; jetify's typeid reads
// the TypeID as the same prefix and UUID. The view maps each back to the
// ID, whatever the random bits, so two IDs never share a UUID.
func TestUUIDViewJudged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n, maxTick := uuidDrawLayout(t)
		v, err := New(n)
		if err != nil {
			t.Fatal(err)
		}
		id, err := n.Compose(layoutDrawParts(t, n, maxTick))
		if err != nil {
			t.Fatal(err)
		}
		var random [10]byte
		copy(random[:], rapid.SliceOfN(rapid.Byte(), 10, 10).Draw(t, "random"))
		u, err := v.UUID(id, random)
		if err != nil {
			t.Fatalf("UUID(%d) with %v: %v", id, n, err)
		}
		p, _ := n.Decode(id)
		wantMs := p.Time.UnixMilli()
		g, err := uuid.Parse(u.String())
		if err != nil || g != uuid.UUID(u) || g.Version() != 7 || g.Variant() != uuid.RFC4122 {
			t.Fatalf("google/uuid.Parse(%s) = %v version %d variant %v, %v", u, g, g.Version(), g.Variant(), err)
		}
		if sec, nsec := g.Time().UnixTime(); sec*1000+nsec/1e6 != wantMs {
			t.Fatalf("google/uuid time of %s = %d ms, want %d (ID %d, time %v)", u, sec*1000+nsec/1e6, wantMs, id, p.Time)
		}
		text := string(u.AppendForm(nil, FormULID, ""))
		ul, err := ulid.ParseStrict(text)
		if err != nil || ul != ulid.ULID(u) || int64(ul.Time()) != wantMs {
			t.Fatalf("ulid.ParseStrict(%s) = %v (time %d), %v; want %x, %d", text, ul, ul.Time(), err, u, wantMs)
		}
		prefix := rapid.SampledFrom([]string{"", "order", "user_account"}).Draw(t, "prefix")
		text = string(u.AppendForm(nil, FormTypeID, prefix))
		tid, err := typeid.FromString(text)
		if err != nil || tid.Prefix() != prefix || tid.UUID() != u.String() {
			t.Fatalf("typeid.FromString(%s) = %v %v, %v", text, tid.Prefix(), tid.UUID(), err)
		}
		for _, f := range []Form{FormUUID, FormTypeID, FormULID} {
			text := string(u.AppendForm(nil, f, prefix))
			back, form, gotPrefix, err := ParseText(text)
			wantForm := f
			if f == FormTypeID && prefix == "" && !strings.ContainsAny(text, "abcdefghjkmnpqrstvwxyz") {
				wantForm = FormULID // digits only: read as the ULID it also is
			}
			if err != nil || back != u || form != wantForm || (form == FormTypeID && gotPrefix != prefix) {
				t.Fatalf("ParseText(%s) = %x %v %q, %v", text, back, form, gotPrefix, err)
			}
		}
		got, err := v.ID(u)
		if err != nil || got != id {
			t.Fatalf("ID(UUID(%d)) with %v = %d, %v (UUID %s)", id, n, got, err, u)
		}
	})
}

// TestUUIDViewSortsInIssueOrder has generators of random layouts (units
// from 1 µs) issue IDs while their clocks move, and checks that their
// UUIDs, with fresh random bits each, sort as bytes and as every text form
// in the order the IDs were issued.
func TestUUIDViewSortsInIssueOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		unit := rapid.SampledFrom([]time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond, 10 * time.Millisecond, time.Second}).Draw(rt, "unit")
		l := snowflake.Layout{TimeBits: 41, DatacenterBits: rapid.IntRange(0, 5).Draw(rt, "dc"), WorkerBits: rapid.IntRange(0, 5).Draw(rt, "worker"),
			SequenceBits: rapid.IntRange(0, 8).Draw(rt, "seq"), Epoch: time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 1e9).Draw(rt, "epochShift"))), TimeUnit: unit}
		v, err := New(l)
		if err != nil {
			rt.Fatal(err)
		}
		clk := &stepClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
		g, err := snowflake.New(snowflake.Settings{Layout: l, Now: clk.Now, Policy: snowflake.Borrow, MaxBorrow: time.Hour,
			DatacenterID: int64(rapid.IntRange(0, 1<<l.DatacenterBits-1).Draw(rt, "dcID")), WorkerID: int64(rapid.IntRange(0, 1<<l.WorkerBits-1).Draw(rt, "workerID"))})
		if err != nil {
			rt.Fatal(err)
		}
		var prev UUID
		for i, s := range rapid.SliceOfN(rapid.Int64Range(0, int64(2*unit)), 2, 80).Draw(rt, "steps") {
			clk.now = clk.now.Add(time.Duration(s))
			id, err := g.NextID()
			if err != nil {
				rt.Fatal(err)
			}
			var random [10]byte
			copy(random[:], rapid.SliceOfN(rapid.Byte(), 10, 10).Draw(rt, "random"))
			u, err := v.UUID(id, random)
			if err != nil {
				rt.Fatal(err)
			}
			if i > 0 {
				for _, f := range []Form{FormUUID, FormTypeID, FormULID} {
					a, b := string(prev.AppendForm(nil, f, "x")), string(u.AppendForm(nil, f, "x"))
					if a >= b {
						rt.Fatalf("layout %v: UUID %s of ID %d does not sort after %s (form %v)", l, b, id, a, f)
					}
				}
				if bytes.Compare(prev[:], u[:]) >= 0 {
					rt.Fatalf("layout %v: UUID bytes %x do not sort after %x", l, u, prev)
				}
			}
			prev = u
		}
	})
}

// TestUUIDViewRefusals checks that texts and values that are not
// flakeid's UUIDs are refused, naming why.
func TestUUIDViewRefusals(t *testing.T) {
	v, _ := New(snowflake.DefaultLayout())
	sony, _ := New(sonyflakeLayout())
	id, _ := snowflake.DefaultLayout().Compose(snowflake.Parts{Tick: 1000, Worker: 3, Sequence: 7})
	good, _ := v.UUID(id, [10]byte{})
	v4 := good
	v4[6] = 0x40 | v4[6]&0x0f
	variant := good
	variant[8] &= 0x3f
	for _, tc := range []struct {
		name string
		v    *View
		u    UUID
		want string
	}{
		{"version 4", v, v4, "version 4"},
		{"variant", v, variant, "variant bits 00"},
		{"before the epoch", v, NewUUIDv7(snowflake.DefaultLayout().Epoch.UnixMilli()-1, 0, 0), "outside layout"},
		{"not a tick start", sony, NewUUIDv7(sonyflakeLayout().Epoch.UnixMilli()+15, 0, 0), "not the start of a tick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.v.ID(tc.u)
			if !errors.Is(err, snowflake.ErrInvalidID) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("snowflake.ID(%s) = %v, want snowflake.ErrInvalidID saying %q", tc.u, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ in, want string }{
		{"0195f1a2-7c00-7000-8000-00000000000", "35 characters long"},
		{"0195f1a2x7c00-7000-8000-000000000000", "want '-'"},
		{"0195f1a2-7c00-7000-8000-00000000000g", "not a hex digit"},
		{"01JPGT4Z0000000000000000I0", "not a Crockford base32 digit"},
		{"81JPGT4Z000000000000000000", "more than 128 bits"},
		{"order_01JPGT4Z000000000000000000", "uppercase"},
		{"Order_01jpgt4z000000000000000000", "prefix"},
		{"_01jpgt4z000000000000000000", "empty prefix"},
		{"order__01jpgt4z000000000000000000", "underscore"},
		{"12345", "characters long"},
	} {
		if _, _, _, err := ParseText(tc.in); !errors.Is(err, snowflake.ErrInvalidID) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseText(%q) = %v, want snowflake.ErrInvalidID saying %q", tc.in, err, tc.want)
		}
	}
	if _, err := v.UUID(-1, [10]byte{}); !errors.Is(err, snowflake.ErrInvalidID) {
		t.Errorf("UUID(-1) = %v, want snowflake.ErrInvalidID", err)
	}
	jssafe, _ := New(jsSafeLayout())
	if _, err := jssafe.UUID(1<<60, [10]byte{}); !errors.Is(err, snowflake.ErrInvalidID) {
		t.Errorf("UUID of an snowflake.ID past the layout = %v, want snowflake.ErrInvalidID", err)
	}
}

// typeIDCase is one example of the TypeID spec's test data.
type typeIDCase struct{ name, typeid, prefix, uuid string }

// typeIDSpecCases reads the TypeID spec's valid.yml or invalid.yml from the
// go.jetify.com/typeid module (it ships them as testdata): a list of
// name/typeid/prefix/uuid entries with double-quoted values.
func typeIDSpecCases(t *testing.T, file string) []typeIDCase {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.jetify.com/typeid").Output()
	if err != nil {
		t.Fatalf("go list go.jetify.com/typeid: %v", err)
	}
	f, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []typeIDCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, ok := strings.Cut(strings.TrimPrefix(line, "- "), ": ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		}
		switch key {
		case "name":
			cases = append(cases, typeIDCase{name: val})
		case "typeid":
			cases[len(cases)-1].typeid = val
		case "prefix":
			cases[len(cases)-1].prefix = val
		case "uuid":
			cases[len(cases)-1].uuid = val
		}
	}
	if len(cases) < 5 {
		t.Fatalf("%s: only %d cases read", file, len(cases))
	}
	return cases
}

// TestTypeIDSpec checks ParseTypeID against the TypeID spec's examples and
// against jetify's implementation: the valid ones read as their prefix and
// UUID (and encode back to the same text), the invalid ones are refused by
// both.
func TestTypeIDSpec(t *testing.T) {
	for _, tc := range typeIDSpecCases(t, "valid.yml") {
		u, prefix, err := ParseTypeID(tc.typeid)
		if err != nil || prefix != tc.prefix || u.String() != tc.uuid {
			t.Errorf("valid %s: ParseTypeID(%q) = %s %q, %v; want %s %q", tc.name, tc.typeid, u, prefix, err, tc.uuid, tc.prefix)
			continue
		}
		if tid, err := typeid.FromString(tc.typeid); err != nil || tid.UUID() != u.String() {
			t.Errorf("valid %s: jetify reads %v, %v", tc.name, tid, err)
		}
		if back := string(u.AppendForm(nil, FormTypeID, prefix)); back != tc.typeid {
			t.Errorf("valid %s: encodes back as %q, want %q", tc.name, back, tc.typeid)
		}
	}
	for _, tc := range typeIDSpecCases(t, "invalid.yml") {
		if _, _, err := ParseTypeID(tc.typeid); !errors.Is(err, snowflake.ErrInvalidID) {
			t.Errorf("invalid %s: ParseTypeID(%q) = %v, want snowflake.ErrInvalidID", tc.name, tc.typeid, err)
		}
		if _, err := typeid.FromString(tc.typeid); err == nil {
			t.Errorf("invalid %s: jetify accepts %q", tc.name, tc.typeid)
		}
	}
}

// FuzzParseUUIDText checks that any text either is refused with
// snowflake.ErrInvalidID or reads as a value that writes back, in its form, as the
// same text (up to case, for UUIDs and ULIDs).
func FuzzParseUUIDText(f *testing.F) {
	for _, s := range []string{"0195f1a2-7c00-7000-8000-000000000000", "01JPGT4Z000000000000000000", "order_01jpgt4z000000000000000000",
		"a_b_01jpgt4z000000000000000000", "_", "", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, form, prefix, err := ParseText(s)
		if err != nil {
			if !errors.Is(err, snowflake.ErrInvalidID) {
				t.Fatalf("ParseText(%q): %v, not snowflake.ErrInvalidID", s, err)
			}
			return
		}
		back := string(u.AppendForm(nil, form, prefix))
		if form == FormTypeID && back != s || !strings.EqualFold(back, s) {
			t.Fatalf("ParseText(%q) = %x %v %q, which writes back as %q", s, u, form, prefix, back)
		}
	})
}

// TestUUIDLayoutCounterBits pins the bit map docs/API.md gives for the
// presets.
func TestUUIDLayoutCounterBits(t *testing.T) {
	for _, tc := range []struct {
		l    snowflake.Layout
		want int
	}{{snowflake.DefaultLayout(), 22}, {twitterLayout(), 22}, {sonyflakeLayout(), 24}, {jsSafeLayout(), 15}, {leafLayout(), 22},
		{snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12, TimeUnit: time.Microsecond}, 32}} {
		v, err := New(tc.l)
		if err != nil || v.CounterBits() != tc.want {
			t.Errorf("layout %v: counter bits %d, %v; want %d", tc.l, v.CounterBits(), err, tc.want)
		}
	}
}
