package zk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// store is w as a protocol.Store; Workers does not implement it itself, so
// that its exported methods are the coordinator's.
type store struct{ w *Workers }

// version is what a Read found, for Commit's checks: every node it read,
// by path (nil when absent), and the Leaf nodes of each worker id.
type version struct {
	nodes map[string]*node
	leaf  map[int64]*leafID
}

// holderData is the data of a holder node.
type holderData struct {
	Owner string `json:"owner"`
	TTLMs int64  `json:"ttl_ms"`
}

func (s store) Names() protocol.Names {
	return protocol.Names{Registry: "the registry " + s.w.registry + " of this ZooKeeper", Namespace: s.w.prefix, Place: s.w.prefix, Store: "ZooKeeper"}
}

// Read implements protocol.Store: ZooKeeper's clock (zkClock, which also
// brings the shared session up to the leader), the
// children of the datacenter's node, then its record, registry entry,
// space and every worker id's holder and high nodes; with WithLeaf, the
// Leaf nodes for datacenter 0.
func (s store) Read(ctx context.Context, dc int64) (protocol.State, error) {
	w, k := s.w, s.w.keys()
	nowMs, err := w.zkClock(ctx)
	if err != nil {
		return protocol.State{}, err
	}
	conn := w.shared()
	kids, err := children(ctx, conn, w.dcPath(dc))
	if err != nil {
		return protocol.State{}, w.unavailable(ctx, err, "listing %s", w.dcPath(dc))
	}
	paths := []string{k.Namespace(dc), k.Registration(dc), k.Space()}
	for _, kid := range kids {
		if id, ok := coord.ParseID(kid); ok {
			paths = append(paths, k.Holder(dc, id), k.High(dc, id))
		}
	}
	nodes, err := getMany(ctx, conn, paths)
	if err != nil {
		return protocol.State{}, w.unavailable(ctx, err, "reading datacenter %d in %s", dc, w.prefix)
	}
	v, values := version{nodes: map[string]*node{}}, map[string][]byte{}
	for i, p := range paths {
		if v.nodes[p] = nodes[i]; nodes[i] != nil {
			values[p] = nodes[i].data
		}
	}
	st, err := k.Parse(dc, values, func(key string, value []byte) (protocol.Slot, error) {
		var h holderData
		if err := json.Unmarshal(value, &h); err != nil || h.Owner == "" {
			return protocol.Slot{}, errors.New("want {\"owner\", \"ttl_ms\"}")
		}
		// Every renewal writes the high node: the later Mtime is the last
		// renewal by ZooKeeper's clock.
		last := v.nodes[key].stat.Mtime
		if high := v.nodes[strings.TrimSuffix(key, "holder")+"high"]; high != nil {
			last = max(last, high.stat.Mtime)
		}
		return protocol.Slot{Holder: h.Owner, ExpiresMs: last + h.TTLMs}, nil
	})
	if err != nil {
		return st, err
	}
	if w.leaf != nil && dc == 0 {
		if v.leaf, err = w.readLeaf(ctx, nowMs); err != nil {
			return st, err
		}
		for id, l := range v.leaf {
			sl := st.Slots[id]
			sl.HighMs = max(sl.HighMs, l.highMs)
			if holder, until, ok := l.holder(sl.Holder != ""); ok {
				sl.Holder, sl.ExpiresMs = holder, until
			}
			st.Slots[id] = sl
		}
	}
	st.Now, st.Sessions, st.OwnClock, st.Version = protocol.MsTime(nowMs), true, true, v
	return st, nil
}

// Commit implements protocol.Store: one Multi, guarded by the versions
// read, on the session of the holder it creates, renews or releases (the
// shared one when none), whose nodes are then read back on that session
// (see the package doc); freeing the datacenter takes two steps (unclaim).
func (s store) Commit(ctx context.Context, read, next protocol.State) error {
	if read.Claim.Namespace != "" && next.Claim.Namespace == "" {
		return s.unclaim(ctx, read)
	}
	w, k, v, dc := s.w, s.w.keys(), read.Version.(version), read.Datacenter
	var ops []any
	var checked []string     // nodes checked by version: read back after the Multi
	set := map[int]string{}  // the SetData operations on nodes that were read, by index: their Czxids come back
	var sess *session        // the holder's session the Multi runs on; nil: the shared one
	var opened, closing bool // sess was opened for the Multi; sess is released by it
	var ttl time.Duration    // the lease's TTL, when sess is kept
	guard := func(p string) {
		if n := v.nodes[p]; n != nil {
			ops, checked = append(ops, &gozk.CheckVersionRequest{Path: p, Version: n.stat.Version}), append(checked, p)
		}
	}
	write := func(p string, data []byte, flags int32) {
		if n := v.nodes[p]; n != nil {
			set[len(ops)] = p
			ops = append(ops, &gozk.SetDataRequest{Path: p, Data: data, Version: n.stat.Version})
			return
		}
		ops = append(ops, &gozk.CreateRequest{Path: p, Data: data, Acl: acl(), Flags: flags})
	}
	ensure := func(p string) error {
		if err := ensurePath(ctx, w.shared(), p); err != nil {
			return w.unavailable(ctx, err, "creating %s", p)
		}
		return nil
	}
	if next.Record != nil && (read.Record == nil || *next.Record != *read.Record) {
		if v.nodes[k.Namespace(dc)] == nil {
			if err := ensure(w.dcPath(dc)); err != nil {
				return err
			}
		}
		write(k.Namespace(dc), next.Record.Encode(), gozk.FlagPersistent)
	} else {
		guard(k.Namespace(dc))
	}
	if next.Claim != read.Claim && v.nodes[k.Registration(dc)] == nil || next.HasSpace && !read.HasSpace {
		if err := ensure(w.registry); err != nil {
			return err
		}
	}
	if next.Claim != read.Claim {
		write(k.Registration(dc), coord.Registered(next), gozk.FlagPersistent)
	} else {
		guard(k.Registration(dc))
	}
	if next.HasSpace && !read.HasSpace {
		write(k.Space(), []byte(next.Space), gozk.FlagPersistent)
	} else {
		guard(k.Space())
	}
	for id, to := range next.Slots {
		from := read.Slots[id]
		if to == from {
			continue
		}
		hk, wk := k.Holder(dc, id), k.High(dc, id)
		hn := v.nodes[hk]
		if hn == nil && v.nodes[wk] == nil {
			if err := ensure(w.slotPath(dc, id)); err != nil {
				return err
			}
		}
		// Every change of a slot writes its high node, whose version is
		// the slot's guard: the mark as decided (raised, on a Leaf worker
		// id, to what its Leaf nodes imply).
		write(wk, []byte(strconv.FormatInt(to.HighMs, 10)), gozk.FlagPersistent)
		switch {
		case to.Holder == "" && from.Holder == "":
			// A mark changed on a free id: a holder node created and
			// deleted again checks that none came meanwhile.
			ops = append(ops, &gozk.CreateRequest{Path: hk, Acl: acl(), Flags: gozk.FlagPersistent}, &gozk.DeleteRequest{Path: hk, Version: -1})
			continue
		case sess != nil || from.Holder != "" && hn == nil:
			return fmt.Errorf("%w: a commit of datacenter %d in %s changes two holders, or a holder read without its node", worker.ErrUnavailable, dc, w.prefix)
		case from.Holder == "":
			ttl = time.Duration(to.ExpiresMs-read.Now.UnixMilli()) * time.Millisecond
			var err error
			if sess, err = w.openSession(ctx, ttl); err != nil {
				return err
			}
			opened = true
			hd, _ := json.Marshal(holderData{Owner: to.Holder, TTLMs: max(ttl, sess.timeout).Milliseconds()}) // cannot fail
			ops = append(ops, &gozk.CreateRequest{Path: hk, Data: hd, Acl: acl(), Flags: gozk.FlagEphemeral})
			for _, n := range v.leaf[id].nodes() {
				// Fence every Leaf node of the id: a Leaf server that
				// writes it again ends the lease (Read reports it as the
				// holder).
				if n.fenced {
					ops = append(ops, &gozk.CheckVersionRequest{Path: n.path, Version: n.stat.Version})
				} else {
					ops = append(ops, &gozk.SetDataRequest{Path: n.path, Data: n.fence(), Version: n.stat.Version})
				}
			}
			continue
		}
		var err error
		if sess, err = w.holding(hn, id, dc); err != nil {
			return err
		}
		if to.Holder == "" {
			ops, closing = append(ops, &gozk.DeleteRequest{Path: hk, Version: hn.stat.Version}), true
		} else {
			ttl = time.Duration(to.ExpiresMs-read.Now.UnixMilli()) * time.Millisecond
			if ttl > sess.timeout {
				return fmt.Errorf("%w: renewing worker %d of datacenter %d in %s for %v: its ZooKeeper session times out after %v, and a lease cannot outlast its session",
					worker.ErrInvalidConfig, id, dc, w.prefix, ttl, sess.timeout)
			}
			guard(hk)
		}
		for _, n := range v.leaf[id].nodes() {
			ops = append(ops, &gozk.CheckVersionRequest{Path: n.path, Version: n.stat.Version})
		}
	}
	conn := w.shared()
	if sess != nil {
		conn = sess.conn
	}
	fail := func(err error) error {
		if opened {
			sess.end(errors.New("the commit that opened it failed"))
		}
		return err
	}
	sent := time.Now()
	res, err := await(ctx, func() ([]gozk.MultiResponse, error) { return conn.Multi(ops...) })
	switch {
	case err != nil && sess != nil && errors.Is(err, gozk.ErrSessionExpired):
		// The holder node went with the session: the next read tells.
		sess.end(err)
		return protocol.ErrConflict
	case err != nil && guardFailed(err):
		return fail(protocol.ErrConflict)
	case err != nil && !opened && sess != nil && sess.err() != nil:
		// The holder's session ended under the Multi (its watchdog): the
		// next read and holding tell the driver what that means.
		return protocol.ErrConflict
	case err != nil:
		// The Multi may have been applied: ending a session opened for it
		// deletes its holder node again (a raised mark errs on the safe
		// side).
		return fail(w.unavailable(ctx, err, "writing datacenter %d in %s", dc, w.prefix))
	case len(res) != len(ops):
		return fail(fmt.Errorf("%w: writing datacenter %d in %s: ZooKeeper answered %d of %d operations", worker.ErrUnavailable, dc, w.prefix, len(res), len(ops)))
	}
	for i := range set {
		if st := res[i].Stat; st != nil && strings.HasSuffix(set[i], "/high") {
			w.sawClock(st.Mtime, sent)
		}
	}
	same, err := s.same(ctx, conn, v, checked, set, res)
	switch {
	case err != nil:
		return fail(w.unavailable(ctx, err, "writing datacenter %d in %s: reading its nodes back", dc, w.prefix))
	case !same:
		// A version matched a node deleted and re-created since the read.
		return fail(protocol.ErrConflict)
	case closing:
		if err := sess.close(ctx); err != nil {
			return w.unavailable(ctx, err, "closing the ZooKeeper session of a released holder in datacenter %d of %s (it lapses after its timeout)", dc, w.prefix)
		}
	case sess != nil && !sess.arm(sent, ttl):
		// The session ended while the Multi was under way (its watchdog,
		// or ZooKeeper): the holder node may be gone.
		return fmt.Errorf("%w: writing datacenter %d in %s: the holder's ZooKeeper session ended meanwhile (%v)", worker.ErrUnavailable, dc, w.prefix, sess.err())
	}
	return nil
}

// holding is the session of this Workers that owns holder node hn of worker
// id of datacenter dc, alive: a holder renews and releases on its own
// session only, so that a session that ended can never write.
func (w *Workers) holding(hn *node, id, dc int64) (*session, error) {
	w.smu.Lock()
	sess := w.sessions[hn.stat.EphemeralOwner]
	w.smu.Unlock()
	if sess == nil {
		return nil, fmt.Errorf("%w: worker %d of datacenter %d in %s is held on ZooKeeper session %#x, which this process has not opened, or has given up",
			worker.ErrNotHeld, id, dc, w.prefix, hn.stat.EphemeralOwner)
	}
	if why := sess.err(); why != nil {
		return nil, fmt.Errorf("%w: worker %d of datacenter %d in %s: its ZooKeeper session %#x ended (%v)", worker.ErrNotHeld, id, dc, w.prefix, hn.stat.EphemeralOwner, why)
	}
	return sess, nil
}

// same reads back, on conn after a Multi, the nodes the Multi only checked,
// and reports whether they and the nodes it set are the ones read: the same
// Czxid (a node deleted and re-created starts its version again at 0), the
// same data (a ZooKeeper that lost its data starts its zxids again too) and
// the same owning session. res is the Multi's answer, set its SetData
// operations on nodes read, by index.
func (s store) same(ctx context.Context, conn *gozk.Conn, v version, checked []string, set map[int]string, res []gozk.MultiResponse) (bool, error) {
	for i, p := range set {
		if st := res[i].Stat; st == nil || st.Czxid != v.nodes[p].stat.Czxid {
			return false, nil
		}
	}
	nodes, err := getMany(ctx, conn, checked)
	if err != nil {
		return false, err
	}
	for i, p := range checked {
		was, now := v.nodes[p], nodes[i]
		if now == nil || now.stat.Czxid != was.stat.Czxid || now.stat.EphemeralOwner != was.stat.EphemeralOwner || !bytes.Equal(now.data, was.data) {
			return false, nil
		}
	}
	return true, nil
}

// unclaim frees datacenter read.Datacenter, as read, in two steps (ZooKeeper
// cannot guard a write by a whole subtree): it marks the registry node as
// being freed (guarded by the version read: an Acquire that read it before
// fails its own check, and one that reads it after is refused), reads the
// datacenter again, and deletes the node if nothing else changed — or puts
// it back (a lost race: the driver decides again).
func (s store) unclaim(ctx context.Context, read protocol.State) error {
	w, dc, rk := s.w, read.Datacenter, s.w.keys().Registration(read.Datacenter)
	n := read.Version.(version).nodes[rk]
	r, err := coord.ParseRegistration(rk, n.data)
	if err != nil {
		return err
	}
	r.Freeing = true
	conn := w.shared()
	marked, err := await(ctx, func() (*gozk.Stat, error) { return conn.Set(rk, r.Encode(), n.stat.Version) })
	switch {
	case err != nil && guardFailed(err):
		return protocol.ErrConflict
	case err != nil:
		return w.unavailable(ctx, err, "marking the registry node %s as being freed", rk)
	}
	again, err := s.Read(ctx, dc)
	if err != nil {
		return fmt.Errorf("%w (the registry node %s is left marked as being freed: free the datacenter again)", err, rk)
	}
	want := read
	want.Claim.Freeing = true
	if protocol.Same(want, again) {
		_, err := await(ctx, func() (struct{}, error) { return struct{}{}, conn.Delete(rk, marked.Version) })
		switch {
		case err == nil:
			return nil
		case !guardFailed(err):
			return w.unavailable(ctx, err, "deleting the registry node %s", rk)
		}
	}
	if _, err := await(ctx, func() (*gozk.Stat, error) { return conn.Set(rk, n.data, marked.Version) }); err != nil {
		return fmt.Errorf("%w: datacenter %d in %s changed while it was being freed, and putting its registry node %s back failed (%v): free it again, or restore the node by hand",
			worker.ErrUnavailable, dc, w.prefix, rk, err)
	}
	return protocol.ErrConflict
}
