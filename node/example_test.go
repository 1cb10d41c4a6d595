package node_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/flakeid/flakeid/backend/bolt"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// A single node leasing its worker id from a local file: the node takes
// the worker ids of its layout (here the default, 32 per datacenter) in
// datacenter 3, and records the layout in the file as the datacenter's
// contract.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "flakeid-node-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	coord, err := bolt.OpenWorkers(ctx, &url.URL{Scheme: "file", Path: filepath.Join(dir, "workers.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer coord.Close()
	n, err := node.Start(ctx, node.Config{
		Coordinator: coord,
		Settings:    snowflake.Settings{DatacenterID: 3},
		// Short periods so that the example's first lease issues at once;
		// the zero worker.Config (every default) suits production.
		Lease: worker.Config{RenewEvery: 100 * time.Millisecond, RetryEvery: 50 * time.Millisecond,
			ReserveAhead: 300 * time.Millisecond, MaxClockSkew: 100 * time.Millisecond, Quarantine: 400 * time.Millisecond},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err) // an invalid Config wraps node.ErrInvalidConfig, and nothing was leased
	}
	defer n.Close()
	id, err := n.NextID()
	if err != nil {
		log.Fatal(err)
	}
	p, err := n.Decode(id)
	if err != nil {
		log.Fatal(err)
	}
	st := n.Status()
	fmt.Println("datacenter", p.Datacenter, "leased worker", p.Worker == st.WorkerID, "held", st.Held)
	// Output: datacenter 3 leased worker true held true
}
