package verify

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/consulproc"
	"github.com/flakeid/flakeid/internal/etcdproc"
	"github.com/flakeid/flakeid/internal/natsproc"
	"github.com/flakeid/flakeid/internal/zkproc"
)

// coordServer is the main group's private coordinator server — an etcd, a
// ZooKeeper or a Consul dev agent — which the nemesis pauses and, for
// ZooKeeper and Consul, makes lose its state.
type coordServer interface {
	// addr is the server's client address, host:port, which the nodes'
	// proxies forward to; it stays the same across restarts.
	addr() string
	// pid is the server's current process id.
	pid() int
	// pause stops the server's process group (SIGSTOP); resume continues
	// it.
	pause() error
	resume() error
	// loseData makes the server lose every record, session and ephemeral
	// node, and says how, in words.
	loseData(ctx context.Context) (string, error)
	// kill stops the server for good (SIGKILL) and waits for it.
	kill()
}

// startCoord starts the main group's coordinator server on free loopback
// ports, with its data under the run's directory, and waits until it
// serves.
func (r *runner) startCoord(ctx context.Context) error {
	switch r.cfg.Coordinator {
	case groupZK:
		bin, err := exec.LookPath(r.cfg.ZKBin)
		if err != nil {
			return fmt.Errorf("the nemesis needs a private ZooKeeper to pause and wipe: %w; install Debian's zookeeper package (./scripts/services.sh does) or set --zk-bin / FLAKEID_ZK_BIN", err)
		}
		s, err := zkproc.Start(ctx, zkproc.Options{Bin: bin, Dir: filepath.Join(r.dir, "zookeeper"), SysProcAttr: procAttr()})
		if err != nil {
			return err
		}
		r.coord = &zkServer{Server: s, wipe: r.cfg.Seed%2 == 0}
	case groupConsul:
		bin, err := exec.LookPath(r.cfg.ConsulBin)
		if err != nil {
			return fmt.Errorf("the nemesis needs a private Consul agent to pause and restart: %w; ./scripts/consul-agent.sh builds one and prints its path: give it as --consul-bin / FLAKEID_CONSUL_BIN", err)
		}
		s, err := consulproc.Start(ctx, consulproc.Options{Bin: bin, Dir: filepath.Join(r.dir, "consul"), Node: "flakeid-verify", SysProcAttr: procAttr()})
		if err != nil {
			return err
		}
		r.coord = &consulServer{s}
	case groupNATS:
		bin, err := natsproc.Bin(r.cfg.NATSBin)
		if err != nil {
			return fmt.Errorf("the nemesis needs a private NATS server to pause and wipe: %w; install Debian's nats-server (./scripts/services.sh does) or set --nats-bin / FLAKEID_NATS_BIN", err)
		}
		s, err := natsproc.Start(ctx, natsproc.Options{Bin: bin, Dir: filepath.Join(r.dir, "nats"), SysProcAttr: procAttr()})
		if err != nil {
			return err
		}
		r.coord = &natsServer{s}
	default:
		bin, err := exec.LookPath(r.cfg.EtcdBin)
		if err != nil {
			return fmt.Errorf("the nemesis needs a private etcd server to pause: %w; install etcd-server (./scripts/services.sh does) or set --etcd-bin / FLAKEID_ETCD_BIN", err)
		}
		s, err := etcdproc.Start(ctx, etcdproc.Options{Bin: bin, Dir: r.dir, Name: "flakeid-verify", SysProcAttr: procAttr()})
		if err != nil {
			return err
		}
		r.coord = &etcdServer{s}
	}
	return nil
}

// etcdServer is a private etcd; it has no data-loss fault.
type etcdServer struct{ *etcdproc.Server }

func (e *etcdServer) addr() string  { return e.Addr() }
func (e *etcdServer) pid() int      { return e.Cmd().Process.Pid }
func (e *etcdServer) pause() error  { return stopProcess(e.Cmd().Process) }
func (e *etcdServer) resume() error { return contProcess(e.Cmd().Process) }
func (e *etcdServer) loseData(context.Context) (string, error) {
	return "", errors.New("the etcd group has no data-loss fault")
}

func (e *etcdServer) kill() {
	_ = contProcess(e.Cmd().Process) // a stopped process dies of SIGKILL too, but be sure
	e.Kill()
}

// zkServer is a private ZooKeeper.
type zkServer struct {
	*zkproc.Server
	wipe bool // flipped by each loseData: true, it wiped the server; false, it deleted the prefix
}

func (z *zkServer) addr() string  { return z.Addr() }
func (z *zkServer) pid() int      { return z.Process().Pid }
func (z *zkServer) pause() error  { return z.Pause() }
func (z *zkServer) resume() error { return z.Resume() }
func (z *zkServer) kill()         { z.Kill() }

// loseData alternates (starting by the seed) between two losses. A
// ZooKeeper that lost its disk: kill -9, its data directory deleted,
// started again on its port; every node, session and ephemeral node is
// gone, and its transaction ids (zxid) start again from 0, behind those its
// clients have seen. And the main group's prefix deleted recursively by
// another client while the server and the holders' sessions live on (an
// operator's `deleteall`): the holders' ephemeral claim nodes vanish under
// their live sessions.
func (z *zkServer) loseData(ctx context.Context) (string, error) {
	z.wipe = !z.wipe
	if !z.wipe {
		return z.deletePrefix(ctx)
	}
	old, t0 := z.pid(), time.Now()
	err := z.Restart(ctx, true)
	note := fmt.Sprintf("ZooKeeper (pid %d) killed (-9), its data directory deleted, started again empty on its port", old)
	if err == nil {
		note += fmt.Sprintf(" (pid %d) after %.1fs", z.pid(), time.Since(t0).Seconds())
	}
	return note, err
}

// consulServer is a private Consul dev agent.
type consulServer struct{ *consulproc.Server }

func (c *consulServer) addr() string  { return c.Addr() }
func (c *consulServer) pid() int      { return c.Process().Pid }
func (c *consulServer) pause() error  { return c.Pause() }
func (c *consulServer) resume() error { return c.Resume() }
func (c *consulServer) kill()         { c.Kill() }

// loseData is kill -9 of the dev agent and a start on the same ports: it
// keeps everything in memory, so every key and session is gone, and its
// indexes start again.
func (c *consulServer) loseData(ctx context.Context) (string, error) {
	old, t0 := c.pid(), time.Now()
	err := c.Restart(ctx)
	note := fmt.Sprintf("the Consul dev agent (pid %d) killed (-9), started again empty on its ports", old)
	if err == nil {
		note += fmt.Sprintf(" (pid %d) after %.1fs", c.pid(), time.Since(t0).Seconds())
	}
	return note, err
}

// natsServer is a private NATS server with JetStream.
type natsServer struct{ *natsproc.Server }

func (n *natsServer) addr() string  { return n.Addr() }
func (n *natsServer) pid() int      { return n.Process().Pid }
func (n *natsServer) pause() error  { return n.Pause() }
func (n *natsServer) resume() error { return n.Resume() }
func (n *natsServer) kill()         { n.Kill() }

// loseData is kill -9 of the server, its JetStream store deleted, and a
// start on the same port: the bucket and every key are gone.
func (n *natsServer) loseData(ctx context.Context) (string, error) {
	old, t0 := n.pid(), time.Now()
	err := n.Restart(ctx, true)
	note := fmt.Sprintf("the NATS server (pid %d) killed (-9), its JetStream store deleted, started again empty on its port", old)
	if err == nil {
		note += fmt.Sprintf(" (pid %d) after %.1fs", n.pid(), time.Since(t0).Seconds())
	}
	return note, err
}

// deletePrefix deletes coordPrefix and every node under it (deleteTree).
func (z *zkServer) deletePrefix(ctx context.Context) (string, error) {
	deleted, err := deleteTree(ctx, z.Addr(), coordPrefix)
	return fmt.Sprintf("the path %s deleted recursively (%d nodes) by another client (the server and its sessions live on)", coordPrefix, deleted), err
}

// deleteTree deletes path and every node under it from the ZooKeeper at
// addr, children first, with a client session of its own, and reports how
// many nodes it deleted. A node that a holder creates meanwhile is deleted
// too: a node found with a new child is listed and emptied again at once
// (up to ten times), and the whole walk is repeated (up to five rounds) —
// the holders re-create their nodes while they renew and, once they see
// the state lost, re-initialise it (CI, the holders renewing every second
// under load: a child came between listing and deleting in each of five
// whole walks). Nothing to delete is an error: the fault did nothing.
func deleteTree(ctx context.Context, addr, path string) (int, error) {
	c, events, err := gozk.Connect([]string{addr}, 5*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(nopLogger{}))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == gozk.StateHasSession
		case <-ctx.Done():
			return 0, fmt.Errorf("no session with ZooKeeper at %s: %w", addr, ctx.Err())
		}
	}
	deleted := 0
	var walk func(path string) error
	walk = func(path string) error {
		for try := 1; ; try++ {
			kids, _, err := c.Children(path)
			if errors.Is(err, gozk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("listing %s: %w", path, err)
			}
			for _, k := range kids {
				if err := walk(path + "/" + k); err != nil {
					return err
				}
			}
			switch err := c.Delete(path, -1); {
			case err == nil:
				deleted++
				return nil
			case errors.Is(err, gozk.ErrNoNode):
				return nil
			case errors.Is(err, gozk.ErrNotEmpty) && try < 10 && ctx.Err() == nil:
				// A child created meanwhile: list again.
			default:
				return fmt.Errorf("deleting %s: %w", path, err)
			}
		}
	}
	for round := 0; ; round++ {
		err = walk(path)
		if err == nil || round == 4 || ctx.Err() != nil {
			break
		}
	}
	if err == nil && deleted == 0 {
		err = fmt.Errorf("no node under %s to delete", path)
	}
	return deleted, err
}

// nopLogger silences the ZooKeeper client's log.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
