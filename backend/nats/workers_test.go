package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/workertest"
)

// server is a private nats-server with JetStream, on a port the OS picked.
type server struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	out    bytes.Buffer
}

// startServer starts a private nats-server for t, stopped at its end.
func startServer(t testing.TB) *server {
	t.Helper()
	bin := testenv.Command(t, natsServerBin(), "the fault tests start a private nats-server")
	dir := t.TempDir()
	s := &server{exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", filepath.Join(dir, "store"), "--ports_file_dir", dir)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting nats-server: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill() // works on a stopped server too
		<-s.exited
		if t.Failed() {
			t.Logf("private nats-server at %s:\n%s", s.url, s.out.String())
		}
	})
	ports := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), s.cmd.Process.Pid))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(ports)
		if err != nil {
			continue
		}
		var p struct {
			Nats []string `json:"nats"`
		}
		if json.Unmarshal(b, &p) == nil && len(p.Nats) > 0 {
			s.url = p.Nats[0]
			return s
		}
	}
	t.Fatalf("nats-server wrote no ports file %s in 10s:\n%s", ports, s.out.String())
	return nil
}

// natsServerBin is nats-server in PATH, or Debian's /usr/sbin/nats-server.
func natsServerBin() string {
	if _, err := exec.LookPath("nats-server"); err != nil {
		if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
			return "/usr/sbin/nats-server"
		}
	}
	return "nats-server"
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
	private *server
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
		c.url = c.private.url
	}
	c.mu.Unlock()
	u, b := c.target(t)
	return open(t, u, b, "ns"), stopFault{t, c.private}
}

// stopFault stops the private server (SIGSTOP) and continues it.
type stopFault struct {
	t *testing.T
	s *server
}

func (f stopFault) Cut() {
	if err := f.s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		f.t.Fatalf("stopping nats-server: %v", err)
	}
}

func (f stopFault) Heal() {
	if err := f.s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
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
