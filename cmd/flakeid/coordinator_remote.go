package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/flakeid/flakeid/worker"
)

// openRemote opens a coordinator on a network service.
func openRemote(ctx context.Context, u *url.URL) (worker.Coordinator, func() error, error) {
	return nil, nil, fmt.Errorf("--coordinator %q: unknown scheme %q (want file, etcd, redis, postgres or mysql)", u.Redacted(), u.Scheme)
}
