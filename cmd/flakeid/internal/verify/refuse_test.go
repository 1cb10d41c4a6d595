package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
	"pgregory.net/rapid"
)

func TestVerifyRefusalWrong(t *testing.T) {
	want := []string{"workers.db"}
	for _, c := range []struct {
		name string
		f    refusal
		bad  string // a part of wrong(); "" when the refusal was right
	}{
		{"refused", refusal{exit: 1, want: want, out: "flakeid: /d/workers.db is empty but was initialised: run flakeid recover\n"}, ""},
		{"served", refusal{exit: -1, served: "127.0.0.1:4000", want: want, out: "workers.db"}, "it served (on 127.0.0.1:4000)"},
		{"hung", refusal{exit: -1, timedOut: true, want: want}, "neither served nor exited"},
		{"exit 0", refusal{exit: 0, want: want, out: "workers.db"}, "status 0"},
		{"SIGBUS", refusal{exit: 2, want: want, out: "unexpected fault address 0x7f\nfatal error: fault\n[signal SIGBUS: bus error code=0x2]\n\ngoroutine 1 [running]:\nworkers.db\n"}, "crashed"},
		{"panic", refusal{exit: 2, want: want, out: "panic: runtime error\n\ngoroutine 7 [running]:\n"}, "crashed"},
		{"silent", refusal{exit: 1, want: []string{"41/5/2/12", "41/5/4/13"}, out: "contract conflict: 41/5/2/12 …\n"}, `does not show "41/5/4/13"`},
	} {
		got := c.f.wrong()
		if c.bad == "" && got != "" || c.bad != "" && !strings.Contains(got, c.bad) {
			t.Errorf("%s: wrong() = %q, want %q", c.name, got, c.bad)
		}
	}
	ok := refusal{exit: 1}
	if got := ok.outcome(); got != "refused (exit 1)" {
		t.Errorf("outcome %q", got)
	}
}

// TestVerifyTryStart runs real processes (a shell for the flakeid binary):
// one that refuses, one that serves and would keep serving (killed at
// once), one that serves and exits.
func TestVerifyTryStart(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	r := &runner{cfg: Config{Bin: sh}, t0: time.Now()}
	dir := t.TempDir()
	ctx := context.Background()
	f, err := r.tryStart(ctx, "truncated-state", "refuses", []string{"-c", "echo 'error: /x/workers.db is empty' >&2; exit 3"},
		[]string{"workers.db"}, filepath.Join(dir, "a"))
	if err != nil || f.exit != 3 || f.served != "" || f.wrong() != "" || !strings.Contains(f.out, "is empty") {
		t.Fatalf("refusing process: %v %+v (%s)", err, f, f.wrong())
	}
	start := time.Now()
	f, err = r.tryStart(ctx, "other-layout", "serves", []string{"-c", `echo 'time=x level=INFO msg="flakeid: serving" addr=127.0.0.1:4567' >&2; exec sleep 60`},
		nil, filepath.Join(dir, "b"))
	if err != nil || f.served != "127.0.0.1:4567" || f.exit != -1 || !strings.Contains(f.wrong(), "it served") {
		t.Fatalf("serving process: %v %+v", err, f)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the serving process was killed after %v", d)
	}
	f, err = r.tryStart(ctx, "config-typo", "serves and exits", []string{"-c", `echo 'msg="flakeid: serving" addr=127.0.0.1:1'; exit 1`},
		nil, filepath.Join(dir, "c"))
	if err != nil || f.served != "127.0.0.1:1" || f.wrong() == "" {
		t.Fatalf("process that served then exited: %v %+v", err, f)
	}
}

// TestVerifyGapRow: the row of the largest gaps between an ID's time and its
// request's names the process that answered, and a Go client's call, which
// has none (any node of the main group may have answered it), by its API —
// whichever kind of call has the largest gap ahead or behind (CI, seed
// 764441: an unbuffered Go client's call had the largest gap behind, and
// the report indexed the incarnations with -1).
func TestVerifyGapRow(t *testing.T) {
	wall0 := time.Now().Truncate(time.Second) // whole milliseconds since the epoch: the gaps come out exact
	tickNow := wall0.Sub(testLayout.Epoch).Milliseconds()
	for _, tc := range []struct {
		name              string
		goAhead, goBehind bool
		want              string
	}{
		{"a node's calls", false, false, "ahead 1.999s (n1.1), behind 2.999s (n1.1)"},
		{"a Go client's call behind", false, true, "behind 4.999s (Go client NextID, failover: any node of the main group may have answered)"},
		{"a Go client's call ahead", true, false, "ahead 3.999s (Go client NextID, failover: any node of the main group may have answered)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withDefaults(Config{Faults: []string{"kill"}, MinFaults: 1, Bin: "flakeid"})
			r := &runner{cfg: cfg, layout: testLayout, samples: map[string]int{}}
			h := &history{wall0: wall0, incs: []*incarnation{{id: 0, node: 0, n: 1}}}
			rec := &recorder{}
			at := int64(time.Second) // the requests' wall time, since wall0
			call := func(inc int32, a api, shift time.Duration) {
				tick := tickNow + (time.Duration(at) + shift).Milliseconds()
				q := request{start: at, end: at + ms, inc: inc, node: int8(inc), api: a}
				rec.ack(q, -1, []rng{{id(t, tick, 1, 0), 1, 1}}, 1)
				at += int64(10 * time.Millisecond)
			}
			call(0, apiHTTPBatch, 2*time.Second)  // ahead 2 s
			call(0, apiHTTPBatch, -3*time.Second) // behind 3 s
			if tc.goAhead {
				call(-1, apiGoClient, 4*time.Second)
			}
			if tc.goBehind {
				call(-1, apiGoClient, -5*time.Second)
			}
			h.reqs, h.sf, h.seg = merge([]*recorder{rec})
			var b strings.Builder
			r.check(h, 0, int64(time.Minute), nil).write(&b)
			for line := range strings.Lines(b.String()) {
				if strings.HasPrefix(line, "| largest gap between an ID's time and its request's wall time") {
					if !strings.Contains(line, tc.want) {
						t.Errorf("gap row %q, want it to contain %q", line, tc.want)
					}
					return
				}
			}
			t.Fatalf("no gap row in\n%s", b.String())
		})
	}
}

// TestVerifyRefusalRows: the report has a row per refusal kind run, which
// fails with the offending start's command and output when a start was
// not refused.
func TestVerifyRefusalRows(t *testing.T) {
	cfg := withDefaults(Config{Faults: []string{"kill", "truncated-state", "other-layout", "config-typo"}, MinFaults: 2, Bin: "flakeid"})
	r := &runner{cfg: cfg, layout: testLayout, samples: map[string]int{}}
	h := build(1, nil, hreq{inc: 0, start: 0, end: ms, first: 100, n: 10})
	h.refusals = []refusal{
		{kind: "truncated-state", what: "n7 restarted with its workers.db truncated to 0 bytes", exit: 1, want: []string{"workers.db"}, out: "workers.db is empty"},
		{kind: "truncated-state", what: "n7 restarted with its workers.db truncated to half", exit: 1, want: []string{"workers.db"}, out: "workers.db is truncated"},
		{kind: "other-layout", what: "a node with another layout", at: 2 * int64(time.Second), exit: -1, served: "127.0.0.1:999",
			args: []string{"serve", "--worker-bits", "4"}, out: "line one\nmsg=\"flakeid: serving\" addr=127.0.0.1:999\n"},
	}
	h.faults = []fault{{kind: "kill", start: ms, end: 2 * ms, recovered: 3 * ms}, {kind: "truncated-state", start: ms, end: 2 * ms, recovered: 3 * ms},
		{kind: "truncated-state", start: ms, end: 2 * ms, recovered: 3 * ms}, {kind: "other-layout", start: ms, end: 2 * ms, recovered: 3 * ms}}
	rep := r.check(h, 0, int64(time.Second), nil)
	var b strings.Builder
	rep.write(&b)
	out := b.String()
	row := func(prefix string) string {
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, "| "+prefix) {
				return line
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, out)
		return ""
	}
	if l := row(kindInfo["truncated-state"].refused); !strings.Contains(l, "2 of 2 refused") || !strings.Contains(l, "| ok") {
		t.Errorf("truncated-state row: %s", l)
	}
	if l := row(kindInfo["other-layout"].refused); !strings.Contains(l, "0 of 1 refused") || !strings.Contains(l, "**FAIL**") {
		t.Errorf("other-layout row: %s", l)
	}
	if l := row(kindInfo["config-typo"].refused); !strings.Contains(l, "none started") {
		t.Errorf("config-typo row: %s", l)
	}
	// kill twice, the others once; kill and config-typo are missing.
	if l := row("every fault kind injected, at least 2 each (once: truncated-state, other-layout, config-typo)"); !strings.Contains(l, "kill 1, truncated-state 2, other-layout 1, config-typo 0") || !strings.Contains(l, "**FAIL**") {
		t.Errorf("coverage row: %s", l)
	}
	for _, want := range []string{
		"### starts that had to be refused: 1 were not",
		"+2.000s other-layout: a node with another layout: it served (on 127.0.0.1:999) instead of being refused",
		"command: flakeid serve --worker-bits 4",
		"      line one",
		"RESULT: FAIL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if !rep.failed {
		t.Error("the report did not fail")
	}
}

func TestVerifyMinFaults(t *testing.T) {
	if minFaults("kill", 2) != 2 || minFaults("sql-rollback", 2) != 1 || minFaults("config-typo", 0) != 0 {
		t.Fatal("minFaults")
	}
	var refused, lost []string
	for _, k := range Kinds() {
		info, ok := kindInfo[k]
		c := Config{Coordinator: groupEtcd, Nodes: 1, RedisNodes: 1, SQLNodes: 1, FileNodes: 1, Languages: []string{"python"}}
		if slices.Contains(Coordinators(), info.group) {
			c.Coordinator = info.group
		}
		if !ok || info.desc == "" || info.est == nil || !c.hasGroup(info.group) {
			t.Errorf("kind %q: %+v", k, info)
		}
		if info.refused != "" {
			refused = append(refused, k)
		}
		if info.lost {
			lost = append(lost, k)
		}
	}
	if len(kindInfo) != len(Kinds()) || !slices.Equal(refused, []string{"truncated-state", "other-layout", "other-space", "clock-ahead", "config-typo"}) {
		t.Fatalf("%d kinds described, %d listed; refusal kinds %v", len(kindInfo), len(Kinds()), refused)
	}
	if !slices.Equal(lost, []string{"zk-data-loss", "consul-data-loss", "nats-data-loss", "redis-restart-nosave", "redis-keys-deleted", "sql-rollback"}) {
		t.Fatalf("kinds that lose state: %v", lost)
	}
	// The CI profile must fit every kind's minimum. The estimates are
	// generous: a measured 3-minute run went through the schedule they put
	// at 158 s, pauses included, in 110 s.
	d := DefaultConfig()
	if need := withDefaults(d).minRun(); need > d.Duration {
		t.Fatalf("the CI profile's minimum schedule takes up to %v, more than its %v", need, d.Duration)
	}
	// So must the same profile on ZooKeeper, Consul and NATS, whose kinds
	// include a data loss, with a client language beside it (as .ci/run
	// runs it) or every one.
	for _, coord := range Coordinators() {
		for _, langs := range [][]string{nil, {"java"}, Languages()} {
			c := d
			c.Coordinator, c.Languages = coord, langs
			if need := withDefaults(c).minRun(); need > c.Duration {
				t.Errorf("the CI profile on %s with languages %v: the minimum schedule takes up to %v, more than its %v", coord, langs, need, c.Duration)
			}
		}
	}
	// And the short profile of 75 s per coordinator: the main group
	// alone, each of its coordinator's kinds, kill and a clock step, once.
	for _, coord := range Coordinators() {
		c := withDefaults(shortProfile(coord))
		if err := c.validate(); err != nil {
			t.Fatalf("the short profile on %s: %v", coord, err)
		}
		if need := c.minRun(); need > c.Duration {
			t.Errorf("the short profile on %s (%v): the minimum schedule takes up to %v, more than its %v", coord, c.Faults, need, c.Duration)
		}
	}
}

// shortProfile is the 75-second profile of a coordinator that CI may run
// beside the full one: `flakeid verify --coordinator C --duration 75s
// --min-faults 1 --redis-nodes 0 --sql-nodes 0 --file-nodes 0 --faults
// kill,clock-back,<C's kinds>`.
func shortProfile(coord string) Config {
	c := DefaultConfig()
	c.Coordinator, c.Duration, c.MinFaults, c.Bin = coord, 75*time.Second, 1, "flakeid"
	c.RedisNodes, c.SQLNodes, c.FileNodes = 0, 0, 0
	c.Faults = append([]string{"kill", "clock-back"}, c.coordKinds()...)
	return c
}

func TestVerifyCoordinators(t *testing.T) {
	for _, coord := range Coordinators() {
		d := DefaultConfig()
		d.Coordinator, d.Bin = coord, "x"
		c := withDefaults(d)
		if err := c.validate(); err != nil {
			t.Fatalf("%s: %v", coord, err)
		}
		// "all" holds the coordinator's own kinds and no other's.
		for _, k := range Kinds() {
			g := kindInfo[k].group
			if isCoord := slices.Contains(Coordinators(), g); isCoord && slices.Contains(c.Faults, k) != (g == coord) {
				t.Errorf("--coordinator %s: default faults %v", coord, c.Faults)
			}
		}
		if !slices.Contains(c.Faults, "kill") || !slices.Contains(c.Faults, "other-layout") {
			t.Errorf("--coordinator %s: default faults %v", coord, c.Faults)
		}
		if !strings.HasPrefix(c.describeGroups(), "7 nodes: n1–n3 on a private "+map[string]string{"etcd": "etcd", "zk": "ZooKeeper", "consul": "Consul dev agent", "nats": "NATS server"}[coord]+" (datacenter 0)") {
			t.Errorf("--coordinator %s: %s", coord, c.describeGroups())
		}
	}
	c := withDefaults(Config{Coordinator: "zk", Bin: "x", Faults: []string{"kill", "consul-data-loss"}})
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `fault kind "consul-data-loss" is for the main group on Consul (--coordinator consul); it runs on ZooKeeper, whose kinds are zk-pause, zk-partition, zk-restart, zk-data-loss`) {
		t.Errorf("another coordinator's kind: %v", err)
	}
	c = withDefaults(Config{Coordinator: "zookeeper", Bin: "x"})
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `coordinator "zookeeper": want one of etcd, zk, consul, nats`) {
		t.Errorf("an unknown coordinator: %v", err)
	}
	if got := coordURL(groupZK, "127.0.0.1:1234"); got != "zk://127.0.0.1:1234/flakeid-verify" {
		t.Errorf("coordURL: %s", got)
	}
	if got := coordURL(groupNATS, "127.0.0.1:1234"); got != "nats://127.0.0.1:1234/flakeid?namespace=flakeid-verify" {
		t.Errorf("coordURL: %s", got)
	}
	if got := coordURL(groupConsul, "127.0.0.1:1234"); got != "consul://127.0.0.1:1234/flakeid-verify" {
		t.Errorf("coordURL: %s", got)
	}
}

func TestVerifyGroups(t *testing.T) {
	d := DefaultConfig()
	if got, want := d.describeGroups(), "7 nodes: n1–n3 on a private etcd (datacenter 0), n4–n5 on a private Redis without persistence (datacenter 1), n6 on a PostgreSQL table (datacenter 2), n7 on a file coordinator each (datacenter 3)"; got != want {
		t.Errorf("describeGroups:\n%s\nwant\n%s", got, want)
	}
	if top := d.topDatacenter(); top != 3 {
		t.Errorf("top datacenter %d", top)
	}
	c := Config{Nodes: 2, FileNodes: 3, Bin: "x"}
	if top := c.topDatacenter(); top != 5 {
		t.Errorf("top datacenter of %+v: %d", c, top)
	}
	c = withDefaults(c)
	if slices.Contains(c.Faults, "redis-restart-nosave") || slices.Contains(c.Faults, "sql-rollback") || !slices.Contains(c.Faults, "truncated-state") {
		t.Errorf("default faults without Redis and SQL groups: %v", c.Faults)
	}
	c.Faults = []string{"sql-rollback"}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "needs the sql group") {
		t.Errorf("validate: %v", err)
	}
}

func TestVerifyPickSpread(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	s := time.Second
	for range 20 {
		if i := pickSpread(rnd, []time.Duration{9 * s, 5 * s, 8 * s, 7 * s}, 7*s); i != 1 && i != 3 {
			t.Fatalf("picked %d", i)
		}
	}
	if i := pickSpread(rnd, []time.Duration{9 * s, 8 * s, 10 * s}, 7*s); i != 1 {
		t.Fatalf("none fits: picked %d, want the smallest spread", i)
	}
}

func TestVerifyOtherLayout(t *testing.T) {
	l, err := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 2, SequenceBits: 12, Epoch: snowflake.DefaultLayout().Epoch, TimeUnit: time.Millisecond}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	o := otherLayout(l)
	if !strings.HasPrefix(o.String(), "41/5/4/13 × 1ms since ") || o.Epoch != l.Epoch {
		t.Fatalf("other layout %s", o)
	}
	if got := strings.Join(layoutFlags(o), " "); !strings.Contains(got, "--worker-bits 4 --sequence-bits 13") || !strings.Contains(got, "--time-unit 1ms") {
		t.Fatalf("flags %s", got)
	}
	full, _ := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12, Epoch: l.Epoch, TimeUnit: time.Millisecond}.Normalize()
	if o := otherLayout(full); o.String() == full.String() || o.TimeBits+o.DatacenterBits+o.WorkerBits+o.SequenceBits > snowflake.MaxBits {
		t.Fatalf("other layout of %s: %s", full, o)
	}
}

// TestVerifyRecoveryRow: a fault after which the cluster did not recover
// within the wait fails the run; one whose recovery the run's end cut
// short does not, and both show in the timeline.
func TestVerifyRecoveryRow(t *testing.T) {
	cfg := withDefaults(Config{Coordinator: groupZK, Faults: []string{"zk-pause", "zk-data-loss"}, Bin: "flakeid"})
	r := &runner{cfg: cfg, layout: testLayout, samples: map[string]int{}}
	report := func(faults ...fault) (string, bool) {
		h := build(1, nil, hreq{inc: 0, start: 0, end: ms, first: 100, n: 10})
		h.faults = faults
		rep := r.check(h, 0, int64(time.Minute), nil)
		var b strings.Builder
		rep.write(&b)
		return b.String(), rep.failed
	}
	const row = "| the cluster recovered after every fault (every node answering again)"
	wait := fmt.Sprint(r.healthWait()) // 30s, or longer for a long quarantine
	s := int64(time.Second)
	out, failed := report(fault{kind: "zk-pause", node: -1, start: s, end: 2 * s, recovered: 3 * s},
		fault{kind: "zk-data-loss", node: -1, start: 10 * s, end: 11 * s}) // the run ended first
	has := func(re string) bool { return regexp.MustCompile(re).MatchString(out) }
	if failed || !strings.Contains(out, row) || !has(`1 of 2 faults, each within `+wait+` \(1 cut short by the run's end\) +\| ok`) ||
		!has(`\| not before the run ended +\|`) || !has(`\(1 not before the run ended\)`) {
		t.Errorf("a recovery cut short by the run's end:\n%s", out)
	}
	out, failed = report(fault{kind: "zk-pause", node: -1, start: s, end: 2 * s, recovered: 3 * s},
		fault{kind: "zk-data-loss", node: -1, start: 10 * s, end: 11 * s, stuck: true})
	if !failed || !has(`1 of 2 faults, each within `+wait+` +\| \*\*FAIL\*\*`) || !has(`\| not within `+wait+` +\|`) {
		t.Errorf("a fault the cluster did not recover from:\n%s", out)
	}
}

// TestVerifyDurationFitsTheFaults: a run too short for the faults it must
// inject (at their estimates) is refused up front, naming the duration it
// needs, instead of failing at its end with "no time left"; at that
// duration, or with --min-faults 0, it is accepted. Over random fault sets,
// minimums and TTLs, refused and accepted meet exactly at minRun.
func TestVerifyDurationFitsTheFaults(t *testing.T) {
	c := withDefaults(Config{Coordinator: groupEtcd, Nodes: 1, RedisNodes: 2, FileNodes: 1, Bin: "flakeid", MinFaults: 1,
		Faults: []string{"redis-restart-nosave", "truncated-state", "other-layout", "config-typo"}, Duration: 35 * time.Second})
	need := c.minRun()
	if need <= 35*time.Second {
		t.Fatalf("the schedule of TestVerifyNemesisLostState's first version needs %v, want more than its 35s", need)
	}
	err := c.validate()
	if err == nil || !strings.Contains(err.Error(), "duration 35s is too short") || !strings.Contains(err.Error(), need.Round(time.Second).String()) {
		t.Fatalf("validate: %v; want the run refused, naming %v", err, need.Round(time.Second))
	}
	rapid.Check(t, func(rt *rapid.T) {
		kinds := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"kill", "clock-back", "clock-forward", "restart-behind", "etcd-pause",
			"etcd-partition", "pg-restart", "redis-restart-nosave", "redis-keys-deleted", "sql-rollback", "truncated-state",
			"other-layout", "clock-ahead", "config-typo"}), 1, 8, rapid.ID[string]).Draw(rt, "kinds")
		c := withDefaults(Config{Coordinator: groupEtcd, Nodes: 2, RedisNodes: 1, SQLNodes: 1, FileNodes: 1, Bin: "flakeid",
			Faults: kinds, MinFaults: rapid.IntRange(0, 3).Draw(rt, "min"), LeaseTTL: time.Duration(rapid.IntRange(1, 10).Draw(rt, "ttl")) * time.Second})
		need := c.minRun()
		c.Duration = need - time.Duration(rapid.Int64Range(-int64(time.Minute), int64(time.Minute)).Draw(rt, "short by"))
		if c.Duration < time.Second {
			c.Duration = time.Second
		}
		need = c.minRun() // the lead-in depends on the duration
		err := c.validate()
		if tooShort := c.MinFaults > 0 && c.Duration < need; tooShort != (err != nil) {
			rt.Fatalf("duration %v, need %v, min faults %d: validate = %v", c.Duration, need, c.MinFaults, err)
		}
	})
}
