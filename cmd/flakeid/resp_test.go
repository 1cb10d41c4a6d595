package main

// Black-box tests of the Redis-protocol (RESP) listener of `flakeid serve`
// (docs: issue 14), driven by real clients: go-redis, Debian's redis-cli and
// Debian's Python redis package, and by hand-written hostile input on a raw
// connection.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// respTimeout bounds every wait of these tests: generous, since the package's
// tests run in parallel on a small machine.
const respTimeout = 20 * time.Second

// startRESP runs `flakeid serve` with HTTP and RESP listeners on free ports
// and returns the HTTP base URL and the RESP address it logged.
func startRESP(t *testing.T, bin string, args ...string) (p *proc, httpURL, respAddr string) {
	t.Helper()
	return startRESPOn(t, bin, "127.0.0.1:0", args...)
}

// startRESPOn is startRESP with the RESP listener on listen.
func startRESPOn(t *testing.T, bin, listen string, args ...string) (p *proc, httpURL, respAddr string) {
	t.Helper()
	p, httpURL = startServe(t, bin, append([]string{"--resp-listen", listen}, args...)...)
	re := regexp.MustCompile(`msg="flakeid: serving RESP" addr=(\S+)`)
	waitFor(t, "the RESP listener", respTimeout, func() bool {
		_, stderr := p.snapshot()
		select {
		case <-p.done:
			t.Fatalf("serve exited before listening for RESP:\n%s", stderr)
		default:
		}
		if m := re.FindStringSubmatch(stderr); m != nil {
			respAddr = m[1]
			return true
		}
		return false
	})
	return p, httpURL, respAddr
}

// respClient is a go-redis client of addr with the tests' timeouts; change
// edits the options first (nil: the defaults).
func respClient(t *testing.T, addr string, change func(*redis.Options)) *redis.Client {
	t.Helper()
	// go-redis's default maintenance-notification handshake ("auto")
	// writes the shared options when a server refuses it, racing between
	// connections that open at once (the race detector sees it): off.
	o := &redis.Options{Addr: addr, DialTimeout: respTimeout, ReadTimeout: respTimeout, WriteTimeout: respTimeout,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}}
	if change != nil {
		change(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// respCtx is a context that ends with the test or after respTimeout.
func respCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), respTimeout)
	t.Cleanup(cancel)
	return ctx
}

// respWriteTokens writes a --tokens-file and returns its path.
func respWriteTokens(t *testing.T, tokens []map[string]any) string {
	t.Helper()
	b, err := json.Marshal(tokens)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The tokens of the authentication tests.
const (
	respTokAll    = "all-scopes-token-0123456789"     // every tag, Snowflake IDs, admin
	respTokOrders = "orders-only-token-0123456789"    // tag orders only
	respTokOther  = "other-tag-only-token-0123456789" // tag other only, no Snowflake IDs
)

// respTokens writes a --tokens-file of the three tokens above.
func respTokens(t *testing.T) string {
	return respWriteTokens(t, []map[string]any{
		{"name": "all", "token": respTokAll, "tags": []string{"*"}, "snowflake": true, "admin": true},
		{"name": "orders-only", "token": respTokOrders, "tags": []string{"orders"}},
		{"name": "other-only", "token": respTokOther, "tags": []string{"other"}},
	})
}

// respGetAuth is get with a bearer token.
func respGetAuth(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// respHTTPNext takes the next ID of tag over HTTP.
func respHTTPNext(t *testing.T, url, tag, token string) int64 {
	t.Helper()
	code, body := respGetAuth(t, url+"/v1/segment/"+tag+"/next", token)
	var r struct{ IDs []string }
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.IDs) != 1 {
		t.Fatalf("GET /v1/segment/%s/next: %d %s", tag, code, body)
	}
	v, err := strconv.ParseInt(r.IDs[0], 10, 64)
	if err != nil {
		t.Fatalf("GET /v1/segment/%s/next: ID %q: %v", tag, r.IDs[0], err)
	}
	return v
}

// respIncreasing fails the test unless ids increase strictly.
func respIncreasing(t *testing.T, what string, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("%s: IDs not increasing: %d after %d (all: %v)", what, ids[i], ids[i-1], ids)
		}
	}
}

// respInt64s converts an array reply of integers.
func respInt64s(t *testing.T, what string, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: reply %#v is not an array", what, v)
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("%s: element %d is %#v, not an integer", what, i, e)
		}
		out[i] = n
	}
	return out
}

// respDecodeFields turns an ID.DECODE reply, a RESP2 flat array of field/value
// pairs or a RESP3 map, into field → value as text.
func respDecodeFields(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch r := v.(type) {
	case []any:
		if len(r)%2 != 0 {
			t.Fatalf("ID.DECODE: odd flat array %#v", r)
		}
		for i := 0; i < len(r); i += 2 {
			k, ok := r[i].(string)
			if !ok {
				t.Fatalf("ID.DECODE: field name %#v is not a string", r[i])
			}
			out[k] = fmt.Sprint(r[i+1])
		}
	case map[any]any:
		for k, v := range r {
			ks, ok := k.(string)
			if !ok {
				t.Fatalf("ID.DECODE: map key %#v is not a string", k)
			}
			out[ks] = fmt.Sprint(v)
		}
	default:
		t.Fatalf("ID.DECODE: reply %#v (%T) is neither an array nor a map", v, v)
	}
	return out
}

// respMustErr fails the test unless err is a Redis error reply that
// starts with prefix and contains every one of want.
func respMustErr(t *testing.T, what string, err error, prefix string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s…", what, prefix)
	}
	var re redis.Error
	if !errors.As(err, &re) {
		t.Fatalf("%s: %v is not an error reply (want %s…)", what, err, prefix)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		t.Fatalf("%s: error %q does not start with %q", what, msg, prefix)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("%s: error %q does not mention %q", what, msg, w)
		}
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("%s: error %q holds CR or LF", what, msg)
	}
}

// TestRESPGoRedis proves that go-redis, with its default options (HELLO 3,
// CLIENT SETINFO), gets IDs over RESP: INCR of an auto-created tag and of
// snowflake, ID.NEXT arrays, ID.DECODE answering what the HTTP decoder and
// /v1/status say (both as a RESP3 map and as a RESP2 flat array), a
// pipeline whose replies come back in request order, 8 concurrent
// connections whose IDs are all unique and increasing per connection, and
// command errors that keep the connection usable.
func TestRESPGoRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	_, url, addr := startRESP(t, bin, "--auto-create-tags", "--datacenter", "3")
	ctx := respCtx(t)
	c := respClient(t, addr, func(o *redis.Options) { o.MaxRetries = -1 }) // a retry would hide a dropped connection

	t.Run("INCR", func(t *testing.T) {
		a, err := c.Incr(ctx, "orders").Result()
		if err != nil {
			t.Fatalf("INCR orders: %v", err)
		}
		b, err := c.Incr(ctx, "orders").Result()
		if err != nil || b <= a || a < 1 {
			t.Fatalf("INCR orders twice: %d then %d, %v", a, b, err)
		}
		s1, err := c.Incr(ctx, "snowflake").Result()
		if err != nil {
			t.Fatalf("INCR snowflake: %v", err)
		}
		s2, err := c.Incr(ctx, "SNOWFLAKE:users").Result() // snowflake:<anything>, any case
		if err != nil || s2 <= s1 || s1 < 1<<32 {
			t.Fatalf("INCR snowflake, SNOWFLAKE:users: %d then %d, %v", s1, s2, err)
		}
	})

	t.Run("ID.NEXT", func(t *testing.T) {
		v, err := c.Do(ctx, "ID.NEXT", "orders", 5).Result()
		if err != nil {
			t.Fatalf("ID.NEXT orders 5: %v", err)
		}
		ids := respInt64s(t, "ID.NEXT orders 5", v)
		if len(ids) != 5 {
			t.Fatalf("ID.NEXT orders 5: %d IDs: %v", len(ids), ids)
		}
		respIncreasing(t, "ID.NEXT orders 5", ids)
		v, err = c.Do(ctx, "id.next", "orders").Result() // default count 1, name in lower case
		if one := respInt64s(t, "id.next orders", v); err != nil || len(one) != 1 || one[0] <= ids[4] {
			t.Fatalf("id.next orders: %v %v after %v", v, err, ids)
		}
		v, err = c.Do(ctx, "ID.NEXT", "snowflake", 3).Result()
		if err != nil {
			t.Fatalf("ID.NEXT snowflake 3: %v", err)
		}
		sf := respInt64s(t, "ID.NEXT snowflake 3", v)
		if len(sf) != 3 {
			t.Fatalf("ID.NEXT snowflake 3: %v", sf)
		}
		respIncreasing(t, "ID.NEXT snowflake 3", sf)
	})

	t.Run("ID.DECODE", func(t *testing.T) {
		id, err := c.Incr(ctx, "snowflake").Result()
		if err != nil {
			t.Fatal(err)
		}
		code, body := get(t, fmt.Sprintf("%s/v1/decode/%d", url, id))
		var want struct {
			ID                                 string
			Time                               string
			UnixMs                             int64 `json:"unix_ms"`
			Tick, Datacenter, Worker, Sequence int64
		}
		if code != 200 || json.Unmarshal([]byte(body), &want) != nil {
			t.Fatalf("GET /v1/decode/%d: %d %s", id, code, body)
		}
		code, body = get(t, url+"/v1/status")
		var st struct {
			DatacenterID int64 `json:"datacenter_id"`
			WorkerID     int64 `json:"worker_id"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /v1/status: %d %s", code, body)
		}
		if st.DatacenterID != 3 || want.Datacenter != 3 || want.Worker != st.WorkerID {
			t.Fatalf("HTTP decode %+v vs status %+v: want datacenter 3 and the status's worker", want, st)
		}
		wantFields := map[string]string{
			"id": want.ID, "time": want.Time, "unix_ms": fmt.Sprint(want.UnixMs), "tick": fmt.Sprint(want.Tick),
			"datacenter": fmt.Sprint(want.Datacenter), "worker": fmt.Sprint(want.Worker), "sequence": fmt.Sprint(want.Sequence),
		}
		for _, proto := range []int{3, 2} {
			cp := respClient(t, addr, func(o *redis.Options) { o.Protocol = proto; o.MaxRetries = -1 })
			v, err := cp.Do(ctx, "ID.DECODE", strconv.FormatInt(id, 10)).Result()
			if err != nil {
				t.Fatalf("RESP%d ID.DECODE %d: %v", proto, id, err)
			}
			if proto == 3 {
				if _, ok := v.(map[any]any); !ok {
					t.Errorf("RESP3 ID.DECODE: %T, want a map", v)
				}
			} else if _, ok := v.([]any); !ok {
				t.Errorf("RESP2 ID.DECODE: %T, want a flat array", v)
			}
			got := respDecodeFields(t, v)
			for k, w := range wantFields {
				if got[k] != w {
					t.Errorf("RESP%d ID.DECODE %d: %s = %q, want %q (HTTP decode); all: %v", proto, id, k, got[k], w, got)
				}
			}
			if _, ok := got["masked"]; ok {
				t.Errorf("RESP%d ID.DECODE of a plain ID has a masked field: %v", proto, got)
			}
		}
	})

	t.Run("pipeline", func(t *testing.T) {
		pipe := c.Pipeline()
		cmds := make([]*redis.IntCmd, 100)
		for i := range cmds {
			key := "orders"
			if i%3 == 1 {
				key = "snowflake"
			}
			cmds[i] = pipe.Incr(ctx, key)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		var orders, flakes []int64
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil {
				t.Fatalf("pipeline reply %d: %v", i, err)
			}
			// Segment IDs of a fresh tag are small, Snowflake IDs huge: a
			// reply out of order lands on the wrong side.
			if i%3 == 1 {
				if v < 1<<32 {
					t.Fatalf("pipeline reply %d (INCR snowflake) = %d: a segment ID, replies out of order", i, v)
				}
				flakes = append(flakes, v)
			} else {
				if v >= 1<<32 {
					t.Fatalf("pipeline reply %d (INCR orders) = %d: a Snowflake ID, replies out of order", i, v)
				}
				orders = append(orders, v)
			}
		}
		respIncreasing(t, "pipelined INCR orders", orders)
		respIncreasing(t, "pipelined INCR snowflake", flakes)
	})

	t.Run("8 connections", func(t *testing.T) {
		pc := respClient(t, addr, func(o *redis.Options) { o.PoolSize = 8; o.MaxRetries = -1 })
		const n = 200
		type result struct {
			clientID       int64
			orders, flakes []int64
			err            error
		}
		results := make([]result, 8)
		var ready, wg sync.WaitGroup
		ready.Add(8)
		start := make(chan struct{})
		for g := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &results[g]
				cn := pc.Conn() // one connection of the pool, held to the end
				defer cn.Close()
				r.clientID, r.err = cn.ClientID(ctx).Result()
				ready.Done()
				if r.err != nil {
					return
				}
				<-start
				for i := range n {
					key := "orders"
					if i%2 == 1 {
						key = "snowflake"
					}
					v, err := cn.Incr(ctx, key).Result()
					if err != nil {
						r.err = fmt.Errorf("INCR %s: %w", key, err)
						return
					}
					if key == "orders" {
						r.orders = append(r.orders, v)
					} else {
						r.flakes = append(r.flakes, v)
					}
				}
			}()
		}
		// All 8 connections are open at once; INFO goes on c's own connection,
		// since the pool's 8 are taken.
		ready.Wait()
		info, err := c.Info(ctx, "clients").Result()
		close(start)
		wg.Wait()
		if err != nil {
			t.Fatalf("INFO clients: %v", err)
		}
		if m := regexp.MustCompile(`connected_clients:(\d+)`).FindStringSubmatch(info); m == nil {
			t.Errorf("INFO clients has no connected_clients:\n%s", info)
		} else if k, _ := strconv.Atoi(m[1]); k < 9 {
			t.Errorf("INFO clients: connected_clients:%d with 9 connections open", k)
		}
		clientIDs := map[int64]bool{}
		seen := map[string]map[int64]bool{"orders": {}, "snowflake": {}}
		for g, r := range results {
			if r.err != nil {
				t.Fatalf("connection %d: %v", g, r.err)
			}
			clientIDs[r.clientID] = true
			respIncreasing(t, fmt.Sprintf("connection %d, orders", g), r.orders)
			respIncreasing(t, fmt.Sprintf("connection %d, snowflake", g), r.flakes)
			for key, ids := range map[string][]int64{"orders": r.orders, "snowflake": r.flakes} {
				for _, id := range ids {
					if seen[key][id] {
						t.Fatalf("%s ID %d handed out twice", key, id)
					}
					seen[key][id] = true
				}
			}
		}
		if len(clientIDs) != 8 {
			t.Errorf("CLIENT ID of the 8 connections: %v, want 8 different ids", clientIDs)
		}
		if len(seen["orders"]) != 8*n/2 || len(seen["snowflake"]) != 8*n/2 {
			t.Errorf("got %d orders and %d Snowflake IDs, want %d each", len(seen["orders"]), len(seen["snowflake"]), 8*n/2)
		}
	})

	t.Run("command errors keep the connection", func(t *testing.T) {
		before := respHTTPNext(t, url, "orders", "")
		_, err := c.Do(ctx, "ID.NEXT", "orders", "x").Result()
		respMustErr(t, "ID.NEXT orders x", err, "ERR", `count "x" is not a whole number: want 1 to 100000`)
		_, err = c.Do(ctx, "ID.NEXT", "orders", "100001").Result()
		respMustErr(t, "ID.NEXT orders 100001", err, "ERR", "out of range")
		err = c.IncrBy(ctx, "orders", 5).Err()
		respMustErr(t, "INCRBY orders 5", err, "ERR", "ID.NEXT")
		err = c.Decr(ctx, "orders").Err()
		respMustErr(t, "DECR orders", err, "ERR", "ID.NEXT")
		_, err = c.Do(ctx, "NOSUCH", "a", "b").Result()
		respMustErr(t, "NOSUCH a b", err, "ERR", "unknown command 'NOSUCH', with args beginning with: 'a' 'b'")
		err = c.Incr(ctx, "bad/tag").Err()
		respMustErr(t, "INCR bad/tag", err, "ERR")
		if after := respHTTPNext(t, url, "orders", ""); after != before+1 {
			t.Errorf("the refused commands took IDs: HTTP next %d, then %d after them", before, after)
		}
		if v, err := c.Ping(ctx).Result(); err != nil || v != "PONG" {
			t.Fatalf("PING after the errors: %q %v", v, err)
		}
		if v, err := c.Echo(ctx, "hi there").Result(); err != nil || v != "hi there" {
			t.Fatalf("ECHO: %q %v", v, err)
		}
	})
}

// TestRESPGoRedisAuth proves that --tokens-file guards the RESP listener as
// it guards HTTP: go-redis with Options.Password = a token (HELLO … AUTH
// default token) gets IDs, and so does Username = the token's name; a wrong
// password or user fails with WRONGPASS, no password with NOAUTH, and a
// token without the tag (or without Snowflake IDs) with NOPERM, taking no
// ID.
func TestRESPGoRedisAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	_, url, addr := startRESP(t, bin, "--auto-create-tags", "--tokens-file", respTokens(t))
	ctx := respCtx(t)
	noRetry := func(user, pass string) func(*redis.Options) {
		return func(o *redis.Options) { o.Username, o.Password, o.MaxRetries = user, pass, -1 }
	}

	c := respClient(t, addr, noRetry("", respTokOrders))
	a, err := c.Incr(ctx, "orders").Result()
	if err != nil {
		t.Fatalf("INCR orders with the orders token: %v", err)
	}
	if b, err := c.Incr(ctx, "orders").Result(); err != nil || b <= a {
		t.Fatalf("INCR orders again: %d after %d, %v", b, a, err)
	}
	named := respClient(t, addr, noRetry("orders-only", respTokOrders))
	if _, err := named.Incr(ctx, "orders").Result(); err != nil {
		t.Fatalf("INCR orders as user orders-only: %v", err)
	}
	all := respClient(t, addr, noRetry("", respTokAll))
	if _, err := all.Incr(ctx, "snowflake").Result(); err != nil {
		t.Fatalf("INCR snowflake with the all-scopes token: %v", err)
	}

	err = respClient(t, addr, noRetry("", respTokOrders+"x")).Incr(ctx, "orders").Err()
	respMustErr(t, "a wrong password", err, "WRONGPASS", "invalid username-password pair")
	err = respClient(t, addr, noRetry("all", respTokOrders)).Incr(ctx, "orders").Err()
	respMustErr(t, "user all with the orders token", err, "WRONGPASS")
	err = respClient(t, addr, noRetry("", "")).Incr(ctx, "orders").Err()
	respMustErr(t, "no password", err, "NOAUTH", "Authentication required")

	before := respHTTPNext(t, url, "orders", respTokAll)
	other := respClient(t, addr, noRetry("", respTokOther))
	err = other.Incr(ctx, "orders").Err()
	respMustErr(t, "INCR orders with the other-only token", err, "NOPERM", `token "other-only" may not use tag "orders"`)
	_, err = other.Do(ctx, "ID.NEXT", "orders", 10).Result()
	respMustErr(t, "ID.NEXT orders 10 with the other-only token", err, "NOPERM", `"orders"`)
	if after := respHTTPNext(t, url, "orders", respTokAll); after != before+1 {
		t.Errorf("NOPERM took IDs: HTTP next %d before, %d after (want %d)", before, after, before+1)
	}
	err = other.Incr(ctx, "snowflake").Err()
	respMustErr(t, "INCR snowflake with the other-only token", err, "NOPERM")
	if _, err := other.Incr(ctx, "other").Result(); err != nil {
		t.Fatalf("INCR other with the other-only token: %v", err)
	}
}

// TestRESPRestart proves that a go-redis client outlives a restart of
// serve on the same data directory and RESP port: after the restart it
// gets IDs again, each greater than every ID it got before.
func TestRESPRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().String()
	ln.Close()
	data := t.TempDir()
	args := []string{"--data-dir", data, "--auto-create-tags"}
	p, _, addr := startRESPOn(t, bin, port, args...)
	if addr != port {
		t.Fatalf("serve logged RESP address %s, want %s", addr, port)
	}
	ctx := respCtx(t)
	c := respClient(t, addr, func(o *redis.Options) { o.PoolSize = 4 }) // the defaults: a reconnect is go-redis's own business
	var maxOrders, maxFlake int64
	for range 20 {
		o, err := c.Incr(ctx, "orders").Result()
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Incr(ctx, "snowflake").Result()
		if err != nil {
			t.Fatal(err)
		}
		maxOrders, maxFlake = max(maxOrders, o), max(maxFlake, s)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(respTimeout):
		t.Fatal("serve did not stop after SIGTERM")
	}
	startRESPOn(t, bin, port, args...)
	for i := range 20 {
		o, err := c.Incr(ctx, "orders").Result()
		if err != nil {
			t.Fatalf("INCR orders %d after the restart: %v", i, err)
		}
		s, err := c.Incr(ctx, "snowflake").Result()
		if err != nil {
			t.Fatalf("INCR snowflake %d after the restart: %v", i, err)
		}
		if o <= maxOrders || s <= maxFlake {
			t.Fatalf("after the restart: orders %d (before: up to %d), snowflake %d (before: up to %d)", o, maxOrders, s, maxFlake)
		}
		maxOrders, maxFlake = o, s
	}
	v, err := c.Do(ctx, "ID.NEXT", "orders", 3).Result()
	if ids := respInt64s(t, "ID.NEXT orders 3", v); err != nil || len(ids) != 3 || ids[0] <= maxOrders {
		t.Fatalf("ID.NEXT orders 3 after the restart: %v %v (before: up to %d)", v, err, maxOrders)
	}
}

// TestRESPMasked proves that a masked tag is refused by INCR (an error
// that names ID.NEXT, taking nothing) and handed out by ID.NEXT as masked
// texts, which ID.DECODE reads back to the plain IDs 1, 2, 3.
func TestRESPMasked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	_, _, addr := startRESP(t, bin, "--auto-create-tags", "--mask-tags", "orders", "--mask-key", maskTestKey, "--mask-key-id", "2")
	ctx := respCtx(t)
	c := respClient(t, addr, func(o *redis.Options) { o.MaxRetries = -1 })

	err := c.Incr(ctx, "orders").Err()
	respMustErr(t, "INCR orders (masked)", err, "ERR", "masked", "ID.NEXT orders")
	v, err := c.Do(ctx, "ID.NEXT", "orders", 3).Result()
	if err != nil {
		t.Fatalf("ID.NEXT orders 3: %v", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("ID.NEXT orders 3: %#v, want an array of 3", v)
	}
	for i, e := range arr {
		text, ok := e.(string)
		if !ok || text == "" {
			t.Fatalf("ID.NEXT orders 3: element %d is %#v, want a masked text", i, e)
		}
		dv, err := c.Do(ctx, "ID.DECODE", text).Result()
		if err != nil {
			t.Fatalf("ID.DECODE %s: %v", text, err)
		}
		f := respDecodeFields(t, dv)
		// The refused INCR took nothing: the tag's first IDs are 1, 2, 3.
		if f["id"] != strconv.Itoa(i+1) || f["masked"] != text || f["key_id"] != "2" {
			t.Errorf("ID.DECODE %s = %v, want id %d, masked %s, key_id 2", text, f, i+1, text)
		}
	}
	if n, err := c.Incr(ctx, "plain").Result(); err != nil || n != 1 {
		t.Errorf("INCR plain (not masked): %d %v, want 1", n, err)
	}
}

// respCert writes a self-signed certificate for 127.0.0.1 and its key to a
// temporary directory.
func respCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flakeid RESP test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestRESPTLS proves that with --tls-cert/--tls-key the RESP listener
// speaks TLS with the same certificate: go-redis with a rediss:// URL gets
// IDs (and so does redis-cli --tls, where installed), while a plain-text
// client gets none.
func TestRESPTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	cert, key, pool := respCert(t)
	_, _, addr := startRESP(t, bin, "--auto-create-tags", "--tls-cert", cert, "--tls-key", key)
	ctx := respCtx(t)
	o, err := redis.ParseURL("rediss://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	o.TLSConfig.RootCAs = pool
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = respTimeout, respTimeout, respTimeout, -1
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	c := redis.NewClient(o)
	defer c.Close()
	a, err := c.Incr(ctx, "orders").Result()
	if err != nil {
		t.Fatalf("INCR orders over TLS: %v", err)
	}
	if b, err := c.Incr(ctx, "snowflake").Result(); err != nil || b < 1<<32 {
		t.Fatalf("INCR snowflake over TLS: %d %v", b, err)
	}
	plain := respClient(t, addr, func(o *redis.Options) { o.MaxRetries, o.DialTimeout, o.ReadTimeout = -1, 5*time.Second, 5*time.Second })
	if v, err := plain.Incr(ctx, "orders").Result(); err == nil {
		t.Fatalf("INCR orders in plain text on the TLS listener: %d", v)
	}
	if _, err := os.Stat("/usr/bin/redis-cli"); err == nil {
		host, port, _ := net.SplitHostPort(addr)
		cctx, cancel := context.WithTimeout(t.Context(), respTimeout)
		defer cancel()
		out, err := exec.CommandContext(cctx, "/usr/bin/redis-cli", "--tls", "--cacert", cert, "-h", host, "-p", port, "INCR", "orders").CombinedOutput()
		if b, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err != nil || perr != nil || b <= a {
			t.Fatalf("redis-cli --tls INCR orders: %v %q (after %d)", err, out, a)
		}
	}
}

// needRESPClient skips the test, or fails it under CI=true, when path (a
// client program of these tests) does not run.
func needRESPClient(t *testing.T, path, pkg string, check ...string) {
	t.Helper()
	out, err := exec.Command(path, check...).CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s %s: %v %s; install it: apt-get install %s (./scripts/services.sh does)",
		path, strings.Join(check, " "), err, strings.TrimSpace(string(out)), pkg)
	if testenv.CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestRESPRedisCLI proves that Debian's redis-cli works against the
// listener: commands as arguments and piped on stdin, PING, COMMAND COUNT,
// INFO server, an unknown command's error, and -a TOKEN against a server
// with --tokens-file.
func TestRESPRedisCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const cli = "/usr/bin/redis-cli"
	needRESPClient(t, cli, "redis-tools", "--version")
	t.Parallel()
	bin := proofBin.get(t)
	_, _, addr := startRESP(t, bin, "--auto-create-tags")
	_, _, authAddr := startRESP(t, bin, "--auto-create-tags", "--tokens-file", respTokens(t))

	run := func(t *testing.T, addr, stdin string, args ...string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		ctx, cancel := context.WithTimeout(t.Context(), respTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, args...)...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	integer := regexp.MustCompile(`^\d+\n$`)

	t.Run("INCR", func(t *testing.T) {
		out := run(t, addr, "", "INCR", "orders")
		if !integer.MatchString(out) {
			t.Fatalf("redis-cli INCR orders printed %q, want an integer", out)
		}
		out = run(t, addr, "", "INCR", "snowflake")
		if !integer.MatchString(out) {
			t.Fatalf("redis-cli INCR snowflake printed %q, want an integer", out)
		}
	})
	t.Run("PING", func(t *testing.T) {
		if out := run(t, addr, "", "PING"); out != "PONG\n" {
			t.Fatalf("redis-cli PING printed %q", out)
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		out := run(t, addr, "", "FOO", "bar")
		if !strings.Contains(out, "ERR unknown command 'FOO', with args beginning with: 'bar'") {
			t.Fatalf("redis-cli FOO bar printed %q", out)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		out := run(t, addr, "INCR orders\nINCR orders\n")
		f := strings.Fields(out)
		if len(f) != 2 || !integer.MatchString(f[0]+"\n") || !integer.MatchString(f[1]+"\n") {
			t.Fatalf("redis-cli with two INCRs on stdin printed %q, want two integers", out)
		}
		a, _ := strconv.ParseInt(f[0], 10, 64)
		b, _ := strconv.ParseInt(f[1], 10, 64)
		if b <= a {
			t.Fatalf("redis-cli with two INCRs on stdin: %d then %d", a, b)
		}
	})
	t.Run("COMMAND COUNT", func(t *testing.T) {
		if out := run(t, addr, "", "COMMAND", "COUNT"); !integer.MatchString(out) {
			t.Fatalf("redis-cli COMMAND COUNT printed %q", out)
		}
	})
	t.Run("INFO server", func(t *testing.T) {
		out := run(t, addr, "", "INFO", "server")
		if !strings.Contains(out, "redis_version:") || !strings.Contains(out, "# Server") {
			t.Fatalf("redis-cli INFO server printed %q", out)
		}
	})
	t.Run("-a TOKEN", func(t *testing.T) {
		out := run(t, authAddr, "", "--no-auth-warning", "-a", respTokOrders, "INCR", "orders")
		if !integer.MatchString(out) {
			t.Fatalf("redis-cli -a TOKEN INCR orders printed %q, want an integer", out)
		}
		out = run(t, authAddr, "", "INCR", "orders")
		if !strings.Contains(out, "NOAUTH Authentication required") {
			t.Fatalf("redis-cli INCR orders without a token printed %q", out)
		}
	})
}

// TestRESPPython proves that Debian's Python redis package (redis-py, run by
// /usr/bin/python3) works against the listener with a token: r.incr twice,
// a non-transactional pipeline of 50 r.incr (and of 50 INCR sent through
// execute_command), ID.NEXT through execute_command, PING, and an error for
// a wrong password. Each step runs even when one before it failed, so the
// test reports every one that does not work.
func TestRESPPython(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const py = "/usr/bin/python3"
	needRESPClient(t, py, "python3-redis", "-c", "import redis")
	t.Parallel()
	bin := proofBin.get(t)
	_, _, addr := startRESP(t, bin, "--auto-create-tags", "--tokens-file", respTokens(t))
	host, port, _ := net.SplitHostPort(addr)
	// Each step prints one JSON line: {"step": name, "value": …} or
	// {"step": name, "error": "Class: message"}.
	const script = `
import json, sys, redis
host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = redis.Redis(host=host, port=port, password=token, socket_timeout=20, socket_connect_timeout=20)
def step(name, f):
    try:
        print(json.dumps({"step": name, "value": f()}), flush=True)
    except Exception as e:
        print(json.dumps({"step": name, "error": type(e).__name__ + ": " + str(e)}), flush=True)
def pipeline(incr):
    p = r.pipeline(transaction=False)
    for _ in range(50):
        incr(p)
    return p.execute()
step("incr", lambda: r.incr("orders"))
step("incr", lambda: r.incr("orders"))
step("pipeline of r.incr", lambda: pipeline(lambda p: p.incr("orders")))
step("pipeline of INCR", lambda: pipeline(lambda p: p.execute_command("INCR", "orders")))
step("ID.NEXT", lambda: r.execute_command("ID.NEXT", "orders", 3))
step("ping", lambda: r.ping())
step("wrong password", lambda: redis.Redis(host=host, port=port, password="wrong-" + token, socket_timeout=20).ping())
def multi():
    p = r.pipeline()  # transactional by default: MULTI … EXEC
    p.execute_command("INCR", "orders")
    return p.execute()
step("MULTI", multi)
`
	ctx, cancel := context.WithTimeout(t.Context(), 2*respTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", script, host, port, respTokOrders)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s\n%s", err, out, stderr.String())
	}
	type stepResult struct {
		Step  string
		Value json.RawMessage
		Error string
	}
	var steps []stepResult
	for _, l := range lines(string(out)) {
		var s stepResult
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("python3 printed %q: %v", l, err)
		}
		steps = append(steps, s)
	}
	if len(steps) != 8 {
		t.Fatalf("python3 printed %d steps, want 8:\n%s", len(steps), out)
	}
	var ids []int64 // every orders ID, in the order the steps took them
	for _, s := range steps[:6] {
		if s.Error != "" {
			t.Errorf("python: %s: %s", s.Step, s.Error)
			continue
		}
		switch s.Step {
		case "ping":
			if string(s.Value) != "true" {
				t.Errorf("python: r.ping() = %s", s.Value)
			}
		case "incr":
			var v int64
			if err := json.Unmarshal(s.Value, &v); err != nil {
				t.Errorf("python: r.incr = %s", s.Value)
			}
			ids = append(ids, v)
		default:
			var v []int64
			if err := json.Unmarshal(s.Value, &v); err != nil {
				t.Errorf("python: %s = %s, want integers", s.Step, s.Value)
			}
			if want := map[bool]int{true: 3, false: 50}[s.Step == "ID.NEXT"]; len(v) != want {
				t.Errorf("python: %s gave %d IDs, want %d", s.Step, len(v), want)
			}
			ids = append(ids, v...)
		}
	}
	respIncreasing(t, "python: the orders IDs of every step", ids)
	// redis-py maps WRONGPASS to AuthenticationError only in newer
	// releases; Debian's 4.3 raises a ResponseError (as it does with Redis).
	if w := steps[6].Error; !strings.HasPrefix(w, "AuthenticationError: ") && !strings.HasPrefix(w, "ResponseError: WRONGPASS") {
		t.Errorf("python: a wrong password gave %q (value %s), want AuthenticationError or WRONGPASS", w, steps[6].Value)
	}
	t.Logf("python: a wrong password: %s", steps[6].Error)
	t.Logf("python: r.pipeline() (MULTI/EXEC): %s%s", steps[7].Error, steps[7].Value)
}

// respRaw is a raw connection to the listener.
type respRaw struct {
	net.Conn
	r *bufio.Reader
}

// respDial opens a raw connection to addr, with a deadline of respTimeout.
func respDial(t *testing.T, addr string) *respRaw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, respTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(respTimeout))
	return &respRaw{c, bufio.NewReader(c)}
}

// respCmd is a command as clients send it: an array of bulk strings.
func respCmd(args ...string) string {
	s := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		s += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	return s
}

// send writes s and reads one reply line.
func (c *respRaw) send(t *testing.T, s string) string {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatalf("after %q: reading the reply: %v (read %q)", s, err, line)
	}
	return line
}

// mustClose fails the test unless the server closes the connection with
// nothing more to read.
func (c *respRaw) mustClose(t *testing.T, what string) {
	t.Helper()
	rest, err := io.ReadAll(c.r)
	if err != nil {
		t.Fatalf("%s: the connection is not closed: %v (read %q)", what, err, rest)
	}
	if len(rest) != 0 {
		t.Fatalf("%s: %q after the error", what, rest)
	}
}

// respMetric is the value of the sample named name (labels included) on the
// HTTP /metrics page, or -1.
func respMetric(t *testing.T, url, name string) float64 {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, l)
			}
			return f
		}
	}
	return -1
}

// TestRESPHostileInput proves that the listener's limits hold against a
// raw connection: a bulk of 512 MB or a million arguments is answered
// -ERR Protocol error and the connection closed (the server allocating
// nothing of the sort and still serving), an unknown command keeps the
// connection, and with --resp-max-conns 2 a third connection is refused
// with -ERR max number of clients reached until one of the two closes.
func TestRESPHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	_, url, addr := startRESP(t, bin, "--auto-create-tags")

	for _, in := range []string{"*2\r\n$536870912\r\n", "*1000000\r\n"} {
		c := respDial(t, addr)
		if got := c.send(t, in); !strings.HasPrefix(got, "-ERR Protocol error") {
			t.Fatalf("%q: reply %q, want -ERR Protocol error…", in, got)
		}
		c.mustClose(t, fmt.Sprintf("%q", in))
	}
	waitFor(t, "flakeid_resp_protocol_errors_total to count the two framing errors", respTimeout, func() bool {
		return respMetric(t, url, "flakeid_resp_protocol_errors_total") >= 2
	})

	c := respDial(t, addr)
	if got := c.send(t, respCmd("FOO", "bar")); !strings.HasPrefix(got, "-ERR unknown command 'FOO', with args beginning with: 'bar'") {
		t.Fatalf("FOO bar: reply %q", got)
	}
	if got := c.send(t, respCmd("PING")); got != "+PONG\r\n" {
		t.Fatalf("PING after an unknown command: %q", got)
	}
	if got := c.send(t, respCmd("INCR", "orders")); !regexp.MustCompile(`^:\d+\r\n$`).MatchString(got) {
		t.Fatalf("INCR orders: %q", got)
	}
	if got := c.send(t, respCmd("AUTH", "some-token-1234567890")); !strings.HasPrefix(got, "-ERR AUTH <password> called without any password configured") {
		t.Fatalf("AUTH without tokens configured: %q", got)
	}
	if got := c.send(t, respCmd("HELLO", "4")); !strings.HasPrefix(got, "-NOPROTO") {
		t.Fatalf("HELLO 4: %q", got)
	}
	if got := c.send(t, respCmd("SELECT", "1")); !strings.HasPrefix(got, "-ERR DB index is out of range") {
		t.Fatalf("SELECT 1: %q", got)
	}
	if got := c.send(t, respCmd("QUIT")); got != "+OK\r\n" {
		t.Fatalf("QUIT: %q", got)
	}
	c.mustClose(t, "QUIT")

	t.Run("max conns", func(t *testing.T) {
		_, url, addr := startRESP(t, bin, "--resp-max-conns", "2")
		c1, c2 := respDial(t, addr), respDial(t, addr)
		for _, c := range []*respRaw{c1, c2} {
			if got := c.send(t, respCmd("PING")); got != "+PONG\r\n" {
				t.Fatalf("PING on one of two connections: %q", got)
			}
		}
		c3 := respDial(t, addr)
		line, err := c3.r.ReadString('\n')
		if err != nil || line != "-ERR max number of clients reached\r\n" {
			t.Fatalf("a third connection read %q, %v", line, err)
		}
		c3.mustClose(t, "the third connection")
		waitFor(t, "flakeid_resp_connections_rejected_total to count the refusal", respTimeout, func() bool {
			return respMetric(t, url, "flakeid_resp_connections_rejected_total") >= 1
		})
		if got := respMetric(t, url, "flakeid_resp_connections_rejected_total"); got != 1 {
			t.Errorf("flakeid_resp_connections_rejected_total = %v, want 1", got)
		}
		if got := c1.send(t, respCmd("PING")); got != "+PONG\r\n" {
			t.Fatalf("PING on a held connection after the refusal: %q", got)
		}
		c2.Close()
		// Once the server sees c2 gone, a new connection is served again.
		waitFor(t, "a connection after one of two closed", respTimeout, func() bool {
			c, err := net.DialTimeout("tcp", addr, respTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(respTimeout))
			io.WriteString(c, respCmd("PING"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			return line == "+PONG\r\n"
		})
	})
}

// TestRESPRedisBenchmark: Debian's redis-benchmark runs against the
// listener without a warning (it reads CONFIG GET save and appendonly
// first) and INCRs a tag; redis-cli lists the connections with CLIENT LIST.
func TestRESPRedisBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const bench = "/usr/bin/redis-benchmark"
	needRESPClient(t, bench, "redis-tools", "--version")
	t.Parallel()
	_, _, addr := startRESP(t, proofBin.get(t), "--auto-create-tags")
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(t.Context(), 3*respTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bench, "-h", host, "-p", port, "-t", "ping,incr", "-n", "2000", "-c", "10", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "WARN") || strings.Contains(string(out), "Could not") || strings.Contains(string(out), "ERR") {
		t.Errorf("redis-benchmark warned or failed:\n%s", out)
	}
	if !regexp.MustCompile(`INCR: [0-9.]+ requests per second`).Match(out) {
		t.Errorf("redis-benchmark ran no INCR:\n%s", out)
	}
	out, err = exec.CommandContext(ctx, "/usr/bin/redis-cli", "-h", host, "-p", port, "CLIENT", "LIST").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "laddr="+addr) {
		t.Errorf("redis-cli CLIENT LIST: %v\n%s", err, out)
	}
}
