package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/bench/load"
	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
)

// checkURL parses u and refuses anything but http(s) on loopback.
func checkURL(u string) (*url.URL, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: want http or https", u)
	}
	return p, load.CheckLoopback(p.Host)
}

// newTransport is one worker's transport: one keep-alive connection,
// HTTP/1.1, or HTTP/2 without TLS (h2c) when h2c is set.
func newTransport(h2c bool) *http.Transport {
	t := &http.Transport{
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}
	if h2c {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// countIDs returns how many IDs an HTTP answer body holds.
type countIDs func(body []byte) (int64, error)

func idCounter(kind string) (countIDs, error) {
	switch kind {
	case "one":
		return func(b []byte) (int64, error) {
			if len(bytes.TrimSpace(b)) == 0 {
				return 0, errors.New("empty answer")
			}
			return 1, nil
		}, nil
	case "lines":
		return func(b []byte) (int64, error) { return int64(bytes.Count(b, []byte{'\n'})), nil }, nil
	case "ranges":
		return func(b []byte) (int64, error) {
			var v struct {
				Count *int64 `json:"count"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				return 0, err
			}
			if v.Count == nil {
				return 0, errors.New(`answer has no "count" (use ?format=ranges)`)
			}
			return *v.Count, nil
		}, nil
	}
	return nil, fmt.Errorf("-ids %q: want one, ranges or lines", kind)
}

func httpWorkers(o options) (func(context.Context, int) (load.Worker, error), error) {
	if o.url == "" {
		return nil, errors.New("http: no -url")
	}
	if _, err := checkURL(o.url); err != nil {
		return nil, err
	}
	count, err := idCounter(o.ids)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.url)
	switch o.client {
	case "raw":
		return func(ctx context.Context, _ int) (load.Worker, error) {
			c := newRawConn(u, o.accept)
			op := func(ctx context.Context) (int64, error) {
				status, body, err := c.get(ctx)
				if err != nil {
					return 0, err
				}
				if status != http.StatusOK {
					return 0, fmt.Errorf("HTTP %d: %.200s", status, body)
				}
				return count(body)
			}
			// One request first: a wrong URL fails here, not 1000 times.
			if _, err := op(ctx); err != nil {
				c.Close()
				return load.Worker{}, err
			}
			return load.Worker{Op: op, Close: c.Close}, nil
		}, nil
	case "nethttp":
	default:
		return nil, fmt.Errorf("-client %q: want raw or nethttp", o.client)
	}
	return func(ctx context.Context, _ int) (load.Worker, error) {
		tr := newTransport(false)
		cl := &http.Client{Transport: tr}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url, nil)
		if err != nil {
			return load.Worker{}, err
		}
		if o.accept != "" {
			req.Header.Set("Accept", o.accept)
		}
		buf := bytes.NewBuffer(make([]byte, 0, 64<<10))
		op := func(context.Context) (int64, error) {
			res, err := cl.Do(req)
			if err != nil {
				return 0, err
			}
			buf.Reset()
			_, err = buf.ReadFrom(res.Body)
			res.Body.Close()
			if err != nil {
				return 0, err
			}
			if res.StatusCode != http.StatusOK {
				return 0, fmt.Errorf("HTTP %d: %.200s", res.StatusCode, buf.Bytes())
			}
			return count(buf.Bytes())
		}
		// One request first: a wrong URL fails here, not 1000 times.
		if _, err := op(ctx); err != nil {
			tr.CloseIdleConnections()
			return load.Worker{}, err
		}
		return load.Worker{Op: op, Close: tr.CloseIdleConnections}, nil
	}, nil
}

func redisWorkers(o options) (func(context.Context, int) (load.Worker, error), error) {
	if err := load.CheckLoopback(o.redisAddr); err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ int) (load.Worker, error) {
		rdb := redis.NewClient(&redis.Options{
			Addr:         o.redisAddr,
			PoolSize:     1,
			MinIdleConns: 1,
			DialTimeout:  5 * time.Second,
		})
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return load.Worker{}, err
		}
		op := func(ctx context.Context) (int64, error) {
			if _, err := rdb.Incr(ctx, o.key).Result(); err != nil {
				return 0, err
			}
			return 1, nil
		}
		return load.Worker{Op: op, Close: func() { rdb.Close() }}, nil
	}, nil
}

func pgWorkers(ctx context.Context, o options) (func(context.Context, int) (load.Worker, error), error) {
	cfg, err := pgx.ParseConfig(o.pgDSN)
	if err != nil {
		return nil, err
	}
	if err := load.CheckLoopback(cfg.Host); err != nil {
		return nil, err
	}
	for _, fb := range cfg.Fallbacks {
		if err := load.CheckLoopback(fb.Host); err != nil {
			return nil, err
		}
	}
	// The sequence, once.
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, "CREATE SEQUENCE IF NOT EXISTS "+pgx.Identifier{o.seq}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		return nil, err
	}
	query := "SELECT nextval('" + pgx.Identifier{o.seq}.Sanitize() + "')"
	return func(ctx context.Context, _ int) (load.Worker, error) {
		conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			return load.Worker{}, err
		}
		op := func(ctx context.Context) (int64, error) {
			var v int64
			if err := conn.QueryRow(ctx, query).Scan(&v); err != nil {
				return 0, err
			}
			return 1, nil
		}
		return load.Worker{Op: op, Close: func() {
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			conn.Close(c)
		}}, nil
	}, nil
}

func rangesCount(rs []*flakeidv1.IDRange) int64 {
	var n int64
	for _, r := range rs {
		n += r.GetCount()
	}
	return n
}

func connectWorkers(o options) (func(context.Context, int) (load.Worker, error), error) {
	if _, err := checkURL(o.base); err != nil {
		return nil, err
	}
	var opts []connect.ClientOption
	h2c := o.h2c
	switch o.protocol {
	case "connect":
	case "grpc":
		opts = append(opts, connect.WithGRPC())
		h2c = true
	case "grpcweb":
		opts = append(opts, connect.WithGRPCWeb())
	default:
		return nil, fmt.Errorf("-protocol %q: want connect, grpc or grpcweb", o.protocol)
	}
	if o.mode == "connect-unary" && o.count < 1 {
		return nil, errors.New("connect-unary: -count must be ≥ 1")
	}
	if o.mode == "connect-stream" && o.tag != "" {
		return nil, errors.New("connect-stream streams Snowflake IDs only; -tag is for connect-unary")
	}
	return func(ctx context.Context, _ int) (load.Worker, error) {
		tr := newTransport(h2c)
		cl := flakeidv1connect.NewIDServiceClient(&http.Client{Transport: tr}, o.base, opts...)
		// unary is one RPC of o.count IDs, checked for their number.
		unary := func(call func(context.Context) ([]*flakeidv1.IDRange, error)) load.Op {
			return func(ctx context.Context) (int64, error) {
				rs, err := call(ctx)
				if err != nil {
					return 0, err
				}
				if n := rangesCount(rs); n != o.count {
					return n, fmt.Errorf("asked for %d IDs, got %d", o.count, n)
				}
				return o.count, nil
			}
		}
		var op load.Op
		switch {
		case o.mode == "connect-unary" && o.tag != "":
			req := connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: o.tag, Count: o.count})
			op = unary(func(ctx context.Context) ([]*flakeidv1.IDRange, error) {
				res, err := cl.NextSegment(ctx, req)
				if err != nil {
					return nil, err
				}
				return res.Msg.GetRanges(), nil
			})
		case o.mode == "connect-unary":
			req := connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: o.count})
			op = unary(func(ctx context.Context) ([]*flakeidv1.IDRange, error) {
				res, err := cl.NextSnowflake(ctx, req)
				if err != nil {
					return nil, err
				}
				return res.Msg.GetRanges(), nil
			})
		default:
			op = streamOp(cl, o.count, o.batch)
		}
		if _, err := op(ctx); err != nil {
			tr.CloseIdleConnections()
			return load.Worker{}, err
		}
		return load.Worker{Op: op, Close: tr.CloseIdleConnections}, nil
	}, nil
}

// streamOp receives one message of a StreamSnowflake call per op, and opens
// the next call when one ends (count > 0). The stream's context is the run's:
// it ends with the run.
func streamOp(cl flakeidv1connect.IDServiceClient, count, batch int64) load.Op {
	var st *connect.ServerStreamForClient[flakeidv1.NextSnowflakeResponse]
	return func(ctx context.Context) (int64, error) {
		for {
			if st == nil {
				s, err := cl.StreamSnowflake(ctx, connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: count, Batch: batch}))
				if err != nil {
					return 0, err
				}
				st = s
			}
			if st.Receive() {
				return rangesCount(st.Msg().GetRanges()), nil
			}
			err := st.Err()
			st.Close()
			st = nil
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			// The call sent its count and ended: open the next one.
		}
	}
}
