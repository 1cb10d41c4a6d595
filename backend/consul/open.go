package consul

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
)

// DefaultDialTimeout bounds OpenWorkers's check when its context has no
// deadline.
const DefaultDialTimeout = 5 * time.Second

// DefaultLockDelay is the lock-delay of the coordinator's sessions unless
// WithLockDelay says otherwise (Consul's own default is 15s; see the package
// documentation).
const DefaultLockDelay = time.Second

// maxLockDelay is the longest lock-delay Consul applies (structs.MaxLockDelay).
const maxLockDelay = 60 * time.Second

// An Option configures OpenWorkers and NewWorkers.
type Option func(*Workers)

// WithLockDelay sets the lock-delay of the sessions the coordinator creates
// (default DefaultLockDelay): after Consul invalidates a holder's session, no
// node can take its worker id for this long. Negative means 0; Consul caps it
// at 60s.
func WithLockDelay(d time.Duration) Option {
	return func(w *Workers) { w.lockDelay = max(d, 0) }
}

// OpenWorkers opens the coordinator a URL names:
//
//	consul://host:port[/prefix][?lock_delay=D&token=T]
//
// and consuls:// for HTTPS; the port defaults to Consul's, 8500 (8501 with
// consuls://). The path is the key prefix (DefaultPrefix when empty);
// lock_delay the sessions' lock-delay as a Go duration, 0–60s
// (WithLockDelay), and token the ACL token, which wins over
// CONSUL_HTTP_TOKEN and CONSUL_HTTP_TOKEN_FILE; opts come after the URL's.
// The other CONSUL_HTTP_* variables of consulapi.DefaultConfig (TLS files,
// basic auth) apply. Any other query key, or user information in the URL,
// is an error wrapping worker.ErrInvalidConfig (registry= with the reason:
// the registry is DefaultRegistry, one per Consul cluster), and so is a
// prefix inside it. It checks that the agent answers, within ctx or
// DefaultDialTimeout when ctx has no deadline: an agent that does not is
// reported as worker.ErrUnavailable.
func OpenWorkers(ctx context.Context, u *url.URL, opts ...Option) (*Workers, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{worker.ErrInvalidConfig}, args...)...)
	}
	cfg := consulapi.DefaultConfig()
	switch u.Scheme {
	case "consul":
		cfg.Scheme = "http"
	case "consuls":
		cfg.Scheme = "https"
	default:
		return nil, bad("scheme %q, want consul or consuls", u.Scheme)
	}
	if u.Host == "" {
		return nil, bad("no host:port")
	}
	if u.User != nil {
		return nil, bad("user information is not used; give an ACL token with token= or CONSUL_HTTP_TOKEN")
	}
	cfg.Address = u.Host
	if u.Port() == "" {
		port := "8500"
		if u.Scheme == "consuls" {
			port = "8501"
		}
		cfg.Address = net.JoinHostPort(u.Hostname(), port)
	}
	if err := coord.RefuseRegistry(u, "the keys under "+DefaultRegistry+"/"); err != nil {
		return nil, err
	}
	if err := coord.InsideRegistry(cmp.Or(strings.Trim(u.Path, "/"), DefaultPrefix), DefaultRegistry); err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	var uopts []Option
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if len(q[k]) != 1 {
			return nil, bad("%s given %d times", k, len(q[k]))
		}
		v := q.Get(k)
		switch k {
		case "lock_delay":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > maxLockDelay {
				return nil, bad("lock_delay %q, want a duration of 0s–%v", v, maxLockDelay)
			}
			uopts = append(uopts, WithLockDelay(d))
		case "token":
			cfg.Token, cfg.TokenFile = v, ""
		default:
			return nil, bad("%v", coord.UnknownParam(k, []string{"lock_delay", "token"}))
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	client, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: consul client of %s: %w", worker.ErrInvalidConfig, cfg.Address, err)
	}
	w := NewWorkers(client, u.Path, append(uopts, opts...)...)
	w.transport = cfg.Transport
	if _, _, err := client.KV().Keys(w.prefix+"/", "/", qo(ctx)); err != nil {
		w.Close()
		return nil, coord.Unavailable(ctx, err, "listing %s/ on the Consul agent at %s", w.prefix, cfg.Address)
	}
	return w, nil
}
