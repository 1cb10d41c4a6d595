package natsproc

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flakeid/flakeid/internal/testenv"
)

func start(t *testing.T) *Server {
	t.Helper()
	bin, err := Bin("")
	if err != nil {
		testenv.Command(t, "nats-server", "the test starts a private NATS server")
	}
	s, err := Start(t.Context(), Options{Bin: bin, Dir: t.TempDir(), SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// bucket opens (create) the bucket "b" of s.
func bucket(t *testing.T, s *Server, create bool) (jetstream.KeyValue, error) {
	t.Helper()
	nc, err := natsgo.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if create {
		return js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b"})
	}
	return js.KeyValue(t.Context(), "b")
}

// TestRestartPauseResume: a restart keeps the store, a wiped restart loses
// it, both on the same address; a paused server answers nothing until
// resumed.
func TestRestartPauseResume(t *testing.T) {
	s := start(t)
	addr := s.Addr()
	kv, err := bucket(t, s, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = kv.Get(ctx, "k")
	cancel()
	if err == nil {
		t.Fatal("Get from a paused server succeeded")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", s.Addr(), addr)
	}
	kv, err = bucket(t, s, false)
	if err != nil {
		t.Fatalf("the bucket after a restart with the store: %v", err)
	}
	if e, err := kv.Get(t.Context(), "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("k after a restart with the store: %v", err)
	}
	if err := s.Restart(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket(t, s, false); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the bucket after a wiped restart: %v, want ErrBucketNotFound", err)
	}
}
