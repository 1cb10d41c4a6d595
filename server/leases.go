package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// Worker-id leases for local generation: a client process asks for a lease
// (POST /v1/leases, the RPC AcquireLease), which this node takes from its
// coordinator on the process's behalf (node.LeaseWorkerID) and renews; the
// process generates Snowflake IDs of the server's layout itself, in the
// ticks [first_tick, end_tick) it was last told, and renews (POST
// /v1/leases/{lease}/renew) every renew_every_ms to hear the reservation
// grow. A lease not renewed for its TTL, or lost, is closed here, which
// stores its final reservation: whoever holds the worker id next starts past
// every end_tick a renewal reported.

// leaseJSON is the answer of an acquisition or a renewal (and, field for
// field, of the RPCs AcquireLease and RenewLease).
type leaseJSON struct {
	// Lease names the lease in renewals and the release: 32 hex digits.
	Lease      string `json:"lease"`
	Datacenter int64  `json:"datacenter"`
	Worker     int64  `json:"worker"`
	// Layout is what the client needs to compose IDs: the field widths
	// (time, datacenter, worker, sequence from the top, the sign bit 0),
	// the tick length in microseconds, and the layout's text.
	Layout leaseLayoutJSON `json:"layout"`
	// FirstTick is the first tick the lease may issue in (its high-water
	// mark); EndTick the first it may not (its reservation), both counted
	// from the layout's epoch. EndTick grows with each renewal.
	FirstTick int64 `json:"first_tick"`
	EndTick   int64 `json:"end_tick"`
	// NowUs is the server's clock when the request arrived (before the
	// lease's probation), in microseconds since the layout's epoch: the
	// client's clock for picking ticks is NowUs plus the time since it
	// sent the request, by its monotonic clock — never behind the server's
	// however long the answer took to be read (a process paused before it
	// read it finds its reservation run out), ahead by the request's
	// transit.
	NowUs int64 `json:"now_us"`
	// RenewEveryMs is how often to renew; TTLMs how long without a renewal
	// before the server closes the lease.
	RenewEveryMs int64 `json:"renew_every_ms"`
	TTLMs        int64 `json:"ttl_ms"`
}

type leaseLayoutJSON struct {
	TimeBits       int    `json:"time_bits"`
	DatacenterBits int    `json:"datacenter_bits"`
	WorkerBits     int    `json:"worker_bits"`
	SequenceBits   int    `json:"sequence_bits"`
	TimeUnitUs     int64  `json:"time_unit_us"`
	Name           string `json:"name"`
}

// leaseSessions are the leases handed out by this server and not yet
// closed, by name.
type leaseSessions struct {
	mu     sync.Mutex
	byName map[string]*leaseSession
}

type leaseSession struct {
	lease worker.Lease
	idle  *time.Timer // closes the lease when no renewal came for a TTL
}

// maxNowUs bounds NowUs so that every number of a lease's answer reads
// exactly as a JavaScript number.
const maxNowUs = 1<<53 - 1

// leaseLayout checks that clients can generate IDs of the server's layout
// and returns it: Snowflake IDs not masked, a tick of whole microseconds.
func (s *Server) leaseLayout() (snowflake.Layout, error) {
	l := s.node.Layout()
	if s.mask.forSnowflake() != nil {
		return l, apiErrorf(http.StatusConflict, codePrecondition,
			"this server hands out masked Snowflake IDs, which a client cannot make itself: no worker-id leases for local generation")
	}
	if l.TimeUnit%time.Microsecond != 0 {
		return l, apiErrorf(http.StatusConflict, codePrecondition,
			"the layout's tick is %v, not whole microseconds, which leases for local generation need", l.TimeUnit)
	}
	return l, nil
}

// acquireLease leases a worker id for a client named owner.
func (s *Server) acquireLease(ctx context.Context, owner string) (leaseJSON, error) {
	now := s.node.Now() // before the probation: see leaseJSON.NowUs
	if _, err := s.leaseLayout(); err != nil {
		return leaseJSON{}, err
	}
	if owner == "" {
		owner = "client"
	}
	if err := node.ValidOwner(owner); err != nil {
		return leaseJSON{}, apiErrorf(http.StatusBadRequest, codeInvalid, "owner: %v", err)
	}
	l, err := s.node.LeaseWorkerID(ctx, owner)
	if err != nil {
		return leaseJSON{}, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	ttl := s.node.LeaseConfig().TTL
	sess := &leaseSession{lease: l}
	s.leases.mu.Lock()
	if s.leases.byName == nil {
		s.leases.byName = map[string]*leaseSession{}
	}
	s.leases.byName[name] = sess
	sess.idle = time.AfterFunc(ttl, func() { s.dropLease(name, sess) })
	s.leases.mu.Unlock()
	return s.leaseAnswer(name, l, now)
}

// leaseAnswer describes lease name, with the server's clock at now, when
// the request arrived.
func (s *Server) leaseAnswer(name string, l worker.Lease, now time.Time) (leaseJSON, error) {
	lay, err := s.leaseLayout()
	if err != nil {
		return leaseJSON{}, err
	}
	cfg := s.node.LeaseConfig()
	unitUs := int64(lay.TimeUnit / time.Microsecond)
	nowUs := int64(now.Sub(lay.Epoch) / time.Microsecond)
	if nowUs < 0 || nowUs > maxNowUs {
		return leaseJSON{}, apiErrorf(http.StatusConflict, codePrecondition,
			"the server's clock is %d µs from the layout's epoch, outside 0–2^53", nowUs)
	}
	return leaseJSON{
		Lease: name, Datacenter: l.DatacenterID(), Worker: l.WorkerID(),
		Layout: leaseLayoutJSON{TimeBits: lay.TimeBits, DatacenterBits: lay.DatacenterBits, WorkerBits: lay.WorkerBits,
			SequenceBits: lay.SequenceBits, TimeUnitUs: unitUs, Name: lay.String()},
		FirstTick: tickAtOrAfter(lay, l.NotBefore()), EndTick: tickAtOrAfter(lay, l.Until()),
		NowUs: nowUs, RenewEveryMs: cfg.RenewEvery.Milliseconds(), TTLMs: cfg.TTL.Milliseconds(),
	}, nil
}

// tickAtOrAfter is the first tick of l that starts at or after t, at most
// the end of the time field: ticks before it start before t.
func tickAtOrAfter(l snowflake.Layout, t time.Time) int64 {
	d := t.Sub(l.Epoch)
	if d <= 0 {
		return 0
	}
	tick := int64(d / l.TimeUnit)
	if d%l.TimeUnit != 0 {
		tick++
	}
	return min(tick, int64(1)<<l.TimeBits)
}

// errNoLease is the answer for a lease this server does not hold.
func errNoLease(name string, why string) error {
	return apiErrorf(http.StatusNotFound, codeNotFound,
		"no lease %q here: %s; issue only in the ticks it was last given and acquire a new one", clip(name), why)
}

// renewLease reports lease name's reservation and restarts its idle timer.
func (s *Server) renewLease(name string) (leaseJSON, error) {
	now := s.node.Now()
	s.leases.mu.Lock()
	sess := s.leases.byName[name]
	s.leases.mu.Unlock()
	if sess == nil {
		return leaseJSON{}, errNoLease(name, "released, not renewed within its TTL, or never acquired from this server")
	}
	if err := sess.lease.Err(); err != nil {
		s.dropLease(name, sess)
		return leaseJSON{}, errNoLease(name, fmt.Sprintf("lost (%v)", err))
	}
	sess.idle.Reset(s.node.LeaseConfig().TTL)
	return s.leaseAnswer(name, sess.lease, now)
}

// releaseLease closes lease name: its worker id is freed with its
// reservation stored.
func (s *Server) releaseLease(name string) error {
	s.leases.mu.Lock()
	sess := s.leases.byName[name]
	s.leases.mu.Unlock()
	if sess == nil {
		return errNoLease(name, "released, not renewed within its TTL, or never acquired from this server")
	}
	err := s.dropLease(name, sess)
	if errors.Is(err, worker.ErrNotHeld) || errors.Is(err, worker.ErrLeaseLost) {
		return nil // lost before: its reservation was stored all the same
	}
	return err
}

// dropLease forgets sess and closes its lease.
func (s *Server) dropLease(name string, sess *leaseSession) error {
	s.leases.mu.Lock()
	if s.leases.byName[name] == sess {
		delete(s.leases.byName, name)
	}
	s.leases.mu.Unlock()
	sess.idle.Stop()
	return sess.lease.Close()
}

// handleLeaseAcquire answers POST /v1/leases (body optional: {"owner": …}).
func (s *Server) handleLeaseAcquire(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", true, false); err != nil {
		return err
	}
	members, err := readObject(w, r, true)
	if err != nil {
		return err
	}
	var owner string
	for _, m := range members {
		if m.key != "owner" {
			return apiErrorf(http.StatusBadRequest, codeInvalid, "unknown key %q: a lease takes owner (or no body)", clip(m.key))
		}
		if owner, err = stringField(m); err != nil {
			return err
		}
	}
	out, err := s.acquireLease(r.Context(), owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleLeaseRenew answers POST /v1/leases/{lease}/renew.
func (s *Server) handleLeaseRenew(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", true, false); err != nil {
		return err
	}
	out, err := s.renewLease(r.PathValue("lease"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleLeaseRelease answers DELETE /v1/leases/{lease}.
func (s *Server) handleLeaseRelease(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(r.Header, "", true, false); err != nil {
		return err
	}
	if err := s.releaseLease(r.PathValue("lease")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Released bool `json:"released"`
	}{true})
	return nil
}

// workerLease is a lease's answer as the RPCs send it.
func workerLease(l leaseJSON) *flakeidv1.WorkerLease {
	return &flakeidv1.WorkerLease{Lease: l.Lease, Datacenter: l.Datacenter, Worker: l.Worker,
		TimeBits: int32(l.Layout.TimeBits), DatacenterBits: int32(l.Layout.DatacenterBits), WorkerBits: int32(l.Layout.WorkerBits),
		SequenceBits: int32(l.Layout.SequenceBits), TimeUnitUs: l.Layout.TimeUnitUs, Layout: l.Layout.Name,
		FirstTick: l.FirstTick, EndTick: l.EndTick, NowUs: l.NowUs, RenewEveryMs: l.RenewEveryMs, TtlMs: l.TTLMs}
}

// AcquireLease implements flakeidv1connect.IDServiceHandler.
func (x idService) AcquireLease(ctx context.Context, req *connect.Request[flakeidv1.AcquireLeaseRequest]) (*connect.Response[flakeidv1.AcquireLeaseResponse], error) {
	l, err := x.s.acquireLease(ctx, req.Msg.GetOwner())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&flakeidv1.AcquireLeaseResponse{Lease: workerLease(l)}), nil
}

// RenewLease implements flakeidv1connect.IDServiceHandler.
func (x idService) RenewLease(_ context.Context, req *connect.Request[flakeidv1.RenewLeaseRequest]) (*connect.Response[flakeidv1.RenewLeaseResponse], error) {
	l, err := x.s.renewLease(req.Msg.GetLease())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&flakeidv1.RenewLeaseResponse{Lease: workerLease(l)}), nil
}

// ReleaseLease implements flakeidv1connect.IDServiceHandler.
func (x idService) ReleaseLease(_ context.Context, req *connect.Request[flakeidv1.ReleaseLeaseRequest]) (*connect.Response[flakeidv1.ReleaseLeaseResponse], error) {
	if err := x.s.releaseLease(req.Msg.GetLease()); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&flakeidv1.ReleaseLeaseResponse{}), nil
}
