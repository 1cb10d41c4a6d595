package zk

import (
	"errors"
	"maps"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// TestCommitSeesRecreatedNodes: a node deleted and re-created between a
// Read and a Commit has the version the Read saw (versions restart at 0),
// so the Multi's checks pass; the read-back must still fail the commit as
// a lost race, and the session it opened must go with its holder node.
// Both kinds of node: one the commit only checks (the record) and one it
// sets (the worker id's high node).
func TestCommitSeesRecreatedNodes(t *testing.T) {
	t.Parallel()
	addr := testenv.ZooKeeper().Require(t)
	for _, recreate := range []string{"record", "high"} {
		t.Run(recreate, func(t *testing.T) {
			sp := testSpace(t, addr)
			w, admin := sp.workers(t, addr), sp.admin
			k := w.keys()
			req := worker.Request{Workers: 2, Owner: "first", TTL: testTTL, Reserve: time.Now(), Contract: "c", Quarantine: time.Second}
			first, err := w.Acquire(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Release(t.Context(), time.Now()); err != nil {
				t.Fatal(err)
			}
			s := store{w}
			read, err := s.Read(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			path := map[string]string{"record": k.Namespace(0), "high": k.High(0, 0)}[recreate]
			data, st, err := admin.Get(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := admin.Delete(path, -1); err != nil {
				t.Fatal(err)
			}
			if recreate == "record" {
				data = protocol.Record{Incarnation: protocol.NewIncarnation(), Contract: "c", InitialisedMs: 1, FloorMs: 2}.Encode()
			}
			if _, err := admin.Create(path, data, gozk.FlagPersistent, acl()); err != nil {
				t.Fatal(err)
			}
			for v := int32(0); v < st.Version; v++ {
				if _, err := admin.Set(path, data, v); err != nil {
					t.Fatal(err)
				}
			}
			next := read
			next.Slots = maps.Clone(read.Slots)
			next.Slots[0] = protocol.Slot{Holder: "second", ExpiresMs: read.Now.UnixMilli() + testTTL.Milliseconds(), HighMs: read.Slots[0].HighMs + 1}
			if err := s.Commit(t.Context(), read, next); !errors.Is(err, protocol.ErrConflict) {
				t.Fatalf("a commit over a re-created %s node of the same version: %v, want a lost race", recreate, err)
			}
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				ok, _, err := admin.Exists(k.Holder(0, 0))
				w.smu.Lock()
				n := len(w.sessions)
				w.smu.Unlock()
				if err == nil && !ok && n == 0 {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("after the failed commit: its holder node there %v (%v), %d sessions kept; want neither", ok, err, n)
				}
			}
		})
	}
}
