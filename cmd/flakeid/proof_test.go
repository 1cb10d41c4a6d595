package main

// The proof of issue 3, with the real binary: processes contending for worker
// ids on each coordinator, kill -9, a newcomer whose clock is 5 s behind, a
// restart with the clock moved back, and a coordinator that becomes
// unreachable. Every backend runs against the real service (see
// internal/testenv); under CI=true a missing service fails the test.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/faultnet"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/snowflake"
)

// builtBinary builds the binary once per test run, into dir (TestMain sets
// it to a directory it removes at the end), with deploy/Dockerfile's build
// command.
type builtBinary struct {
	dir  string
	once sync.Once
	path string
	err  error
}

func (b *builtBinary) get(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir == "" {
			b.err = errors.New("builtBinary: no directory (TestMain sets it)")
			return
		}
		if b.err = os.MkdirAll(b.dir, 0o755); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "flakeid")
		// The build of the container image (deploy/Dockerfile), so that
		// the tests run the binary the image ships.
		line, err := dockerBuildLine()
		if err != nil {
			b.err = err
			return
		}
		cmd := exec.Command("sh", "-c", line+" -o "+b.path+" ./cmd/flakeid")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%s: %v\n%s", line, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// proofLayout: 2 worker bits (4 worker ids), no datacenter bits.
var proofLayoutArgs = []string{"--datacenter-bits", "0", "--worker-bits", "2"}

func proofLayout() snowflake.Layout {
	return snowflake.Layout{TimeBits: 41, WorkerBits: 2, SequenceBits: 12}
}

// issued is one ID a process printed, with the time the test read it.
type issued struct {
	id   snowflake.ID
	read time.Time
}

// proc is a running `flakeid next` process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	ids    []issued
	stderr bytes.Buffer
	done   chan struct{}
}

func startProc(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "FLAKEID_DATA_DIR="+t.TempDir())
	p.cmd.Stderr = &syncWriter{mu: &p.mu, w: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			id, err := snowflake.Parse(strings.TrimSpace(sc.Text()))
			if err != nil {
				continue
			}
			p.mu.Lock()
			p.ids = append(p.ids, issued{id, time.Now()})
			p.mu.Unlock()
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (p *proc) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

func (p *proc) snapshot() ([]issued, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ids), p.stderr.String()
}

// worker is the worker id of the process's newest ID, or -1.
func (p *proc) worker() int64 {
	ids, _ := p.snapshot()
	return lastWorker(ids)
}

// lastWorker is the worker id of the newest of ids, or -1 when there is
// none. A caller that also looks at the IDs takes both from one snapshot:
// the process may issue its first ID between two.
func lastWorker(ids []issued) int64 {
	if len(ids) == 0 {
		return -1
	}
	parts, _ := proofLayout().Decode(ids[len(ids)-1].id)
	return parts.Worker
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randomName(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// proofBackend is a coordinator URL for one backend, fresh for one test.
type proofBackend struct {
	name string
	url  func(t *testing.T) string
}

func proofBackends() []proofBackend {
	return []proofBackend{
		{"file", func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "workers.db") }},
		{"etcd", func(t *testing.T) string {
			return "etcd://" + ownEtcd(t) + "/" + randomName("flakeid-proof-")
		}},
		{"redis", func(t *testing.T) string {
			return "redis://" + ownRedis(t) + "/0?prefix=" + randomName("flakeid-proof-")
		}},
		{"postgres", func(t *testing.T) string {
			return sqlCoordinatorURL(t, "postgres", testenv.Postgres().Require(t), "")
		}},
		{"mysql", func(t *testing.T) string {
			return sqlCoordinatorURL(t, "mysql", testenv.MySQL().Require(t), "")
		}},
		{"zk", func(t *testing.T) string {
			return zkCoordinatorURL(t, ownZooKeeper(t))
		}},
		{"consul", func(t *testing.T) string {
			return consulCoordinatorURL(t, ownConsul(t))
		}},
	}
}

// sqlURL is a coordinator URL on a fresh table of the test database (dsn),
// reached at addr ("" for the database's own address); the table is dropped
// when the test ends.
func sqlURL(t *testing.T, scheme, dsn, addr string) string {
	t.Helper()
	host := testenv.HostPort(dsn)
	if addr == "" {
		addr = host
	}
	table := randomName("flakeid_proof_")
	var u string
	if scheme == "postgres" {
		u = strings.Replace(dsn, host, addr, 1)
		if strings.Contains(u, "?") {
			u += "&table=" + table
		} else {
			u += "?table=" + table
		}
	} else {
		// root@tcp(127.0.0.1:3306)/test → mysql://root@addr/test
		user, rest, _ := strings.Cut(dsn, "@tcp(")
		_, db, _ := strings.Cut(rest, ")/")
		u = "mysql://" + user + "@" + addr + "/" + db + "?table=" + table
	}
	t.Cleanup(func() { dropTable(dsn, scheme, table) })
	return u
}

// sqlCoordinatorURL is sqlURL in a database of the test's own
// (ownSQLDatabase), whose datacenter registry is the test's alone.
func sqlCoordinatorURL(t *testing.T, scheme, dsn, addr string) string {
	t.Helper()
	return sqlURL(t, scheme, ownSQLDatabase(t, dsn), addr)
}

// dropTable removes a proof test's table.
func dropTable(dsn, scheme, table string) {
	db, _, err := sqldb.OpenDB(dsn)
	if err != nil {
		return
	}
	defer db.Close()
	q := `DROP TABLE IF EXISTS "` + table + `"`
	if scheme == "mysql" {
		q = "DROP TABLE IF EXISTS `" + table + "`"
	}
	db.Exec(q)
}

// heldCount asks `flakeid workers ls --json` how many ids are held.
func heldCount(t *testing.T, bin, url string) int {
	t.Helper()
	out, err := exec.Command(bin, "workers", "ls", "--json", "--coordinator", url).Output()
	if err != nil {
		t.Fatalf("workers ls: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		var row struct{ Held bool }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("workers ls line %q: %v", line, err)
		}
		if row.Held {
			n++
		}
	}
	return n
}

// checkUnique fails on an ID printed twice, by one process or two, and on a
// process whose IDs do not increase.
func checkUnique(t *testing.T, procs []*proc) int {
	t.Helper()
	seen := map[snowflake.ID]string{}
	total := 0
	for _, p := range procs {
		ids, _ := p.snapshot()
		for i, x := range ids {
			if other, dup := seen[x.id]; dup {
				t.Errorf("ID %d issued by %s and %s", x.id, other, p.name)
			}
			seen[x.id] = p.name
			if i > 0 && x.id <= ids[i-1].id {
				t.Errorf("%s: ID %d after %d", p.name, x.id, ids[i-1].id)
			}
		}
		total += len(ids)
	}
	return total
}

var proofBin builtBinary

// TestProofContention: eight processes contend for four worker ids; exactly
// four hold; kill -9 a holder and a newcomer whose clock is 5 s behind takes
// its id after the TTL, issuing only IDs above every ID of the dead holder.
func TestProofContention(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and waits for lease TTLs")
	}
	bin := proofBin.get(t)
	for _, b := range proofBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url := b.url(t)
			// --max-clock-skew lets the newcomers below, whose clocks are
			// 5 s behind, through, so that the high-water marks, not the
			// clock check, are what keeps them from reissuing; every node
			// of a datacenter has the same bound (it sets the quarantine,
			// which is part of the contract). The 4 s TTL lets a holder
			// ride out a stall of 3 s on a loaded machine: with 2 s, the
			// renewals of a holder starved for 1.5 s lapsed, on every SQL
			// coordinator, and a newcomer took its id before the count.
			common := append([]string{"next", "--coordinator", url, "-n", "10000000", "--every", "2ms",
				"--wait-lease", "--lease-ttl", "4s", "--max-wait", "30s", "--max-clock-skew", "6s"}, proofLayoutArgs...)
			var procs []*proc
			for i := range 4 {
				procs = append(procs, startProc(t, bin, fmt.Sprintf("p%d", i), common...))
			}
			waitFor(t, "four holders issuing", 60*time.Second, func() bool {
				for _, p := range procs {
					if p.worker() < 0 {
						return false
					}
				}
				return true
			})
			// The newcomers' clocks are 5 s behind: more than the 4 s a
			// holder reserves ahead.
			behind := append(slices.Clone(common), "--test-clock-offset=-5s")
			for i := 4; i < 8; i++ {
				procs = append(procs, startProc(t, bin, fmt.Sprintf("p%d(-5s)", i), behind...))
			}
			t.Cleanup(func() { // what each process said, when the test failed
				if !t.Failed() {
					return
				}
				for _, p := range procs {
					_, stderr := p.snapshot()
					t.Logf("%s, the end of its stderr:\n%s", p.name, stderr[max(0, len(stderr)-1200):])
				}
			})
			time.Sleep(time.Second)
			// A holder that the machine stalled for longer than its TTL
			// (a slow fsync of the coordinator, the CPU of a loaded CI
			// machine) loses its lease, says so, stops issuing and a
			// newcomer takes the id: correct, and the rest of the test
			// still holds for it. Anything else is a fault.
			lapsed := func() string {
				for _, p := range procs[:4] {
					if _, stderr := p.snapshot(); strings.Contains(stderr, "lease lost") {
						return p.name
					}
				}
				return ""
			}
			if n := heldCount(t, bin, url); n > 4 || n < 4 && lapsed() == "" {
				t.Fatalf("%d worker ids held with eight contenders, want 4", n)
			}
			for _, p := range procs[4:] {
				if ids, _ := p.snapshot(); len(ids) > 0 {
					if who := lapsed(); who != "" {
						t.Logf("%s issued %d IDs after %s lost its lease (a stall of the machine)", p.name, len(ids), who)
						continue
					}
					t.Fatalf("%s issued %d IDs while four others hold all worker ids", p.name, len(ids))
				}
			}

			victim := procs[1]
			dead := victim.worker()
			victim.kill()
			deadIDs, _ := victim.snapshot()
			killedAt := time.Now()
			// Usually a newcomer (clock behind) takes it; on a loaded machine a
			// holder that missed a renewal of its 4 s lease may take it
			// instead, and a newcomer the id that holder gave up. Whoever
			// takes it must issue above the dead holder's IDs.
			var newcomer *proc
			waitFor(t, "another process to take the dead holder's worker id", 60*time.Second, func() bool {
				for _, p := range procs {
					ids, _ := p.snapshot()
					if p != victim && lastWorker(ids) == dead && ids[len(ids)-1].read.After(killedAt) {
						newcomer = p
						return true
					}
				}
				return false
			})
			t.Logf("%s took worker %d %v after the kill", newcomer.name, dead, time.Since(killedAt).Round(time.Millisecond))
			waitFor(t, "the newcomer to issue a few IDs", 10*time.Second, func() bool {
				ids, _ := newcomer.snapshot()
				return len(ids) >= 20
			})
			// All four worker ids held again. Eventually: on a loaded
			// machine a holder can miss a renewal of its 4 s lease, stop
			// issuing (fencing) and take an id again a moment later.
			waitFor(t, "four worker ids held after the takeover", 15*time.Second, func() bool {
				return heldCount(t, bin, url) == 4
			})
			for _, p := range procs {
				if p != victim {
					p.kill()
				}
			}
			maxDead := deadIDs[len(deadIDs)-1].id
			for _, p := range procs {
				if p == victim {
					continue
				}
				ids, _ := p.snapshot()
				for _, x := range ids {
					if parts, _ := proofLayout().Decode(x.id); parts.Worker == dead && x.read.After(killedAt) && x.id <= maxDead {
						t.Fatalf("%s issued %d for worker %d after the kill, not above the dead holder's last ID %d", p.name, x.id, dead, maxDead)
					}
				}
			}
			total := checkUnique(t, procs)
			t.Logf("%d IDs from %d processes, no duplicates", total, len(procs))
		})
	}
}

// TestProofRestartClockBehind: a single node (one worker id) is killed and
// restarted with its clock 5 s behind; it reissues nothing.
func TestProofRestartClockBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a clock 5 s behind to catch up")
	}
	bin := proofBin.get(t)
	url := "file://" + filepath.Join(t.TempDir(), "workers.db")
	// --max-clock-skew lets the restart with its clock 5 s behind through:
	// the high-water mark is what is tested here (TestServeRefusesSkewedClock
	// tests the refusal). Both runs have the same bound: it sets the
	// quarantine, which is part of the contract.
	args := []string{"next", "--coordinator", url, "--datacenter-bits", "0", "--worker-bits", "0", "--max-wait", "30s", "--max-clock-skew", "6s"}
	first := startProc(t, bin, "first", append(slices.Clone(args), "-n", "10000000", "--every", "1ms")...)
	waitFor(t, "the first run to issue", 10*time.Second, func() bool { ids, _ := first.snapshot(); return len(ids) > 200 })
	first.kill() // kill -9: no release, the reservation stays
	before, _ := first.snapshot()
	second := startProc(t, bin, "second(-5s)", append(slices.Clone(args), "-n", "1000", "--test-clock-offset=-5s")...)
	<-second.done
	after, stderr := second.snapshot()
	if len(after) != 1000 {
		t.Fatalf("restarted run printed %d IDs; stderr:\n%s", len(after), stderr)
	}
	last := before[len(before)-1].id
	if after[0].id <= last {
		t.Fatalf("restarted with the clock 5 s behind, the node issued %d ≤ %d, the last ID before the kill", after[0].id, last)
	}
	checkUnique(t, []*proc{first, second})
}

// proxiedBackend is a network coordinator that a test can cut one node off.
type proxiedBackend struct {
	name string
	// urls returns the coordinator URL for a node that reaches the service
	// at addr, and the service's real address, for one fresh namespace.
	urls func(t *testing.T) (real string, at func(addr string) string)
}

func proxiedBackends() []proxiedBackend {
	return []proxiedBackend{
		{"redis", func(t *testing.T) (string, func(string) string) {
			addr, prefix := ownRedis(t), randomName("flakeid-proof-")
			return addr, func(a string) string { return "redis://" + a + "/0?prefix=" + prefix }
		}},
		{"etcd", func(t *testing.T) (string, func(string) string) {
			addr, prefix := ownEtcd(t), randomName("flakeid-proof-")
			return addr, func(a string) string { return "etcd://" + a + "/" + prefix }
		}},
		{"postgres", sqlProxied("postgres", testenv.Postgres())},
		{"mysql", sqlProxied("mysql", testenv.MySQL())},
		{"zk", func(t *testing.T) (string, func(string) string) {
			addr := ownZooKeeper(t)
			direct := zkCoordinatorURL(t, addr)
			return addr, func(a string) string { return strings.Replace(direct, addr, a, 1) }
		}},
		{"consul", func(t *testing.T) (string, func(string) string) {
			addr := ownConsul(t)
			direct := consulCoordinatorURL(t, addr)
			return addr, func(a string) string { return strings.Replace(direct, addr, a, 1) }
		}},
	}
}

// sqlProxied is a SQL backend whose URL can name another address (a proxy)
// for the same table.
func sqlProxied(scheme string, svc testenv.Service) func(t *testing.T) (string, func(string) string) {
	return func(t *testing.T) (string, func(string) string) {
		dsn := svc.Require(t)
		real := testenv.HostPort(dsn)
		direct := sqlCoordinatorURL(t, scheme, dsn, "")
		return real, func(a string) string { return strings.Replace(direct, real, a, 1) }
	}
}

// logTime finds the first log line of p's stderr containing msg and returns
// its time= field.
func logTime(t *testing.T, stderr, msg string) (time.Time, bool) {
	t.Helper()
	for line := range strings.Lines(stderr) {
		if !strings.Contains(line, msg) {
			continue
		}
		f, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		ts, err := time.Parse(time.RFC3339Nano, f)
		if err != nil {
			t.Fatalf("log line without a time: %q", line)
		}
		return ts, true
	}
	return time.Time{}, false
}

// TestProofUnreachable: a node cut off from its coordinator for longer than
// the TTL stops issuing before anyone else can take its worker id — shown by
// the recorded timestamps — and issues again once the coordinator is back.
func TestProofUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for lease TTLs")
	}
	bin := proofBin.get(t)
	for _, b := range proxiedBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			real, at := b.urls(t)
			proxy, err := faultnet.Listen(real)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			args := []string{"next", "-n", "10000000", "--every", "2ms", "--wait-lease", "--lease-ttl", "2s",
				"--max-wait", "30s", "--datacenter-bits", "0", "--worker-bits", "0"} // one worker id
			a := startProc(t, bin, "A(proxied)", append(slices.Clone(args), "--coordinator", at(proxy.Addr()))...)
			waitFor(t, "A issuing", 20*time.Second, func() bool { ids, _ := a.snapshot(); return len(ids) > 100 })
			bProc := startProc(t, bin, "B", append(slices.Clone(args), "--coordinator", at(real))...)
			time.Sleep(time.Second)
			if ids, _ := bProc.snapshot(); len(ids) > 0 {
				t.Fatalf("B issued while A holds the only worker id")
			}

			proxy.Cut()
			cutAt := time.Now()
			waitFor(t, "B to take the worker id", 30*time.Second, func() bool { ids, _ := bProc.snapshot(); return len(ids) > 0 })
			aIDs, aErr := a.snapshot()
			bIDs, _ := bProc.snapshot()
			lost, ok := logTime(t, aErr, "lease lost")
			if !ok {
				t.Fatalf("A logged no lease loss; stderr:\n%s", aErr)
			}
			aLast, bFirst := aIDs[len(aIDs)-1], bIDs[0]
			t.Logf("cut at 0; A's last ID read at %v, A gave up its lease at %v, B's first ID read at %v",
				aLast.read.Sub(cutAt).Round(time.Millisecond), lost.Sub(cutAt).Round(time.Millisecond), bFirst.read.Sub(cutAt).Round(time.Millisecond))
			if !lost.Before(bFirst.read) || !aLast.read.Before(bFirst.read) {
				t.Fatalf("ordering violated: A's last ID at %v, A's lease lost at %v, B's first ID at %v", aLast.read, lost, bFirst.read)
			}
			if bFirst.id <= aLast.id {
				t.Fatalf("B's first ID %d is not above A's last %d", bFirst.id, aLast.id)
			}

			// Recovery: heal, let B go (SIGTERM: it releases), and A issues again.
			proxy.Heal()
			bProc.cmd.Process.Signal(syscall.SIGTERM)
			<-bProc.done
			nA := len(aIDs)
			deadline := time.Now().Add(30 * time.Second)
			for {
				ids, stderr := a.snapshot()
				if len(ids) > nA+10 {
					break
				}
				if time.Now().After(deadline) {
					_, bErr := bProc.snapshot()
					t.Fatalf("A did not issue again within 30 s of recovery; A's stderr:\n%s\nB's stderr:\n%s", stderr, bErr)
				}
				time.Sleep(20 * time.Millisecond)
			}
			a.kill()
			checkUnique(t, []*proc{a, bProc})
		})
	}
}
