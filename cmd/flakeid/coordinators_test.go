package main

import (
	"context"
	"path"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	consulapi "github.com/hashicorp/consul/api"
)

// zkCoordinatorURL is a zk:// coordinator URL for a fresh path on the
// ZooKeeper at addr (a test's own: its registry is the ensemble's one),
// deleted when the test ends.
func zkCoordinatorURL(t *testing.T, addr string) string {
	t.Helper()
	base := "/" + randomName("flakeid-proof-")
	t.Cleanup(func() { zkDeleteTree(t, addr, base) })
	return "zk://" + addr + base + "/workers"
}

// zkDeleteTree deletes root and everything under it.
func zkDeleteTree(t *testing.T, addr, root string) {
	conn, _, err := gozk.Connect([]string{addr}, 5*time.Second, gozk.WithLogger(discardZKLog{}))
	if err != nil {
		t.Logf("deleting %s: %v", root, err)
		return
	}
	defer conn.Close()
	var del func(p string)
	del = func(p string) {
		children, _, err := conn.Children(p)
		if err != nil {
			return
		}
		for _, c := range children {
			del(path.Join(p, c))
		}
		_ = conn.Delete(p, -1)
	}
	del(root)
}

type discardZKLog struct{}

func (discardZKLog) Printf(string, ...any) {}

// consulCoordinatorURL is a consul:// coordinator URL for a fresh key
// prefix on the Consul agent at addr (a test's own: its registry is the
// cluster's one), deleted when the test ends.
func consulCoordinatorURL(t *testing.T, addr string) string {
	t.Helper()
	base := randomName("flakeid-proof-")
	t.Cleanup(func() {
		cfg := consulapi.DefaultConfig()
		cfg.Address = addr
		c, err := consulapi.NewClient(cfg)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.KV().DeleteTree(base+"/", (&consulapi.WriteOptions{}).WithContext(ctx))
	})
	return "consul://" + addr + "/" + base + "/workers"
}
