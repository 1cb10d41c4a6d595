package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/snowflake"
)

// nextIDs runs next with args, which must succeed, and parses its decimal
// output.
func nextIDs(t *testing.T, args ...string) []snowflake.ID {
	t.Helper()
	r := runCLI(t, append([]string{"next"}, args...)...)
	mustSucceed(t, r)
	return parseLines(t, r.stdout, snowflake.Parse)
}

// parseLines parses out, one ID per line, with parse.
func parseLines(t *testing.T, out string, parse func(string) (snowflake.ID, error)) []snowflake.ID {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end in a newline: %q", out)
	}
	var ids []snowflake.ID
	for line := range strings.Lines(out) {
		id, err := parse(strings.TrimSuffix(line, "\n"))
		if err != nil {
			t.Fatalf("line %d: %v", len(ids)+1, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkIncreasing fails the test unless ids has n strictly increasing IDs.
func checkIncreasing(t *testing.T, ids []snowflake.ID, n int) {
	t.Helper()
	if len(ids) != n {
		t.Fatalf("got %d IDs, want %d", len(ids), n)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ID %d = %d is not above ID %d = %d", i, ids[i], i-1, ids[i-1])
		}
	}
}

func TestNextDecimal(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 5, 10_000} { // 10,000 spans several NextN batches of at most 4,096
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			ids := nextIDs(t, "-n", strconv.Itoa(n))
			checkIncreasing(t, ids, n)
		})
	}
	t.Run("default count is one", func(t *testing.T) {
		t.Parallel()
		checkIncreasing(t, nextIDs(t), 1)
	})
}

func TestNextFormats(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, tc := range []struct {
		format string
		width  int
		parse  func(string) (snowflake.ID, error)
	}{
		{"decimal", 0, snowflake.Parse},
		{"base32", 13, snowflake.ParseEncoded},
		{"base58", 11, snowflake.ParseEncoded},
	} {
		t.Run(tc.format, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "next", "-n", strconv.Itoa(n), "--format", tc.format, "--worker", "4")
			mustSucceed(t, r)
			if !r.unsafe {
				t.Errorf("--worker 4 did not warn that a static worker id is unsafe")
			}
			ids := parseLines(t, r.stdout, tc.parse)
			checkIncreasing(t, ids, n)
			for i, line := range strings.Fields(r.stdout) {
				if tc.width > 0 && len(line) != tc.width {
					t.Errorf("line %d %q: %d characters, want %d", i+1, line, len(line), tc.width)
				}
				if back, _ := snowflake.ParseAny(line); back != ids[i] {
					t.Errorf("ParseAny(%q) = %d, want %d", line, back, ids[i])
				}
			}
			if p, _ := snowflake.DefaultLayout().Decode(ids[0]); p.Worker != 4 {
				t.Errorf("worker %d, want 4", p.Worker)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, "next", "-n", strconv.Itoa(n), "-f", "json")
		mustSucceed(t, r)
		var strs []string
		if err := json.Unmarshal([]byte(r.stdout), &strs); err != nil {
			t.Fatalf("not a JSON array of strings: %v\n%s", err, r.stdout)
		}
		var ids []snowflake.ID
		if err := json.Unmarshal([]byte(r.stdout), &ids); err != nil {
			t.Fatalf("not a JSON array of IDs: %v", err)
		}
		checkIncreasing(t, ids, n)
		for i, s := range strs {
			if s != ids[i].String() {
				t.Errorf("element %d is %q, want the decimal %q", i, s, ids[i])
			}
		}
	})
	t.Run("json of one", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, "next", "-f", "json")
		mustSucceed(t, r)
		var ids []snowflake.ID
		if err := json.Unmarshal([]byte(r.stdout), &ids); err != nil || len(ids) != 1 {
			t.Fatalf("%v, %d IDs:\n%s", err, len(ids), r.stdout)
		}
	})
}

func TestNextNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		layout   snowflake.Layout
		dc, work int64
	}{
		{"default", []string{"--datacenter", "3", "--worker", "31"}, snowflake.DefaultLayout(), 3, 31},
		{"borrow", []string{"--datacenter", "31", "--worker", "0", "--policy", "borrow"}, snowflake.DefaultLayout(), 31, 0},
		{"sonyflake", []string{"--preset", "sonyflake", "--worker", "65535"}, snowflake.Layout{TimeBits: 39, WorkerBits: 16, SequenceBits: 8}, 0, 65535},
		{"overridden widths", []string{"--datacenter-bits", "0", "--worker-bits", "10", "--worker", "1000"},
			snowflake.Layout{TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, 0, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids := nextIDs(t, append([]string{"-n", "100"}, tc.args...)...)
			checkIncreasing(t, ids, 100)
			for _, id := range ids {
				p, err := tc.layout.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				if p.Datacenter != tc.dc || p.Worker != tc.work {
					t.Fatalf("%d decodes to %+v, want datacenter %d worker %d", id, p, tc.dc, tc.work)
				}
			}
		})
	}
}

func TestNextErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"zero count", []string{"-n", "0"}, exitError, []string{"-n 0", "1 to 10,000,000"}},
		{"negative count", []string{"--count=-3"}, exitError, []string{"-n -3", "1 to 10,000,000"}},
		{"negative count as short flag", []string{"-n", "-3"}, exitUsage, []string{"--count", "-3"}},
		{"huge count", []string{"-n", "99999999999"}, exitError, []string{"-n 99999999999", "1 to 10,000,000"}},
		{"count one too many", []string{"-n", "10000001"}, exitError, []string{"-n 10000001"}},
		{"unknown preset", []string{"--preset", "instagram"}, exitError, []string{`unknown preset "instagram"`, "sonyflake"}},
		{"worker out of range", []string{"--worker", "32"}, exitError, []string{"worker id 32", "0–31"}},
		{"negative worker", []string{"--worker=-1"}, exitError, []string{"worker id -1"}},
		{"datacenter out of range", []string{"--datacenter", "32"}, exitError, []string{"datacenter id 32"}},
		{"no datacenter field", []string{"--preset", "sonyflake", "--datacenter", "1"}, exitError, []string{"datacenter id 1", "0 datacenter bits"}},
		{"layout overflows", []string{"--worker-bits", "10"}, exitError, []string{"overflows", "--time-bits 0"}},
		{"epoch in the future", []string{"--epoch", "2100-01-01"}, exitError, []string{"in the future"}},
		{"time field run out", []string{"--epoch", "1970-01-01", "--time-bits", "30"}, exitError, []string{"ran out"}},
		{"zero time unit", []string{"--time-unit", "0s"}, exitError, []string{"--time-unit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append([]string{"next"}, tc.args...)...)
			mustFail(t, r, tc.code, tc.want...)
			if r.stdout != "" {
				t.Errorf("printed IDs despite the error:\n%s", r.stdout)
			}
		})
	}
}

func TestNextCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := runCLIContext(t, ctx, "next", "-n", "10000000")
	mustFail(t, r, exitError, context.Canceled.Error())
	if strings.Count(r.stdout, "\n") >= 10_000_000 {
		t.Error("printed every ID despite the cancelled context")
	}
}
