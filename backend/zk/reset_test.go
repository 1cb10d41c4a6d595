package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flakeid/flakeid/worker/protocol"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
)

// TestResetRecognised: the ways ZooKeeper loses or rolls back a namespace
// under a holder, each recognised in Renew or Release with an error that
// names the namespace, the datacenter and what was found.
func TestResetRecognised(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	req := worker.Request{Workers: 2, Owner: "holder", TTL: testTTL, Reserve: time.Now().Add(time.Second),
		Contract: "c", Quarantine: 3 * time.Second}
	setup := func(t *testing.T) (*connector, *Workers, *gozk.Conn, worker.Claim) {
		conn := &connector{addr: addr, space: testSpace(t, addr)}
		w := conn.workers(t, addr)
		cl, err := w.Acquire(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return conn, w, conn.adminConn(t), cl
	}
	t.Run("RecordDeletedAlone", func(t *testing.T) {
		// Only the record is lost (an operator's delete of one node): the
		// holder's Renew re-initialises it, the slots and marks stay.
		_, w, c, cl := setup(t)
		if err := c.Delete(w.keys().Namespace(0), -1); err != nil {
			t.Fatal(err)
		}
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		infos, err := w.List(t.Context(), 0)
		if err != nil || len(infos) != 1 || infos[0].Holder != "holder" {
			t.Fatalf("the re-initialisation touched the slots: %+v, %v", infos, err)
		}
		if ns, ok, err := w.Namespace(t.Context(), 0); err != nil || !ok || ns.Contract != "c" {
			t.Fatalf("Namespace = %+v, %v, %v", ns, ok, err)
		}
	})

	t.Run("RecordRecreatedWithSameVersion", func(t *testing.T) {
		// The record is deleted and re-created with another incarnation
		// and the very version this holder checks: only its Czxid tells.
		_, w, c, cl := setup(t)
		_, was, err := c.Exists(w.keys().Namespace(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(w.keys().Namespace(0), -1); err != nil {
			t.Fatal(err)
		}
		now := time.Now().Add(time.Minute).UnixMilli()
		other := protocol.Record{Incarnation: protocol.NewIncarnation(), Contract: "c", InitialisedMs: now, FloorMs: now + 1000}
		if _, err := c.Create(w.keys().Namespace(0), other.Encode(), gozk.FlagPersistent, acl()); err != nil {
			t.Fatal(err)
		}
		for v := int32(0); v < was.Version; v++ {
			if _, err := c.Set(w.keys().Namespace(0), other.Encode(), v); err != nil {
				t.Fatal(err)
			}
		}
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "another client found it first", false)
	})

	t.Run("RestoreFromBeforeAReset", func(t *testing.T) {
		// A copy from an older incarnation: restored under a holder of a
		// newer one, it is recognised by its earlier initialisation.
		conn, w, _, cl := setup(t)
		restore := conn.Snapshot(t)
		// The two incarnations are told apart by their initialisation
		// times, estimates of ZooKeeper's clock late by up to a read's
		// round trip (claim.go): let the newer start clearly later than
		// that, as a real reset after a restore does, even on a loaded
		// machine (CI once saw the older estimated 11 ms after the newer).
		time.Sleep(500 * time.Millisecond)
		conn.Wipe(t)
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		newer, ok, err := w.Namespace(t.Context(), 0)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		r := req
		r.Owner = "newer"
		next, err := w.Acquire(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if next.Previous().Before(newer.Floor) {
			t.Fatalf("Previous %v before the floor %v", next.Previous(), newer.Floor)
		}
		restore()
		wantReset(t, w, next.Release(t.Context(), time.Now()), "before the", true)
		again, _, err := w.Namespace(t.Context(), 0)
		if err != nil || again.Floor.Before(newer.Floor) || again.Incarnation == newer.Incarnation {
			t.Fatalf("after the second re-initialisation %+v, %v; want a new incarnation with a floor ≥ %v", again, err, newer.Floor)
		}
	})

	t.Run("MarkBelowStored", func(t *testing.T) {
		_, w, c, cl := setup(t)
		if _, err := c.Set(w.keys().High(0, cl.WorkerID()), []byte("1000"), -1); err != nil {
			t.Fatal(err)
		}
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "high-water mark", true)
	})

	t.Run("MarkGone", func(t *testing.T) {
		_, w, c, cl := setup(t)
		if err := c.Delete(w.keys().High(0, cl.WorkerID()), -1); err != nil {
			t.Fatal(err)
		}
		wantReset(t, w, cl.Release(t.Context(), time.Now()), "below the", true)
	})

	t.Run("SecondHolderFindsItDone", func(t *testing.T) {
		// Two holders of the lost state: the first re-initialises, the
		// second finds a later incarnation and writes nothing.
		conn, w, _, cl := setup(t)
		r := req
		r.Owner = "second"
		cl2, err := w.Acquire(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		conn.Wipe(t)
		wantReset(t, w, cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "is gone", true)
		ns, _, _ := w.Namespace(t.Context(), 0)
		wantReset(t, w, cl2.Renew(t.Context(), testTTL, time.Now().Add(time.Second)), "another client found it first", false)
		if again, _, _ := w.Namespace(t.Context(), 0); again != ns {
			t.Fatalf("the second holder re-initialised again: %+v, then %+v", ns, again)
		}
	})

	t.Run("MarkRaisedByAnother", func(t *testing.T) {
		// Not a reset: an operator raised the mark. The holder goes on
		// from it.
		_, w, c, cl := setup(t)
		raised := time.Now().Add(time.Hour).UnixMilli()
		if _, err := c.Set(w.keys().High(0, cl.WorkerID()), []byte(strconv.FormatInt(raised, 10)), -1); err != nil {
			t.Fatal(err)
		}
		if err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if infos, err := w.List(t.Context(), 0); err != nil || infos[0].HighWater.UnixMilli() != raised {
			t.Fatalf("List = %+v, %v; want the raised mark kept", infos, err)
		}
	})

	t.Run("HolderDeleted", func(t *testing.T) {
		// Not a reset: the holder node alone is gone (an operator's
		// delete). The id is no longer held.
		_, w, c, cl := setup(t)
		if err := c.Delete(w.keys().Holder(0, cl.WorkerID()), -1); err != nil {
			t.Fatal(err)
		}
		err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second))
		if !errors.Is(err, worker.ErrNotHeld) || !strings.Contains(err.Error(), "free") {
			t.Fatalf("Renew after the holder node was deleted: %v, want ErrNotHeld saying it is free", err)
		}
	})

	t.Run("GarbageRecord", func(t *testing.T) {
		_, w, c, cl := setup(t)
		if _, err := c.Set(w.keys().Namespace(0), []byte("{garbage"), -1); err != nil {
			t.Fatal(err)
		}
		err := cl.Renew(t.Context(), testTTL, time.Now().Add(time.Second))
		if !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), w.keys().Namespace(0)) || !strings.Contains(err.Error(), "{garbage") {
			t.Fatalf("Renew with a garbage record: %v; want ErrUnavailable naming the node and its data", err)
		}
		if _, err := w.Acquire(t.Context(), req); !errors.Is(err, worker.ErrUnavailable) {
			t.Fatalf("Acquire with a garbage record: %v", err)
		}
	})
}

// wantReset fails unless err wraps worker.ErrReset and not ErrNotHeld, names
// w's prefix, datacenter 0 and found, and says whether it re-initialised the
// record.
func wantReset(t *testing.T, w *Workers, err error, found string, reinit bool) {
	t.Helper()
	t.Log(err)
	if !errors.Is(err, worker.ErrReset) || errors.Is(err, worker.ErrNotHeld) {
		t.Fatalf("got %v; want ErrReset, not ErrNotHeld", err)
	}
	for _, s := range []string{w.Prefix(), "datacenter 0", found} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not say %q", err, s)
		}
	}
	if got := strings.Contains(err.Error(), "the namespace is re-initialised"); got != reinit {
		t.Fatalf("error %q: re-initialised %v, want %v", err, got, reinit)
	}
}

// TestKeys pins the tree (operators read it with zkCli.sh) and checks that
// nodes of another shape under the prefix are ignored.
func TestKeys(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	c := sp.admin
	w := sp.workers(t, addr)
	for _, p := range []string{"/3/x/holder", "/3/07/high", "/3/1/other", "/3/-1/high", "/30/0/holder"} {
		if err := ensurePath(t.Context(), c, sp.prefix+p); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Set(sp.prefix+p, []byte("junk"), -1); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	cl, err := w.Acquire(t.Context(), worker.Request{Datacenter: 3, Workers: 4, Owner: "o", TTL: testTTL, Reserve: time.UnixMilli(1234),
		Now: time.UnixMilli(1000), Contract: "c1", Quarantine: 1500 * time.Millisecond})
	if err != nil || cl.WorkerID() != 0 {
		t.Fatalf("Acquire = %v, %v; want worker 0", cl, err)
	}
	data, st, err := c.Get(sp.prefix + "/3/namespace")
	if err != nil || st.EphemeralOwner != 0 {
		t.Fatalf("namespace record: %v, %+v", err, st)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil || len(rec) != 4 || len(rec["incarnation"].(string)) != 16 || rec["contract"] != "c1" ||
		rec["floor_ms"].(float64)-rec["initialised_ms"].(float64) != 1500 || cl.Previous() != time.UnixMilli(int64(rec["floor_ms"].(float64))).UTC() {
		t.Fatalf("namespace record %s (Previous %v): want {incarnation, contract c1, floor_ms = initialised_ms + 1.5s = Previous}", data, cl.Previous())
	}
	// Initialised by ZooKeeper's clock, as the Acquire read it before the
	// write that created the record.
	if init := int64(rec["initialised_ms"].(float64)); init > st.Ctime || init > time.Now().Add(time.Second).UnixMilli() || init < before.Add(-time.Second).UnixMilli() {
		t.Fatalf("initialised_ms %d; the record was created at %d by ZooKeeper's clock", init, st.Ctime)
	}
	data, st, err = c.Get(sp.registry + "/3")
	if err != nil || st.EphemeralOwner != 0 || string(data) != `{"namespace":"`+sp.prefix+`","contract":"c1"}` {
		t.Fatalf("registry entry of datacenter 3: %s, %v", data, err)
	}
	data, st, err = c.Get(sp.prefix + "/3/0/holder")
	if err != nil || st.EphemeralOwner != sessionOf(t, w, 3, cl).id || string(data) != `{"owner":"o","ttl_ms":2000}` {
		t.Fatalf("holder node of worker 3/0: %s, %+v, %v", data, st, err)
	}
	data, st, err = c.Get(sp.prefix + "/3/0/high")
	if err != nil || st.EphemeralOwner != 0 || string(data) != "1234" {
		t.Fatalf("high node of worker 3/0: %s, %+v, %v", data, st, err)
	}
	kids, _, err := c.Children(sp.prefix + "/3/0")
	if err != nil || len(kids) != 2 {
		t.Fatalf("children of worker 3/0: %v, %v", kids, err)
	}
	infos, err := w.List(t.Context(), 3)
	if err != nil || len(infos) != 1 || infos[0].Worker != 0 {
		t.Fatalf("List(3) = %+v, %v; want worker 0 only", infos, err)
	}
	// A garbage high-water mark is an error naming the node, never a panic
	// or a free id.
	if _, err := c.Set(sp.prefix+"/3/0/high", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.List(t.Context(), 3); !errors.Is(err, worker.ErrUnavailable) || !strings.Contains(err.Error(), sp.prefix+"/3/0/high") {
		t.Fatalf("List with a garbage mark: %v", err)
	}
}

// TestHerd: many nodes starting at once all pick the same lowest free id,
// and all but one lose each round; every one must still get an id.
//
// It runs alone (not in parallel): each node has two ZooKeeper connections
// (its own and its claim's), and a server allows 60 per client address
// unless its maxClientCnxns says otherwise.
func TestHerd(t *testing.T) {
	addr := testenv.ZooKeeper().Require(t)
	sp := testSpace(t, addr)
	const nodes = 20
	var clients [nodes]*Workers
	for i := range clients {
		clients[i] = sp.workers(t, addr)
	}
	var wg sync.WaitGroup
	ids := make(chan int64, nodes)
	start := make(chan struct{})
	for i, w := range clients {
		wg.Go(func() {
			<-start
			// A TTL that outlasts the test: these claims are not renewed.
			cl, err := w.Acquire(t.Context(), worker.Request{Workers: 64, Owner: fmt.Sprint("node-", i), TTL: 30 * time.Second, Reserve: time.Now()})
			if err != nil {
				t.Errorf("node %d: %v", i, err)
				return
			}
			ids <- cl.WorkerID()
			t.Cleanup(func() { cl.Release(context.Background(), time.Now()) })
		})
	}
	close(start)
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("worker id %d handed out twice", id)
		}
		seen[id] = true
	}
}
