package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flakeid/flakeid/worker/protocol"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// leafContract is the contract a Leaser with the Leaf layout sends.
func leafContract() string { return preset("leaf").String() + "; quarantine 1s" }

// preset is snowflake.Preset(name), which cannot fail for the names used here.
func preset(name string) snowflake.Layout {
	l, err := snowflake.Preset(name)
	if err != nil {
		panic(err)
	}
	return l
}

// leafTree is a Leaf-shaped tree a test writes: /…/snowflake/app/forever/.
type leafTree struct {
	t    *testing.T
	c    *gozk.Conn
	path string
}

func newLeafTree(t *testing.T, addr string, sp space) leafTree {
	t.Helper()
	lt := leafTree{t: t, c: sp.admin, path: sp.base + "/snowflake/app"}
	if err := ensurePath(t.Context(), lt.c, lt.path+"/forever"); err != nil {
		t.Fatal(err)
	}
	return lt
}

func leafJSON(ip string, port any, ts time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"ip": ip, "port": port, "timestamp": ts.UnixMilli()})
	return b
}

// register creates a persistent sequential node for ip:port, as a Leaf
// server does at its first start, and returns its path.
func (lt leafTree) register(ip string, port any, data []byte) string {
	lt.t.Helper()
	p, err := lt.c.Create(fmt.Sprintf("%s/forever/%s:%v-", lt.path, ip, port), data, gozk.FlagSequence, acl())
	if err != nil {
		lt.t.Fatal(err)
	}
	return p
}

// upload keeps writing ip:port's timestamp to node every period, as a live
// Leaf server does, until the test ends.
func (lt leafTree) upload(node, ip string, port any, period time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lt.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = lt.c.Set(node, leafJSON(ip, port, time.Now()), -1)
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
}

func (lt leafTree) get(node string) (leafData, *gozk.Stat) {
	lt.t.Helper()
	data, st, err := lt.c.Get(node)
	if err != nil {
		lt.t.Fatal(err)
	}
	var d leafData
	if err := json.Unmarshal(data, &d); err != nil || d.Timestamp == nil {
		lt.t.Fatalf("Leaf node %s = %s", node, data)
	}
	return d, st
}

// testLeaf is the Leaf timing of the tests: uploads every 300ms, 500ms of
// margin.
func testLeaf() LeafConfig {
	return LeafConfig{Interval: 300 * time.Millisecond, Margin: 500 * time.Millisecond}
}

func leafWorkers(t *testing.T, addr string, sp space, lt leafTree) *Workers {
	cfg := testLeaf()
	cfg.Path = lt.path
	return sp.workers(t, addr, WithLeaf(cfg))
}

func leafReq(owner string, workers int64) worker.Request {
	return worker.Request{Workers: workers, Owner: owner, TTL: testTTL, Reserve: time.Now(), Now: time.Now(), Contract: leafContract(), Space: preset("leaf").String(), Quarantine: time.Second}
}

// TestLeafTakeover: a live Leaf server's worker id is never taken; a dead
// one's is, above its last timestamp + interval + margin, and its node is
// fenced so that the Leaf server cannot start again; a Leaf server that
// uploads again ends the lease.
func TestLeafTakeover(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	lt := newLeafTree(t, addr, sp)
	live := lt.register("10.0.0.1", "8080", leafJSON("10.0.0.1", "8080", time.Now()))
	lt.upload(live, "10.0.0.1", "8080", testLeaf().Interval) // as often as Leaf does
	deadTS := time.Now().Add(time.Minute)                    // the dead server's clock ran ahead
	dead := lt.register("10.0.0.2", "8080", leafJSON("10.0.0.2", "8080", deadTS))
	if !strings.HasSuffix(live, "-0000000000") || !strings.HasSuffix(dead, "-0000000001") {
		t.Fatalf("Leaf nodes %s and %s: want sequences 0 and 1", live, dead)
	}
	w := leafWorkers(t, addr, sp, lt)

	// Until the dead server's node is Interval + Margin old, both are
	// live, and the live one stays so throughout.
	if _, err := w.Acquire(t.Context(), leafReq("early", 2)); !errors.Is(err, worker.ErrExhausted) || !strings.Contains(err.Error(), `0 by "leaf:10.0.0.1:8080"`) {
		t.Fatalf("Acquire while both Leaf servers look live: %v, want ErrExhausted naming the Leaf servers", err)
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cl, err := w.Acquire(t.Context(), leafReq("never", 1)); !errors.Is(err, worker.ErrExhausted) {
			t.Fatalf("Acquire of the live Leaf server's id: %v, %v; want ErrExhausted", cl, err)
		}
	}
	_, deadStat := lt.get(dead)
	cl, err := w.Acquire(t.Context(), leafReq("taker", 2))
	if err != nil {
		t.Fatal(err)
	}
	if cl.WorkerID() != 1 {
		t.Fatalf("took worker %d, want the dead Leaf server's 1", cl.WorkerID())
	}
	wantHigh := max(deadTS.UnixMilli(), deadStat.Mtime) + (testLeaf().Interval + testLeaf().Margin).Milliseconds()
	if cl.Previous().UnixMilli() < wantHigh {
		t.Fatalf("Previous %v is before the dead Leaf server's last timestamp + interval + margin %v", cl.Previous(), protocol.MsTime(wantHigh))
	}
	d, _ := lt.get(dead)
	if *d.Timestamp != LeafFenceTimestamp || d.IP != "10.0.0.2" || string(d.Port) != `"8080"` {
		t.Fatalf("the dead Leaf server's node after the takeover: %+v (port %s); want fenced with timestamp %d, ip and port kept",
			d, d.Port, int64(LeafFenceTimestamp))
	}
	if d, _ := lt.get(live); *d.Timestamp == LeafFenceTimestamp {
		t.Fatal("the live Leaf server's node was fenced")
	}
	infos, err := w.List(t.Context(), 0)
	if err != nil || len(infos) != 2 || infos[0].Holder != "leaf:10.0.0.1:8080" || !infos[0].Held(time.Now()) ||
		infos[1].Holder != "taker" || infos[1].HighWater.UnixMilli() < wantHigh {
		t.Fatalf("List = %+v, %v; want 0 held by the Leaf server, 1 by taker", infos, err)
	}
	if err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("Renew: %v", err)
	}

	// Released and taken again: the fenced node is not live although it
	// was just written, and the mark is kept in our tree.
	mark := time.Now().Add(time.Hour)
	if err := cl.Release(t.Context(), mark); err != nil {
		t.Fatal(err)
	}
	again, err := w.Acquire(t.Context(), leafReq("again", 2))
	if err != nil || again.WorkerID() != 1 || again.Previous().UnixMilli() < protocol.CeilMs(mark) {
		t.Fatalf("Acquire after the release: %v, %v; want worker 1 from %v", again, err, mark)
	}

	// The dead Leaf server comes back without restarting (a paused
	// process) and uploads: the lease ends.
	if _, err := lt.c.Set(dead, leafJSON("10.0.0.2", "8080", time.Now()), -1); err != nil {
		t.Fatal(err)
	}
	err = again.Renew(t.Context(), testTTL, time.Now().Add(time.Second))
	if !errors.Is(err, worker.ErrNotHeld) || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "10.0.0.2:8080") {
		t.Fatalf("Renew after the Leaf server uploaded again: %v; want ErrNotHeld naming its node and address", err)
	}
	// Now live again: not taken.
	if _, err := w.Acquire(t.Context(), leafReq("late", 2)); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("Acquire with both Leaf servers live: %v, want ErrExhausted", err)
	}
}

// TestLeafRefusals: another layout or datacenter, more than 1024 workers,
// and a missing Leaf registry are refused; unreadable Leaf nodes are never
// taken; names that are not Leaf's are ignored.
func TestLeafRefusals(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	lt := newLeafTree(t, addr, sp)
	w := leafWorkers(t, addr, sp, lt)
	for _, tc := range []struct {
		name string
		edit func(*worker.Request)
		want error
	}{
		{"default layout", func(r *worker.Request) {
			r.Space = snowflake.DefaultLayout().String()
			r.Contract = r.Space + "; quarantine 1s"
		}, worker.ErrContract},
		{"twitter layout", func(r *worker.Request) {
			r.Space = preset("twitter").String()
			r.Contract = r.Space + "; quarantine 1s"
		}, worker.ErrContract},
		{"datacenter 1", func(r *worker.Request) { r.Datacenter = 1 }, worker.ErrContract},
		{"2048 workers", func(r *worker.Request) { r.Workers = 2048 }, worker.ErrInvalidConfig},
	} {
		r := leafReq("x", 4)
		tc.edit(&r)
		_, err := w.Acquire(t.Context(), r)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else if tc.want == worker.ErrContract && !strings.Contains(err.Error(), preset("leaf").String()) {
			t.Errorf("%s: %v does not name the Leaf layout", tc.name, err)
		}
	}
	if infos, err := w.List(t.Context(), 0); err != nil || len(infos) != 0 {
		t.Fatalf("refused requests wrote: %+v, %v", infos, err)
	}

	old := time.Now().Add(-time.Hour)
	lt.register("10.0.0.1", "8080", []byte("garbage"))                     // 0: unreadable
	lt.register("10.0.0.2", 8080, []byte(`{"ip":"10.0.0.2","port":8080}`)) // 1: no timestamp
	lt.register("10.0.0.3", 8080, leafJSON("10.0.0.3", 8080, old))         // 2: a numeric port, dead
	for _, name := range []string{"junk", "10.0.0.9:1-12", "10.0.0.9:1-0000001024", "10.0.0.9:1-x000000003"} {
		if _, err := lt.c.Create(lt.path+"/forever/"+name, []byte("garbage"), gozk.FlagPersistent, acl()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(testLeaf().Interval + testLeaf().Margin)
	if _, err := w.Acquire(t.Context(), leafReq("x", 2)); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("Acquire of two unreadable Leaf ids: %v, want ErrExhausted", err)
	}
	cl, err := w.Acquire(t.Context(), leafReq("x", 4))
	if err != nil || cl.WorkerID() != 2 || cl.Previous().Before(old) {
		t.Fatalf("Acquire = %v, %v; want the dead Leaf server's worker 2", cl, err)
	}
	if d, _ := lt.get(lt.path + "/forever/10.0.0.3:8080-0000000002"); *d.Timestamp != LeafFenceTimestamp || string(d.Port) != "8080" {
		t.Fatalf("fenced node %+v (port %s): want the numeric port kept", d, d.Port)
	}
	infos, err := w.List(t.Context(), 0)
	if err != nil || len(infos) != 3 || !strings.Contains(infos[0].Holder, "unreadable") || !infos[0].Held(time.Now()) ||
		!strings.Contains(infos[1].Holder, "unreadable") || infos[2].Holder != "x" {
		t.Fatalf("List = %+v, %v; want 0 and 1 unreadable and held, 2 ours", infos, err)
	}
	// Worker 3 was never Leaf's: free.
	if cl, err := w.Acquire(t.Context(), leafReq("y", 4)); err != nil || cl.WorkerID() != 3 {
		t.Fatalf("Acquire = %v, %v; want worker 3", cl, err)
	}

	// A Leaf path with no registry is a configuration error, not an empty
	// Leaf cluster.
	cfg := testLeaf()
	cfg.Path = sp.base + "/snowflake/typo"
	typo := sp.workers(t, addr, WithLeaf(cfg))
	if _, err := typo.Acquire(t.Context(), leafReq("z", 4)); !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), cfg.Path+"/forever") {
		t.Fatalf("Acquire with a wrong Leaf path: %v, want ErrInvalidConfig naming it", err)
	}
}

// TestLeafSeveralNodesPerID: Leaf never deletes its nodes; when more than
// one names a worker id, any live one makes it taken, and the highest
// timestamp is the mark.
func TestLeafSeveralNodesPerID(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	lt := newLeafTree(t, addr, sp)
	w := leafWorkers(t, addr, sp, lt)
	late := time.Now().Add(10 * time.Minute)
	for _, n := range []struct {
		name string
		ts   time.Time
	}{{"10.0.0.1:8080-0000000000", time.Now().Add(-time.Hour)}, {"10.0.0.2:8080-0000000000", late}} {
		if _, err := lt.c.Create(lt.path+"/forever/"+n.name, leafJSON("10.0.0.1", "8080", n.ts), gozk.FlagPersistent, acl()); err != nil {
			t.Fatal(err)
		}
	}
	liveNode := lt.path + "/forever/10.0.0.3:8080-0000000001"
	if _, err := lt.c.Create(liveNode, leafJSON("10.0.0.3", "8080", time.Now()), gozk.FlagPersistent, acl()); err != nil {
		t.Fatal(err)
	}
	if _, err := lt.c.Create(lt.path+"/forever/10.0.0.4:8080-0000000001", leafJSON("10.0.0.4", "8080", time.Now().Add(-time.Hour)), gozk.FlagPersistent, acl()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(testLeaf().Interval + testLeaf().Margin)
	lt.upload(liveNode, "10.0.0.3", "8080", 100*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	cl, err := w.Acquire(t.Context(), leafReq("x", 2))
	if err != nil || cl.WorkerID() != 0 || cl.Previous().Before(late) {
		t.Fatalf("Acquire = %v, %v; want worker 0 from after %v", cl, err, late)
	}
	if _, err := w.Acquire(t.Context(), leafReq("y", 2)); !errors.Is(err, worker.ErrExhausted) {
		t.Fatalf("Acquire of the id with a live Leaf node: %v, want ErrExhausted", err)
	}
}

// TestLeafNewNodeEndsLease: a Leaf server registering for the first time
// while flakeid holds the worker id its new node numbers ends that lease at
// its next renewal, naming the node; the lease of another id runs on.
func TestLeafNewNodeEndsLease(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	lt := newLeafTree(t, addr, sp)
	lt.register("10.0.0.1", "8080", leafJSON("10.0.0.1", "8080", time.Now().Add(-time.Hour))) // 0
	time.Sleep(testLeaf().Interval + testLeaf().Margin)                                       // stopped
	w := leafWorkers(t, addr, sp, lt)
	zero, err := w.Acquire(t.Context(), leafReq("zero", 1))
	if err != nil || zero.WorkerID() != 0 {
		t.Fatalf("Acquire = %v, %v; want the stopped Leaf server's 0", zero, err)
	}
	one, err := w.Acquire(t.Context(), leafReq("one", 3))
	if err != nil || one.WorkerID() != 1 {
		t.Fatalf("Acquire = %v, %v; want 1, above Leaf's", one, err)
	}
	added := lt.register("10.0.0.9", "8080", leafJSON("10.0.0.9", "8080", time.Now()))
	if !strings.HasSuffix(added, "-0000000001") {
		t.Fatalf("the new Leaf node is %s; want sequence 1", added)
	}
	err = one.Renew(t.Context(), testTTL, time.Now().Add(time.Second))
	if !errors.Is(err, worker.ErrNotHeld) || !strings.Contains(err.Error(), added) || !strings.Contains(err.Error(), "10.0.0.9:8080") {
		t.Fatalf("Renew of the id a new Leaf node numbers: %v; want ErrNotHeld naming the node and its address", err)
	}
	if err := zero.Renew(t.Context(), testTTL, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("Renew of the id taken over: %v", err)
	}
}
