package etcdproc

import (
	"cmp"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
)

func TestStartServesUntilKilled(t *testing.T) {
	bin := testenv.Command(t, cmp.Or(os.Getenv("FLAKEID_ETCD_BIN"), "etcd"),
		"the test starts an etcd server; install etcd-server (./scripts/services.sh does) or set FLAKEID_ETCD_BIN")
	s, err := Start(t.Context(), Options{Bin: bin, Dir: t.TempDir(), Name: "etcdproc-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	hc := &http.Client{Timeout: 2 * time.Second}
	if !healthy(t.Context(), hc, "http://"+s.Addr()) {
		t.Fatalf("the etcd at %s is not healthy after Start", s.Addr())
	}
	if !strings.Contains(s.Tail(1<<20), "etcdproc-test") {
		t.Errorf("the log does not name the member etcdproc-test:\n%s", s.Tail(2000))
	}
	if got := s.Tail(10); len(got) != 10 {
		t.Errorf("Tail(10) = %q", got)
	}
	s.Kill()
	s.Kill() // a second Kill returns at once
	if s.Cmd().ProcessState == nil {
		t.Fatal("Kill returned before the process exited")
	}
	if healthy(t.Context(), hc, "http://"+s.Addr()) {
		t.Fatal("the etcd still answers after Kill")
	}
	var none *Server
	none.Kill()
}

func TestStartFails(t *testing.T) {
	_, err := Start(t.Context(), Options{Bin: "false", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("Start of a program that exits at once: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, Options{Bin: "sleep", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Start with a cancelled context: %v", err)
	}
}
