package nats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flakeid/flakeid/internal/natsproc"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// startServer starts a private nats-server for t, killed at its end.
func startServer(t testing.TB) *natsproc.Server {
	t.Helper()
	bin, err := natsproc.Bin("")
	if err != nil {
		testenv.Command(t, "nats-server", "the fault tests start a private nats-server")
	}
	s, err := natsproc.Start(t.Context(), natsproc.Options{Bin: bin, Dir: t.TempDir(),
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// sharedURL is the shared NATS server's URL (testenv.NATS), after checking
// that it answers.
func sharedURL(t testing.TB) string {
	t.Helper()
	addr := testenv.NATS().Require(t)
	if strings.Contains(addr, "://") {
		return addr
	}
	return "nats://" + addr
}

// connect connects to the server at u for t.
func connect(t testing.TB, u string) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect(u, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connecting to %s: %v", u, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newBucket names a bucket of t's own on a shared server and deletes it at
// t's end: a coordinator of the test's own.
func newBucket(t testing.TB, u string) string {
	t.Helper()
	bucket := fmt.Sprintf("flakeidtest_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		nc, err := natsgo.Connect(u)
		if err != nil {
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, bucket)
	})
	return bucket
}

// open opens the coordinator of namespace ns in bucket at u.
func open(t testing.TB, u, bucket, ns string) *Workers {
	t.Helper()
	w, err := NewWorkers(t.Context(), connect(t, u), bucket, ns)
	if err != nil {
		t.Fatalf("NewWorkers: %v", err)
	}
	return w
}

// connector is one test's coordinator: a bucket of its own on the shared
// server, or, once the test asks for a faulty client, on a private server
// that the fault stops with SIGSTOP.
type connector struct {
	mu      sync.Mutex
	url     string
	private *natsproc.Server
	used    bool
	bucket  string
}

func (c *connector) target(t *testing.T) (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used = true
	return c.url, c.bucket
}

func (c *connector) Connect(t *testing.T) worker.Coordinator {
	u, b := c.target(t)
	return open(t, u, b, "ns")
}

func (c *connector) OtherNamespace(t *testing.T) worker.Coordinator {
	u, b := c.target(t)
	return open(t, u, b, "other")
}

func (c *connector) ConnectFaulty(t *testing.T) (worker.Coordinator, workertest.Fault) {
	c.mu.Lock()
	if c.private == nil {
		if c.used {
			c.mu.Unlock()
			t.Fatal("ConnectFaulty after Connect: the earlier clients talk to the shared server")
		}
		c.private = startServer(t)
		c.url = c.private.URL()
	}
	c.mu.Unlock()
	u, b := c.target(t)
	return open(t, u, b, "ns"), stopFault{t, c.private}
}

// stopFault stops the private server (SIGSTOP) and continues it.
type stopFault struct {
	t *testing.T
	s *natsproc.Server
}

func (f stopFault) Cut() {
	if err := f.s.Pause(); err != nil {
		f.t.Fatalf("stopping nats-server: %v", err)
	}
}

func (f stopFault) Heal() {
	if err := f.s.Resume(); err != nil {
		f.t.Fatalf("continuing nats-server: %v", err)
	}
}

// kv is the test bucket, through a connection of its own.
func (c *connector) kv(t *testing.T) jetstream.KeyValue {
	u, b := c.target(t)
	js, err := jetstream.New(connect(t, u))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), b)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: b, History: history})
	}
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// entries reads every key of the bucket.
func entries(t *testing.T, kv jetstream.KeyValue) map[string][]byte {
	keys, err := kv.Keys(t.Context())
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatalf("listing keys: %v", err)
	}
	out := map[string][]byte{}
	for _, k := range keys {
		e, err := kv.Get(t.Context(), k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("reading %s: %v", k, err)
		}
		out[k] = e.Value()
	}
	return out
}

// Wipe purges every key of the bucket, as a lost or purged bucket would.
func (c *connector) Wipe(t *testing.T) {
	kv := c.kv(t)
	for k := range entries(t, kv) {
		if err := kv.Purge(t.Context(), k); err != nil {
			t.Fatalf("purging %s: %v", k, err)
		}
	}
}

// Snapshot copies every key; restoring puts the copy back and purges the
// keys the copy did not have, as a restore from a backup would.
func (c *connector) Snapshot(t *testing.T) func() {
	kv := c.kv(t)
	saved := entries(t, kv)
	return func() {
		for k := range entries(t, kv) {
			if _, ok := saved[k]; !ok {
				if err := kv.Purge(t.Context(), k); err != nil {
					t.Fatalf("purging %s: %v", k, err)
				}
			}
		}
		for k, v := range saved {
			if _, err := kv.Put(t.Context(), k, v); err != nil {
				t.Fatalf("restoring %s: %v", k, err)
			}
		}
	}
}

func TestConformance(t *testing.T) {
	u := sharedURL(t)
	workertest.Run(t, workertest.Harness{
		Open: func(t *testing.T) workertest.Connector {
			return &connector{url: u, bucket: newBucket(t, u)}
		},
		TTL: time.Second,
	})
}

func TestOpenWorkers(t *testing.T) {
	u := sharedURL(t)
	bucket := newBucket(t, u)
	parsed, err := url.Parse(u + "/" + bucket + "?namespace=smoke")
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenWorkers(t.Context(), parsed)
	if err != nil {
		t.Fatalf("OpenWorkers(%s): %v", parsed, err)
	}
	defer w.Close()
	workertest.Smoke(t, w, time.Second)
	c, err := w.Claims(t.Context())
	if err != nil || len(c.Datacenters) != 1 || c.Datacenters[0].Namespace != "smoke" {
		t.Fatalf("Claims = %+v, %v; want datacenter 0 claimed by smoke", c, err)
	}
	for _, bad := range []string{
		"http://127.0.0.1:4222/b", "nats://127.0.0.1:4222/b?registry=r", "nats://127.0.0.1:4222/b?namespce=x",
		"nats://127.0.0.1:4222/b.c", "nats://127.0.0.1:4222/b?namespace=a&namespace=b",
	} {
		pu, _ := url.Parse(bad)
		if _, err := OpenWorkers(t.Context(), pu); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("OpenWorkers(%s): %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// TestBucketLost: a bucket deleted under its holders (or a server that
// came back without its store) is a lost state like any other: the bucket
// is made again, empty, the holder's next Renew fails with ErrReset and
// re-initialises the namespace, and the next holder starts past the
// quarantine.
func TestBucketLost(t *testing.T) {
	for _, how := range []string{"deleted", "server restarted without its store"} {
		t.Run(how, func(t *testing.T) {
			s := startServer(t)
			w := open(t, s.URL(), "b", "ns")
			req := worker.Request{Workers: 1, Owner: "a", TTL: 2 * time.Second, Reserve: time.Now().Add(time.Second),
				Quarantine: 5 * time.Second, Contract: "c", Space: "c"}
			cl, err := w.Acquire(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if how == "deleted" {
				js, _ := jetstream.New(connect(t, s.URL()))
				if err := js.DeleteKeyValue(t.Context(), "b"); err != nil {
					t.Fatal(err)
				}
			} else if err := s.Restart(t.Context(), true); err != nil {
				t.Fatal(err)
			}
			var rerr error
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				rerr = cl.Renew(ctx, 2*time.Second, time.Now().Add(time.Second))
				cancel()
				if !errors.Is(rerr, worker.ErrUnavailable) {
					break // the client may take a moment to reconnect to a restarted server
				}
			}
			if !errors.Is(rerr, worker.ErrReset) {
				t.Fatalf("Renew after the bucket was lost: %v, want ErrReset", rerr)
			}
			req.Owner = "b"
			before := time.Now()
			next, err := open(t, s.URL(), "b", "ns").Acquire(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !next.Previous().After(before.Add(4 * time.Second)) {
				t.Errorf("the next holder starts at %v, want past the quarantine (5s after %v)", next.Previous(), before)
			}
		})
	}
}
