package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/snowflake"
)

// composed is the default-layout ID tick 59567246425 (2026-11-21T10:27:26.425Z),
// datacenter 3, worker 17, sequence 42.
func composed(t *testing.T) snowflake.ID {
	t.Helper()
	id, err := snowflake.DefaultLayout().Compose(snowflake.Parts{Tick: 59567246425, Datacenter: 3, Worker: 17, Sequence: 42})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDecodeText(t *testing.T) {
	t.Parallel()
	id := composed(t)
	want := "id:         " + id.String() + "\n" +
		"time:       2026-11-21T10:27:26.425Z\n" +
		"tick:       59567246425\n" +
		"datacenter: 3\n" +
		"worker:     17\n" +
		"sequence:   42\n"

	r := runCLI(t, "decode", id.String())
	mustSucceed(t, r)
	if r.stdout != want {
		t.Errorf("decode %d:\n%s\nwant:\n%s", id, r.stdout, want)
	}

	// The three text forms decode alike, with a blank line between IDs.
	r = runCLI(t, "decode", id.String(), id.Base32(), id.Base58())
	mustSucceed(t, r)
	if r.stdout != want+"\n"+want+"\n"+want {
		t.Errorf("decode of decimal, base32 and base58 forms:\n%s", r.stdout)
	}
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	id := composed(t)
	r := runCLI(t, "decode", "--json", id.String(), id.Base58())
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 NDJSON lines, got:\n%s", r.stdout)
	}
	for _, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("not JSON: %v: %s", err, line)
		}
		want := map[string]any{"id": id.String(), "time": "2026-11-21T10:27:26.425Z",
			"tick": 59567246425.0, "datacenter": 3.0, "worker": 17.0, "sequence": 42.0}
		if len(got) != len(want) {
			t.Errorf("keys %v, want those of %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %#v, want %#v", k, got[k], v)
			}
		}
	}
}

func TestDecodeLayout(t *testing.T) {
	t.Parallel()
	l, err := snowflake.Preset("sonyflake")
	if err != nil {
		t.Fatal(err)
	}
	id, err := l.Compose(snowflake.Parts{Tick: 100, Worker: 65535, Sequence: 255})
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "decode", "--preset", "sonyflake", id.String())
	mustSucceed(t, r)
	for _, w := range []string{"time:       2014-09-01T00:00:01.000Z\n", "tick:       100\n", "datacenter: 0\n",
		"worker:     65535\n", "sequence:   255\n"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("missing %q:\n%s", w, r.stdout)
		}
	}

	// Ticks shorter than a millisecond show microseconds.
	r = runCLI(t, "decode", "--time-unit", "1us", "--time-bits", "0", "--epoch", "2025-01-01", "1262485504")
	mustSucceed(t, r) // 1262485504 = 301 << 22: tick 301, above 12 bits of sequence and 10 of node
	if !strings.Contains(r.stdout, "time:       2025-01-01T00:00:00.000301Z\n") {
		t.Errorf("microsecond layout:\n%s", r.stdout)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	good := composed(t).String()
	for _, tc := range []struct {
		name string
		args []string
		want []string // on stderr
		good int      // IDs still printed
	}{
		{"garbage", []string{"decode", "garbage"}, []string{`argument 1 "garbage"`, "invalid ID"}, 0},
		{"garbage among good", []string{"decode", good, "not-an-id!", good}, []string{`argument 2 "not-an-id!"`, "1 of 3 IDs"}, 2},
		{"every bad one reported", []string{"decode", "--json", "--", "x", good, "-5", "99999999999999999999"},
			[]string{`argument 1 "x"`, `argument 3 "-5"`, `argument 4 "99999999999999999999"`, "3 of 4 IDs"}, 1},
		{"empty argument", []string{"decode", ""}, []string{`argument 1 ""`}, 0},
		{"base32 overflow", []string{"decode", "ZZZZZZZZZZZZZ"}, []string{`argument 1 "ZZZZZZZZZZZZZ"`}, 0},
		{"too wide for the layout", []string{"decode", "--preset", "jssafe", good}, []string{"argument 1", "does not fit"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, tc.args...)
			mustFail(t, r, exitError, tc.want...)
			if got := strings.Count(r.stdout, good); got != tc.good {
				t.Errorf("printed %d good IDs, want %d:\n%s", got, tc.good, r.stdout)
			}
		})
	}

	t.Run("bad layout", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, "decode", "--preset", "nope", good)
		mustFail(t, r, exitError, `unknown preset "nope"`)
		if r.stdout != "" {
			t.Errorf("printed despite the bad layout:\n%s", r.stdout)
		}
	})
}
