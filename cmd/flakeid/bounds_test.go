package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"go.jetify.com/typeid"

	"github.com/flakeid/flakeid/snowflake"
)

// TestBoundsCommand: `flakeid bounds` prints the bounds of a window for the
// layout flags, exact against Layout.Bounds; --json prints them as strings;
// bad windows and times fail naming the flag or the problem.
func TestBoundsCommand(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "bounds", "--from", "2026-03-01", "--to", "2026-04-01T00:00:00Z", "--json")
	mustSucceed(t, r)
	var got boundsRecord
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("bounds --json: %v\n%s", err, r.stdout)
	}
	want, _ := snowflake.DefaultLayout().Bounds(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	if got.Min != want.Min.String() || got.Max != want.Max.String() || got.From != "2026-03-01T00:00:00Z" || got.To != "2026-04-01T00:00:00Z" {
		t.Fatalf("bounds --json = %+v, want %+v", got, want)
	}
	if !strings.Contains(r.stdout, `"min":"`) {
		t.Fatalf("bounds are not strings: %s", r.stdout)
	}
	// Another layout, Unix ms and a relative time; the text form.
	r = runCLI(t, "bounds", "--preset", "sonyflake", "--from", "1772323200005", "--to=+1h")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "from:   2026-03-01T00:00:00.01Z") || !strings.Contains(r.stdout, "39/0/16/8") {
		t.Fatalf("bounds --preset sonyflake (10 ms ticks: from rounds up):\n%s", r.stdout)
	}
	mustFail(t, runCLI(t, "bounds", "--from", "2026-03-02", "--to", "2026-03-01"), 1, "before it starts")
	mustFail(t, runCLI(t, "bounds", "--to", "2020-01-01"), 1, "before the layout's epoch")
	mustFail(t, runCLI(t, "bounds", "--from", "yesterday"), 1, "--from", `"yesterday"`)
	mustFail(t, runCLI(t, "bounds", "--server", "http://127.0.0.1:1", "--preset", "leaf"), 1, "leave out the layout flags")
}

// TestNextUUIDFormats: `flakeid next --format uuid7|typeid|ulid` prints
// texts the outside implementations parse, in issue order, and `flakeid
// decode` reads each back to increasing IDs; the forms are refused for
// segment tags, and --prefix without typeid.
func TestNextUUIDFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var last int64
	for _, tc := range []struct{ format, prefix string }{{"uuid7", ""}, {"typeid", "order"}, {"ulid", ""}} {
		args := []string{"next", "-n", "50", "--format", tc.format, "--data-dir", dir}
		if tc.prefix != "" {
			args = append(args, "--prefix", tc.prefix)
		}
		r := runCLI(t, args...)
		mustSucceed(t, r)
		lines := strings.Fields(r.stdout)
		if len(lines) != 50 || !slices.IsSorted(lines) {
			t.Fatalf("next --format %s: %d lines, sorted %v", tc.format, len(lines), slices.IsSorted(lines))
		}
		for _, l := range lines {
			var err error
			switch tc.format {
			case "uuid7":
				var u uuid.UUID
				if u, err = uuid.Parse(l); err == nil && u.Version() != 7 {
					t.Fatalf("%s: version %d", l, u.Version())
				}
			case "typeid":
				var tid typeid.AnyID
				if tid, err = typeid.FromString(l); err == nil && tid.Prefix() != tc.prefix {
					t.Fatalf("%s: prefix %q", l, tid.Prefix())
				}
			case "ulid":
				_, err = ulid.ParseStrict(l)
			}
			if err != nil {
				t.Fatalf("next --format %s printed %q: %v", tc.format, l, err)
			}
		}
		r = runCLI(t, append([]string{"decode", "--json"}, lines...)...)
		mustSucceed(t, r)
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var d struct {
				ID   snowflake.ID `json:"id"`
				Form string       `json:"form"`
			}
			if err := json.Unmarshal([]byte(line), &d); err != nil || d.Form != tc.format || int64(d.ID) <= last {
				t.Fatalf("decode: %s (after ID %d): %v", line, last, err)
			}
			last = int64(d.ID)
		}
	}
	mustFail(t, runCLI(t, "next", "--format", "uuid7", "--tag", "orders", "--data-dir", dir), 1, "segment IDs (--tag) carry no time")
	mustFail(t, runCLI(t, "next", "--format", "ulid", "--prefix", "order", "--data-dir", dir), 1, "--prefix is for --format typeid")
	mustFail(t, runCLI(t, "next", "--format", "typeid", "--prefix", "Order", "--data-dir", dir), 1, "--prefix", "TypeID prefix")
	mustFail(t, runCLI(t, "decode", "00000000-0000-4000-8000-000000000000"), 1, "version 4")
}
