package main

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/backend/redis"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// TestWorkersClaimsAndUnclaim: `flakeid workers claims` shows a registry's
// ID space and claims, and `flakeid workers unclaim` frees a claim only for
// the namespace that holds it and only once none of its worker ids is held
// and its marks have passed — on a real Redis.
func TestWorkersClaimsAndUnclaim(t *testing.T) {
	addr := ownRedis(t) // the registry is the database's one: a Redis of the test's own
	base := randomName("flakeid-claims-")
	urlOf := func(prefix string) string { return "redis://" + addr + "/0?prefix=" + prefix }
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { client.Close() })
	u, err := url.Parse(urlOf(base + ":a"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := redis.OpenWorkers(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	space := snowflake.DefaultLayout().String()
	cl, err := w.Acquire(t.Context(), worker.Request{Workers: 2, Owner: "old", TTL: 10 * time.Second, Reserve: time.Now(),
		Space: space, Contract: space + "; quarantine 4s"})
	if err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, "workers", "claims", "--coordinator", urlOf(base+":b"))
	if r.code != exitOK || !strings.Contains(r.stdout, "ID space: "+space) || !strings.Contains(r.stdout, "0           "+base+":a") {
		t.Fatalf("claims: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "workers", "claims", "--json", "--coordinator", urlOf(base+":a"))
	if want := `{"space":"` + space + `","datacenters":[{"datacenter":0,"namespace":"` + base + `:a"}]}`; strings.TrimSpace(r.stdout) != want {
		t.Fatalf("claims --json = %s, want %s", r.stdout, want)
	}
	for _, tc := range []struct {
		ns, want string
	}{
		{base + ":a", "worker 0 is held by \"old\""},
		{base + ":b", "not by this one (\"" + base + ":b\")"},
	} {
		if r := runCLI(t, "workers", "unclaim", "--coordinator", urlOf(tc.ns), "--datacenter", "0"); r.code != exitError || !strings.Contains(r.stderr, tc.want) {
			t.Fatalf("unclaim by %s: exit %d, stderr %s; want it refused saying %q", tc.ns, r.code, r.stderr, tc.want)
		}
	}
	if err := cl.Release(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if r := runCLI(t, "workers", "unclaim", "--coordinator", urlOf(base+":a"), "--datacenter", "0"); r.code != exitOK || !strings.Contains(r.stdout, "freed datacenter 0") {
		t.Fatalf("unclaim once nothing runs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "workers", "claims", "--coordinator", urlOf(base+":a")); !strings.Contains(r.stdout, "no datacenter id claimed") {
		t.Fatalf("claims after unclaim:\n%s%s", r.stdout, r.stderr)
	}
	if r := runCLI(t, "workers", "claims", "--data-dir", t.TempDir()); r.code != exitError || !strings.Contains(r.stderr, "no datacenter registry") {
		t.Fatalf("claims of the file coordinator: exit %d, %s", r.code, r.stderr)
	}
}

// TestWorkersLowerMark: `flakeid workers lower-mark` lowers the mark of a
// free worker id that a node pushed ahead, and refuses a time before the
// coordinator's clock, leaving the mark.
func TestWorkersLowerMark(t *testing.T) {
	dir := t.TempDir()
	w, err := bolt.OpenWorkers(t.Context(), &url.URL{Scheme: "file", Path: filepath.Join(dir, "workers.db")})
	if err != nil {
		t.Fatal(err)
	}
	space := snowflake.DefaultLayout().String()
	ahead := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	cl, err := w.Acquire(t.Context(), worker.Request{Workers: 1, Owner: "pushed", TTL: 10 * time.Second, Reserve: ahead,
		Space: space, Contract: space + "; quarantine 4s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Release(t.Context(), ahead); err != nil {
		t.Fatal(err)
	}
	w.Close()
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if r := runCLI(t, "workers", "lower-mark", "--data-dir", dir, "--worker", "0", "--to", past); r.code != exitError || !strings.Contains(r.stderr, "before the coordinator's clock") {
		t.Fatalf("lower-mark into the past: exit %d, %s", r.code, r.stderr)
	}
	to := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	r := runCLI(t, "workers", "lower-mark", "--data-dir", dir, "--worker", "0", "--to", to.Format(time.RFC3339))
	if r.code != exitOK || !strings.Contains(r.stdout, "lowered the mark of worker 0 of datacenter 0 from "+stamp(ahead)+" to "+stamp(to)) {
		t.Fatalf("lower-mark: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "workers", "ls", "--json", "--data-dir", dir)
	if !strings.Contains(r.stdout, `"high_water":"`+stamp(to)+`"`) {
		t.Fatalf("workers ls after lower-mark:\n%s%s", r.stdout, r.stderr)
	}
}

// TestTwoClustersOnOneCoordinator is issue 46's case as a new user meets
// it: two clusters on one Redis, default layout, datacenter 0, under the
// prefixes a and b. The second is refused at start, naming the first; with
// a registry of their own each (registry=r1, registry=r2: 2,696 duplicate
// IDs in 830,000 when the issue was filed) both are refused before they
// connect.
func TestTwoClustersOnOneCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the quarantine of a new coordinator")
	}
	addr := ownRedis(t)
	base := randomName("flakeid-two-")
	urlOf := func(ns, extra string) string { return "redis://" + addr + "/0?prefix=" + base + ":" + ns + extra }
	for i, ns := range []string{"a", "b"} {
		r := runCLI(t, "next", "--coordinator", urlOf(ns, "&registry=r"+strconv.Itoa(i+1)), "-n", "1")
		mustFail(t, r, exitError, "registry= is not accepted")
	}
	r := runCLI(t, "next", "--coordinator", urlOf("a", ""), "-n", "3")
	mustSucceed(t, r)
	if n := len(strings.Fields(r.stdout)); n != 3 {
		t.Fatalf("the first cluster printed %d IDs, want 3:\n%s", n, r.stdout)
	}
	r = runCLI(t, "next", "--coordinator", urlOf("b", ""), "-n", "3")
	mustFail(t, r, exitError, "datacenter 0 is claimed", base+":a", base+":b")
	if strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("the refused cluster printed IDs:\n%s", r.stdout)
	}
}
