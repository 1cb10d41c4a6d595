package verify

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/internal/testenv"
)

// TestVerifyDeleteTree: zk-data-loss's "deleteall" deletes a tree whose
// holders keep creating nodes in it while it runs — a child that comes
// between listing a node and deleting it is deleted too — and a path with
// nothing under it is an error, not a fault injected.
func TestVerifyDeleteTree(t *testing.T) {
	addr := testenv.ZooKeeper().Require(t)
	c, _, err := gozk.Connect([]string{addr}, 5*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := fmt.Sprintf("/flakeid-verify-delete-%d", time.Now().UnixNano())
	for _, p := range []string{root, root + "/0", root + "/0/1", root + "/0/2", root + "/0/1/holder", root + "/0/1/high", root + "/0/2/high", root + "/registry"} {
		if _, err := c.Create(p, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
			t.Fatalf("creating %s: %v", p, err)
		}
	}
	// Two "holders" add a node under each slot every few milliseconds
	// while their slot exists, as renewals and re-initialisations do.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	created := make([]int, 2)
	for i, slot := range []string{root + "/0/1", root + "/0/2"} {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(3 * time.Millisecond):
				}
				_, err := c.Create(fmt.Sprintf("%s/renewal-%d", slot, n), nil, 0, gozk.WorldACL(gozk.PermAll))
				if errors.Is(err, gozk.ErrNoNode) {
					return // the slot is gone
				}
				if err == nil {
					created[i]++
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	deleted, err := deleteTree(t.Context(), addr, root)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("deleteTree with holders creating nodes: %v (%d deleted)", err, deleted)
	}
	if ok, _, err := c.Exists(root); err != nil || ok {
		t.Fatalf("%s still exists (%v) after deleteTree", root, err)
	}
	// Every node created lived under the tree, and only deleteTree deleted.
	if want := 8 + created[0] + created[1]; deleted != want {
		t.Errorf("deleted %d nodes; the tree had 8 and the holders created %v", deleted, created)
	}
	if _, err := deleteTree(t.Context(), addr, root); err == nil || !strings.Contains(err.Error(), "no node under "+root) {
		t.Fatalf("deleting a path that is not there: %v, want an error naming it", err)
	}
}
