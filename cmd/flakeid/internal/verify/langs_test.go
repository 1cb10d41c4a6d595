package verify

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestVerifyReadLocal: a local generator's batches become records whose
// start is the process's clock before the batch (run time), one per
// increasing run of IDs; a failed batch is a failed record; a line cut
// short by a kill, and lines that are not batches, are dropped.
func TestVerifyReadLocal(t *testing.T) {
	r := &runner{t0: time.Unix(100, 0)}
	g := &localGen{lang: languageInfo["js"]}
	rec := &recorder{}
	in := strings.Join([]string{
		"ready 0 3",
		"100000000500 5 6 7 3 4", // a lease changed mid-batch: 5–7, then 3–4
		"! 100000000600 no lease: every worker id held",
		"100000000700 8 9",
		"not a batch",
		"100000000800 10 1", // then a kill mid-line: 1 may be the start of 11
	}, "\n")
	r.readLocal(g, strings.NewReader(in), rec)
	var got [][]int64
	for _, s := range rec.sf {
		q := rec.reqs[s.req]
		got = append(got, []int64{q.start, s.first, int64(s.n)})
	}
	want := [][]int64{{500, 5, 1}, {500, 6, 1}, {500, 7, 1}, {500, 3, 1}, {500, 4, 1}, {700, 8, 1}, {700, 9, 1}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("spans (start, first, n) %v, want %v", got, want)
	}
	if len(rec.reqs) != 4 || !rec.reqs[0].ok() || !rec.reqs[1].ok() || rec.reqs[2].err != errUnavailable || rec.reqs[2].start != 600 || !rec.reqs[3].ok() {
		t.Errorf("records %+v: want 5–7, 3–4, a failure at 600, 8–9", rec.reqs)
	}
	for _, q := range rec.reqs {
		if q.api != apiJSLocal || q.inc != -1 || q.node != -1 {
			t.Errorf("record %+v: want a JavaScript local batch of no node", q)
		}
	}
	if g.ids != 7 || g.failed != 1 || !strings.Contains(g.sample, "every worker id held") {
		t.Errorf("counts: %d IDs, %d failed (%q)", g.ids, g.failed, g.sample)
	}
}

// TestVerifyLanguagesValidated: only known languages, each once, in order,
// and not against targets; the local fault kinds need a language.
func TestVerifyLanguagesValidated(t *testing.T) {
	for _, tc := range []struct {
		langs   []string
		targets []string
		faults  []string
		want    string
	}{
		{langs: []string{"ruby"}, want: `language "ruby": want some of python, js, java`},
		{langs: []string{"js", "python"}, want: "each once, in the order python, js, java"},
		{langs: []string{"java", "java"}, want: "each once"},
		{langs: []string{"python"}, targets: []string{"http://x"}, want: "not for targets"},
		{faults: []string{"local-kill"}, want: `fault kind "local-kill" needs the local generators group`},
		{langs: []string{"python", "java"}, faults: []string{"local-kill", "local-stop"}},
	} {
		c := withDefaults(Config{Languages: tc.langs, Targets: tc.targets, Faults: tc.faults, Bin: "x", MinFaults: -1})
		c.MinFaults = 0
		err := c.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("languages %v, targets %v, faults %v: %v, want %q", tc.langs, tc.targets, tc.faults, err, tc.want)
		}
	}
	if c := withDefaults(Config{Languages: []string{"js"}, Bin: "x"}); !slices.Contains(c.Faults, "local-stop") {
		t.Errorf("default faults with a language: %v", c.Faults)
	}
	if c := withDefaults(Config{Bin: "x"}); slices.Contains(c.Faults, "local-kill") {
		t.Errorf("default faults without languages: %v", c.Faults)
	}
}
