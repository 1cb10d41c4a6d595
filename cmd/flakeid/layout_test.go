package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
)

func TestLayoutDefault(t *testing.T) {
	t.Parallel()
	want := "preset:         default\n" +
		"source:         flakeid's default\n" +
		"fields:         0 | time 41 | dc 5 | worker 5 | seq 12\n" +
		"bits:           63 | 62–22 | 21–17 | 16–12 | 11–0\n" +
		"epoch:          2025-01-01T00:00:00Z (Unix ms 1735689600000)\n" +
		"time unit:      1ms\n" +
		"IDs per tick:   4,096\n" +
		"IDs/s per node: 4,096,000\n" +
		"nodes:          32 datacenters × 32 workers = 1,024 nodes\n" +
		"largest ID:     9223372036854775807 (2^63 − 1)\n" +
		"lifetime:       69.7 years, runs until 2094-09-07T15:47:35.552Z\n"
	r := runCLI(t, "layout")
	mustSucceed(t, r)
	if r.stdout != want {
		t.Errorf("layout:\n%s\nwant:\n%s", r.stdout, want)
	}
	// Naming the default preset, or restating its values, changes nothing
	// but the "overridden" note.
	mustSucceed(t, runCLI(t, "layout", "--preset", "DEFAULT"))
	r = runCLI(t, "layout", "--time-bits", "41", "--epoch", "1735689600000", "--time-unit", "1ms")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "runs until 2094-09-07T") || !strings.Contains(r.stdout, "overridden") {
		t.Errorf("restated default layout:\n%s", r.stdout)
	}
}

func TestLayoutPresets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--preset", "twitter"}, []string{"0 | time 41 | dc 5 | worker 5 | seq 12", "2010-11-04T01:42:54.657Z",
			"runs until 2080-07-10T"}},
		{[]string{"--preset", "sonyflake"}, []string{"0 | time 39 | worker 16 | seq 8", "63 | 62–24 | 23–8 | 7–0",
			"time unit:      10ms", "25,600", "1 datacenter × 65,536 workers = 65,536 nodes", "174.2 years"}},
		{[]string{"--preset", "jssafe"}, []string{"0 | unused 10 | time 38 | worker 6 | seq 9", "63 | 62–53 | 52–15 | 14–9 | 8–0",
			"9007199254740991 (2^53 − 1)"}},
		// Width flags override the preset field by field.
		{[]string{"--preset", "sonyflake", "--worker-bits", "15", "--sequence-bits", "9"}, []string{"0 | time 39 | worker 15 | seq 9",
			"with fields overridden"}},
		{[]string{"--datacenter-bits", "0", "--worker-bits", "1", "--sequence-bits", "10", "--time-bits", "0"},
			[]string{"0 | time 52 | worker 1 | seq 10", "63 | 62–11 | 10 | 9–0", "1 datacenter × 2 workers = 2 nodes"}},
		{[]string{"--time-unit", "10ms", "--epoch", "2025-01-01T00:00:00Z"}, []string{"time unit:      10ms", "409,600", "696.8 years"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append([]string{"layout"}, tc.args...)...)
			mustSucceed(t, r)
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("missing %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

func TestLayoutJSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "layout", "--json", "--preset", "jssafe")
	mustSucceed(t, r)
	var got layoutInfo
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("not a layout JSON object: %v\n%s", err, r.stdout)
	}
	js, err := snowflake.Preset("jssafe")
	if err != nil {
		t.Fatal(err)
	}
	c := js.Capacity()
	want := layoutInfo{Preset: "jssafe", Source: "flakeid's layout below 2^53 (JavaScript numbers)", Fields: "0 | unused 10 | time 38 | worker 6 | seq 9",
		TimeBits: 38, WorkerBits: 6, SequenceBits: 9, UnusedBits: 10,
		Epoch: "2025-01-01T00:00:00Z", EpochUnixMilli: 1735689600000, TimeUnit: "10ms", TimeUnitNanos: 1e7,
		IDsPerTick: 512, IDsPerSecond: 51200, Datacenters: 1, WorkersPerDatacenter: 64, Nodes: 64,
		MaxID: "9007199254740991", LifetimeYears: c.LifetimeYears, RunsUntil: "2112-02-09T13:44:29.440Z"}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestLayoutErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"overflow", []string{"--time-bits", "37", "--worker-bits", "20", "--sequence-bits", "16"},
			[]string{"time 37 + datacenter 5 + worker 20 + sequence 16 = 78 bits overflows", "by 15"}},
		{"no bits left for time", []string{"--time-bits", "0", "--worker-bits", "40", "--sequence-bits", "18"}, []string{"no time bits"}},
		{"width out of range", []string{"--sequence-bits", "64"}, []string{"sequence bits = 64"}},
		{"negative width", []string{"--worker-bits=-1"}, []string{"worker bits = -1"}},
		{"unknown preset", []string{"--preset", "uuid"}, []string{`unknown preset "uuid"`, "default, twitter, sonyflake, jssafe, leaf"}},
		{"time unit too long", []string{"--time-unit", "2h"}, []string{"time unit 2h0m0s"}},
		{"time unit too short", []string{"--time-unit", "10ns"}, []string{"time unit 10ns"}},
		{"epoch in the future", []string{"--epoch", "2100-01-01"}, []string{"epoch 2100-01-01T00:00:00Z is in the future"}},
		{"time field run out", []string{"--time-bits", "30"}, []string{"time field exhausted", "ran out on 2025-01-13"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append([]string{"layout"}, tc.args...)...)
			mustFail(t, r, exitError, tc.want...)
			if r.stdout != "" {
				t.Errorf("printed a layout despite the error:\n%s", r.stdout)
			}
		})
	}
}

func TestLayoutWarnsOfShortLife(t *testing.T) {
	t.Parallel()
	// 2^37 ms is 4.4 years; counted from a day ago it ends within 10 years.
	epoch := strconv.FormatInt(time.Now().Add(-24*time.Hour).UnixMilli(), 10)
	for _, args := range [][]string{{"layout", "--time-bits", "37", "--epoch", epoch}, {"layout", "--json", "--time-bits", "37", "--epoch", epoch}} {
		r := runCLI(t, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "within 10 years") {
			t.Errorf("%v: no warning on stderr: %q", args, r.stderr)
		}
		if !strings.Contains(r.stdout, "time 37") || strings.Contains(r.stdout, "warning") {
			t.Errorf("%v: stdout:\n%s", args, r.stdout)
		}
	}
	// 2^39 ms is 17.4 years: no warning.
	mustSucceed(t, runCLI(t, "layout", "--time-bits", "39", "--epoch", epoch))
}

func TestDrawFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		l            snowflake.Layout
		fields, bits string
	}{
		{snowflake.DefaultLayout(), "0 | time 41 | dc 5 | worker 5 | seq 12", "63 | 62–22 | 21–17 | 16–12 | 11–0"},
		{snowflake.Layout{TimeBits: 63}, "0 | time 63", "63 | 62–0"},
		{snowflake.Layout{TimeBits: 1, DatacenterBits: 1, WorkerBits: 1, SequenceBits: 1}, "0 | unused 59 | time 1 | dc 1 | worker 1 | seq 1",
			"63 | 62–4 | 3 | 2 | 1 | 0"},
	} {
		if got := drawFields(tc.l); got != tc.fields {
			t.Errorf("drawFields(%v) = %q, want %q", tc.l, got, tc.fields)
		}
		if got := drawBits(tc.l); got != tc.bits {
			t.Errorf("drawBits(%v) = %q, want %q", tc.l, got, tc.bits)
		}
	}
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{4096000: "4,096,000", 1.0 / 3600: "0.000278", 4096000.0 / 3: "about 1,365,333", 1: "1"} {
		if got := perSecond(v); got != want {
			t.Errorf("perSecond(%v) = %q, want %q", v, got, want)
		}
	}
	for y, want := range map[float64]string{69.68: "69.7 years", 0.5: "182.6 days", 1.0 / 365.2425 / 2: "12.0 hours"} {
		if got := lifetime(y); got != want {
			t.Errorf("lifetime(%v) = %q, want %q", y, got, want)
		}
	}
}

// A predecessor's preset shows its source and what it is for; one whose
// time field ran out (uid-generator) or whose field order flakeid does not
// generate (Sonyflake's) is shown, not refused, and says so.
func TestLayoutPredecessors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		preset string
		want   []string
	}{
		{"uid-generator", []string{"source:         Baidu uid-generator", "ran out on 2024-11-20", "flakeid cannot generate with it", "fields:         0 | time 28 | worker 22 | seq 13"}},
		{"sonyflake-v1", []string{"github.com/sony/sonyflake v1", "sequence above the node", "fields:         0 | time 39 | seq 8 | worker 16", "bits:           63 | 62–24 | 23–16 | 15–0"}},
		{"yitter", []string{"BaseTime 1582136402000", "flakeid migrate plan --from yitter", "runs past the year 9999"}},
		{"bwmarrin", []string{"bwmarrin/snowflake", "fields:         0 | time 41 | worker 10 | seq 12", "runs until 2080-07-10"}},
	} {
		r := runCLI(t, "layout", "--preset", tc.preset)
		mustSucceed(t, r)
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("layout --preset %s: no %q in\n%s", tc.preset, w, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "cannot generate") != (tc.preset == "uid-generator" || tc.preset == "sonyflake-v1") {
			t.Errorf("layout --preset %s: decode-only note wrong:\n%s", tc.preset, r.stdout)
		}
	}
	// Changed by flags, it is a layout like any other: a run-out one is refused.
	mustFail(t, runCLI(t, "layout", "--preset", "uid-generator", "--worker-bits", "21"), 1, "ran out")
	// serve and next refuse them with the reason.
	mustFail(t, runCLI(t, "next", "--preset", "sonyflake-v1", "--data-dir", t.TempDir()), 1, "sequence above the node")
}
