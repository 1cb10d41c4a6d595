package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// leaseFixture is a fixture whose node leases from coord with lease (and
// layout; zero: the default).
func leaseFixture(t *testing.T, coord worker.Coordinator, lease worker.Config, layout snowflake.Layout, mutate func(*Config)) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := node.Start(t.Context(), node.Config{Coordinator: coord, Lease: lease, Settings: snowflake.Settings{Layout: layout}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(Options{Config: cfg, Node: n, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(checkedByOpenAPI(t, srv.Handler()))
	t.Cleanup(hs.Close)
	return &fixture{srv: srv, node: n, http: hs}
}

func (f *fixture) lease(t *testing.T, method, path, body string, header ...string) leaseJSON {
	t.Helper()
	r := f.do(t, method, path, body, header...)
	var l leaseJSON
	if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
		t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
	}
	return l
}

// TestLeaseLifecycle: a lease is another worker id than the node's, of the
// node's datacenter and layout; it may issue from its first tick to its end
// tick, which lies ahead of the server's clock and grows with renewals;
// its now_us is the server's clock when the request arrived, before the
// lease's probation (a client's clock from its sending is never behind);
// released, the worker id is free and the lease unknown.
func TestLeaseLifecycle(t *testing.T) {
	coord := workertest.NewMemory(nil)
	f := leaseFixture(t, coord, fixtureLease(), snowflake.Layout{}, nil)
	own := f.node.Status().WorkerID
	sent := time.Now()
	l := f.lease(t, "POST", "/v1/leases", `{"owner":"orders-api/7"}`)
	took := time.Since(sent)
	lay := f.node.Layout()
	if read := lay.Epoch.Add(time.Duration(l.NowUs) * time.Microsecond); read.Before(sent.Add(-time.Millisecond)) || read.After(sent.Add(took/2)) {
		t.Fatalf("now_us reads %v, %v after the request was sent; the answer came after %v: want the clock when the request arrived, before the probation",
			read, read.Sub(sent), took)
	}
	if l.Worker == own || l.Datacenter != 0 || len(l.Lease) != 32 {
		t.Fatalf("lease %+v beside the node's worker %d", l, own)
	}
	if l.Layout != (leaseLayoutJSON{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12, TimeUnitUs: 1000, Name: lay.String()}) {
		t.Fatalf("layout %+v", l.Layout)
	}
	nowTick := l.NowUs / l.Layout.TimeUnitUs
	if l.FirstTick >= l.EndTick || l.EndTick <= nowTick || l.EndTick > nowTick+400+took.Milliseconds() {
		t.Fatalf("ticks [%d, %d) at %d, the answer %v later: want a reservation of about 300 ms ahead of the answer", l.FirstTick, l.EndTick, nowTick, took)
	}
	if l.RenewEveryMs != 100 || l.TTLMs != 10000 {
		t.Fatalf("renew every %d ms, TTL %d ms", l.RenewEveryMs, l.TTLMs)
	}
	infos, err := coord.List(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var holder string
	for _, in := range infos {
		if in.Worker == l.Worker {
			holder = in.Holder
		}
	}
	if !strings.Contains(holder, "/for:orders-api/7/") {
		t.Fatalf("the coordinator names the holder %q", holder)
	}
	time.Sleep(300 * time.Millisecond)
	r := f.lease(t, "POST", "/v1/leases/"+l.Lease+"/renew", "")
	if r.Worker != l.Worker || r.FirstTick != l.FirstTick || r.EndTick <= l.EndTick || r.NowUs <= l.NowUs {
		t.Fatalf("renewed %+v after %+v: the reservation did not grow", r, l)
	}
	if got := f.do(t, "DELETE", "/v1/leases/"+l.Lease, ""); got.status != 200 || got.body != "{\"released\":true}\n" {
		t.Fatalf("release: %d %s", got.status, got.body)
	}
	wantError(t, f.do(t, "POST", "/v1/leases/"+l.Lease+"/renew", ""), 404, codeNotFound, "issue only in the ticks it was last given")
	wantError(t, f.do(t, "DELETE", "/v1/leases/"+l.Lease, ""), 404, codeNotFound, l.Lease)
	if infos, err = coord.List(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Worker == l.Worker && in.Held(time.Now()) {
			t.Fatalf("worker %d still held after the release: %+v", l.Worker, in)
		}
	}
}

// TestLeasesNeverOverlap is the promise of leases for local generation: no
// two leases of one worker id may issue in the same tick. Random runs of
// acquisitions, renewals, releases, idle expiries, a coordinator that lost
// its state and restarts of the server: every lease of a worker id starts at
// or after the end tick of every answer any earlier lease of it gave, and
// two leases held at once have different worker ids.
func TestLeasesNeverOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of leases")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	coord := workertest.NewMemory(nil)
	cfg := fixtureLease()
	cfg.TTL = time.Second // idle leases close after 1 s
	// A small layout: 4 worker ids, so that they are reused.
	layout := snowflake.Layout{DatacenterBits: 1, WorkerBits: 2, SequenceBits: 10}
	f := leaseFixture(t, coord, cfg, layout, nil)
	// held is an open lease and when the request of its last answer was
	// sent: the server restarted its idle timer after that.
	type held struct {
		l    leaseJSON
		sent time.Time
	}
	var open []*held
	ends := map[int64]int64{} // worker id → the greatest end tick told
	check := func(l leaseJSON, acquired bool) {
		t.Helper()
		if acquired && l.FirstTick < ends[l.Worker] {
			t.Fatalf("a lease of worker %d starts at tick %d, before %d, which an earlier lease of it was told", l.Worker, l.FirstTick, ends[l.Worker])
		}
		for _, h := range open {
			if acquired && h.l.Worker == l.Worker {
				t.Fatalf("two open leases of worker %d", l.Worker)
			}
		}
		ends[l.Worker] = max(ends[l.Worker], l.EndTick)
	}
	for step := 0; step < 40; step++ {
		// A lease not renewed for most of a TTL may be closed by now: it
		// is no longer known to be open (its ends stay in ends).
		open = slices.DeleteFunc(open, func(h *held) bool { return time.Since(h.sent) > 800*time.Millisecond })
		switch op := rng.IntN(10); {
		case op < 4:
			sent := time.Now()
			r := f.do(t, "POST", "/v1/leases", "")
			if r.status == 503 {
				if !strings.Contains(r.body, "held") && !strings.Contains(r.body, "unavailable") {
					t.Fatalf("acquire: %d %s", r.status, r.body)
				}
				continue
			}
			var l leaseJSON
			if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
				t.Fatalf("acquire: %d %s", r.status, r.body)
			}
			check(l, true)
			open = append(open, &held{l, sent})
		case op < 7 && len(open) > 0:
			i := rng.IntN(len(open))
			sent := time.Now()
			r := f.do(t, "POST", "/v1/leases/"+open[i].l.Lease+"/renew", "")
			if r.status == 404 {
				open = append(open[:i], open[i+1:]...)
				continue
			}
			var l leaseJSON
			if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
				t.Fatalf("renew: %d %s", r.status, r.body)
			}
			if l.Worker != open[i].l.Worker || l.EndTick < open[i].l.EndTick {
				t.Fatalf("renewal %+v of %+v", l, open[i].l)
			}
			open[i].l, open[i].sent = l, sent
			ends[l.Worker] = max(ends[l.Worker], l.EndTick)
		case op < 8 && len(open) > 0:
			i := rng.IntN(len(open))
			if r := f.do(t, "DELETE", "/v1/leases/"+open[i].l.Lease, ""); r.status != 200 && r.status != 404 {
				t.Fatalf("release: %d %s", r.status, r.body)
			}
			open = append(open[:i], open[i+1:]...)
		case op < 9:
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond) // some leases go idle
			// An idle lease is closed by now or soon: forget those not
			// renewed for a TTL (a renewal would be refused; the next step
			// finds out).
		default:
			if rng.IntN(3) == 0 {
				coord.Wipe() // the coordinator lost its state: every lease is lost
				open = nil
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// TestLeaseIdleExpiry: a lease not renewed within its TTL is closed, its
// worker id freed, and a later one of that id starts past its reservation.
func TestLeaseIdleExpiry(t *testing.T) {
	coord := workertest.NewMemory(nil)
	cfg := fixtureLease()
	cfg.TTL = time.Second
	f := leaseFixture(t, coord, cfg, snowflake.Layout{DatacenterBits: 1, WorkerBits: 1, SequenceBits: 10}, nil)
	l := f.lease(t, "POST", "/v1/leases", "")
	// Both worker ids are held (the node's and the lease's).
	wantError(t, f.do(t, "POST", "/v1/leases", ""), 503, codeUnavailable, "held")
	for range 5 { // renewals keep it
		time.Sleep(400 * time.Millisecond)
		l = f.lease(t, "POST", "/v1/leases/"+l.Lease+"/renew", "")
	}
	time.Sleep(1300 * time.Millisecond)
	wantError(t, f.do(t, "POST", "/v1/leases/"+l.Lease+"/renew", ""), 404, codeNotFound, "not renewed within its TTL")
	next := f.lease(t, "POST", "/v1/leases", "")
	if next.Worker != l.Worker || next.FirstTick < l.EndTick {
		t.Fatalf("the next lease %+v starts before the end tick %d of the expired one", next, l.EndTick)
	}
}

// TestLeaseLostState: a lease whose coordinator lost its state is lost;
// renewing it says so, and the next lease starts past every end tick it was
// told (the quarantine).
func TestLeaseLostState(t *testing.T) {
	coord := workertest.NewMemory(nil)
	f := leaseFixture(t, coord, fixtureLease(), snowflake.Layout{}, nil)
	l := f.lease(t, "POST", "/v1/leases", "")
	l = f.lease(t, "POST", "/v1/leases/"+l.Lease+"/renew", "")
	coord.Wipe()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := f.do(t, "POST", "/v1/leases/"+l.Lease+"/renew", "")
		if r.status == 404 {
			wantError(t, r, 404, codeNotFound, "lost")
			break
		}
		var got leaseJSON
		if r.status != 200 || json.Unmarshal([]byte(r.body), &got) != nil || time.Now().After(deadline) {
			t.Fatalf("renew after the wipe: %d %s", r.status, r.body)
		}
		l = got
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		r := f.do(t, "POST", "/v1/leases", "")
		if r.status == 503 { // the node may hold no lease yet either
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var next leaseJSON
		if r.status != 200 || json.Unmarshal([]byte(r.body), &next) != nil {
			t.Fatalf("acquire: %d %s", r.status, r.body)
		}
		if next.FirstTick < l.EndTick {
			t.Fatalf("a lease after the loss starts at tick %d, before the end tick %d the lost one was told", next.FirstTick, l.EndTick)
		}
		return
	}
	t.Fatal("no lease within 10 s of the wipe")
}

// TestLeaseRefusals: what a lease is refused for, each named.
func TestLeaseRefusals(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Tokens = []Token{{Name: "segs", Token: "segs-token-0123456789", Tags: []string{"orders"}},
			{Name: "ids", Token: "ids-token-0123456789", Snowflake: true}}
	})
	ids := []string{"Authorization", "Bearer ids-token-0123456789"}
	wantError(t, f.do(t, "POST", "/v1/leases", ""), 401, codeUnauth, "bearer token")
	wantError(t, f.do(t, "POST", "/v1/leases", "", "Authorization", "Bearer segs-token-0123456789"), 403, codeForbidden, "may not take Snowflake IDs")
	wantError(t, f.do(t, "POST", "/v1/leases", `{"owner":"a b"}`, ids...), 400, codeInvalid, `has ' '`)
	wantError(t, f.do(t, "POST", "/v1/leases", `{"owner":"`+strings.Repeat("x", 65)+`"}`, ids...), 400, codeInvalid, "65 characters, want 1–64")
	wantError(t, f.do(t, "POST", "/v1/leases", `{"owner":7}`, ids...), 400, codeInvalid, "owner must be a JSON string")
	wantError(t, f.do(t, "POST", "/v1/leases", `{"ttl":7}`, ids...), 400, codeInvalid, `unknown key "ttl"`)
	wantError(t, f.do(t, "POST", "/v1/leases?x=1", "", ids...), 400, codeInvalid, "takes no query parameters")
	wantError(t, f.do(t, "POST", "/v1/leases/nope/renew", "", ids...), 404, codeNotFound, `no lease "nope"`)
	wantError(t, f.do(t, "DELETE", "/v1/leases/nope", "", ids...), 404, codeNotFound, `no lease "nope"`)
	r := f.do(t, "GET", "/v1/leases/x", "", ids...)
	wantError(t, r, 405, codeMethod, "DELETE")
	if r.header.Get("Allow") != "DELETE" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	wantError(t, f.do(t, "GET", "/v1/leases", "", ids...), 405, codeMethod, "POST")

	masked := newFixture(t, func(c *Config) {
		c.Mask = MaskConfig{Keys: []MaskKey{{ID: 3, Key: maskKeyOld}}, Snowflake: true}
	})
	wantError(t, masked.do(t, "POST", "/v1/leases", ""), 409, codePrecondition, "masked Snowflake IDs")

	static := int64(3)
	n, err := node.Start(t.Context(), node.Config{StaticWorkerID: &static, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv, err := New(Options{Node: n, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st := &fixture{srv: srv, node: n, http: httptest.NewServer(srv.Handler())}
	defer st.http.Close()
	wantError(t, st.do(t, "POST", "/v1/leases", ""), 409, codePrecondition, "static worker id")
}

// TestLeaseExhausted: with every worker id held, an acquisition is refused
// at once, naming how many are held; a release makes room.
func TestLeaseExhausted(t *testing.T) {
	f := leaseFixture(t, workertest.NewMemory(nil), fixtureLease(), snowflake.Layout{DatacenterBits: 1, WorkerBits: 2, SequenceBits: 10}, nil)
	var mu sync.Mutex
	var got []leaseJSON
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			r := f.do(t, "POST", "/v1/leases", "")
			var l leaseJSON
			if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
				t.Errorf("acquire: %d %s", r.status, r.body)
				return
			}
			mu.Lock()
			got = append(got, l)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	seen := map[int64]bool{f.node.Status().WorkerID: true}
	for _, l := range got {
		if seen[l.Worker] {
			t.Fatalf("worker %d leased twice: %+v", l.Worker, got)
		}
		seen[l.Worker] = true
	}
	wantError(t, f.do(t, "POST", "/v1/leases", ""), 503, codeUnavailable, "all 4 worker ids of datacenter 0")
	f.lease(t, "DELETE", "/v1/leases/"+got[0].Lease, "")
	if l := f.lease(t, "POST", "/v1/leases", ""); l.Worker != got[0].Worker || l.FirstTick < got[0].EndTick {
		t.Fatalf("after a release: %+v, released %+v", l, got[0])
	}
}

// TestLeaseRPC: the three RPCs over each protocol, and their refusals.
func TestLeaseRPC(t *testing.T) {
	f := leaseFixture(t, workertest.NewMemory(nil), fixtureLease(), snowflake.Layout{}, nil)
	for _, p := range rpcProtocols() {
		if p.name == "connect-get" {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			c := flakeidv1connect.NewIDServiceClient(f.http.Client(), f.http.URL, p.opts...)
			a, err := c.AcquireLease(t.Context(), connect.NewRequest(&flakeidv1.AcquireLeaseRequest{Owner: "rpc-" + p.name}))
			if err != nil {
				t.Fatal(err)
			}
			l := a.Msg.GetLease()
			if len(l.GetLease()) != 32 || l.GetWorkerBits() != 5 || l.GetSequenceBits() != 12 || l.GetTimeUnitUs() != 1000 ||
				l.GetFirstTick() >= l.GetEndTick() || l.GetRenewEveryMs() != 100 {
				t.Fatalf("lease %v", l)
			}
			time.Sleep(150 * time.Millisecond)
			r, err := c.RenewLease(t.Context(), connect.NewRequest(&flakeidv1.RenewLeaseRequest{Lease: l.GetLease()}))
			if err != nil {
				t.Fatal(err)
			}
			if r.Msg.GetLease().GetEndTick() <= l.GetEndTick() || r.Msg.GetLease().GetWorker() != l.GetWorker() {
				t.Fatalf("renewed %v after %v", r.Msg.GetLease(), l)
			}
			if _, err := c.ReleaseLease(t.Context(), connect.NewRequest(&flakeidv1.ReleaseLeaseRequest{Lease: l.GetLease()})); err != nil {
				t.Fatal(err)
			}
			_, err = c.RenewLease(t.Context(), connect.NewRequest(&flakeidv1.RenewLeaseRequest{Lease: l.GetLease()}))
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("renewing a released lease: %v", err)
			}
			_, err = c.AcquireLease(t.Context(), connect.NewRequest(&flakeidv1.AcquireLeaseRequest{Owner: "no spaces"}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "owner") {
				t.Fatalf("a bad owner: %v", err)
			}
		})
	}
}

// TestLeasesClosedWithNode: closing the node releases the leases it handed
// out, and it hands out no more.
func TestLeasesClosedWithNode(t *testing.T) {
	coord := workertest.NewMemory(nil)
	f := leaseFixture(t, coord, fixtureLease(), snowflake.Layout{}, nil)
	l := f.lease(t, "POST", "/v1/leases", "")
	if err := f.node.Close(); err != nil {
		t.Fatal(err)
	}
	infos, err := coord.List(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Held(time.Now()) {
			t.Fatalf("worker %d held after the node closed (lease %d): %+v", in.Worker, l.Worker, in)
		}
	}
	if _, err := f.node.LeaseWorkerID(t.Context(), "late"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a lease from a closed node: %v", err)
	}
}
