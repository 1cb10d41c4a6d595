package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// LeafConfig points a Workers at the ZooKeeper registry of a Meituan Leaf
// cluster (snowflake mode) whose worker ids it takes over.
type LeafConfig struct {
	// Path is Leaf's node for the application, /snowflake/<leaf.name>:
	// its servers are registered under Path + "/forever".
	Path string
	// Interval is how often a live Leaf server uploads its timestamp.
	// Default 3s (Leaf's).
	Interval time.Duration
	// Margin is added to Interval before a Leaf node that was not written
	// counts as dead, and to the Leaf server's last timestamp to make the
	// high-water mark a taker starts from. Default 5s.
	Margin time.Duration
}

// DefaultLeafInterval is Leaf's upload interval.
const DefaultLeafInterval = 3 * time.Second

// DefaultLeafMargin is LeafConfig's default Margin.
const DefaultLeafMargin = 5 * time.Second

// LeafFenceTimestamp is the timestamp (2100-01-01T00:00:00Z, Unix ms) a
// taken-over Leaf node is set to: Leaf's start-up check refuses to start a
// server whose node holds a timestamp ahead of its clock.
const LeafFenceTimestamp = 4102444800000

// MaxLeafWorkers is the number of Leaf worker ids (10 bits).
const MaxLeafWorkers = 1024

func (l *LeafConfig) forever() string { return l.Path + "/forever" }

func (l *LeafConfig) after() time.Duration { return l.Interval + l.Margin }

// WithLeaf makes the Workers take over the worker ids of the Leaf cluster
// that cfg describes (see the package documentation): datacenter 0 only,
// with the snowflake layout "leaf" (snowflake.Preset).
func WithLeaf(cfg LeafConfig) Option {
	return func(w *Workers) {
		if cfg.Interval == 0 {
			cfg.Interval = DefaultLeafInterval
		}
		if cfg.Margin == 0 {
			cfg.Margin = DefaultLeafMargin
		}
		cfg.Path = strings.TrimRight(cfg.Path, "/")
		if cfg.Interval < 0 || cfg.Margin < 0 {
			w.optErr = fmt.Errorf("%w: Leaf interval %v and margin %v must not be negative", worker.ErrInvalidConfig, cfg.Interval, cfg.Margin)
		}
		w.leaf = &cfg
	}
}

// checkLeafRequest refuses, with a Leaf takeover, a request that could
// collide with Leaf's IDs in a way the takeover cannot see.
func (w *Workers) checkLeafRequest(req worker.Request) error {
	if w.leaf == nil {
		return nil
	}
	leaf, err := snowflake.Preset("leaf")
	if err != nil {
		return err
	}
	// Leaf's cluster is a registry of its own whose ID space is Leaf's
	// layout, on datacenter 0 (Leaf's layout has no datacenter bits).
	if err := worker.Admit(req, worker.Recorded{
		Registry: "Meituan Leaf's cluster under " + w.leaf.forever(), Namespace: w.prefix,
		Space: leaf.String(), HasSpace: true,
	}); err != nil {
		return err
	}
	if req.Datacenter != 0 {
		return fmt.Errorf("%w: taking over the Leaf worker ids under %s needs datacenter 0 and the Leaf layout %q; this request is for datacenter %d: "+
			"IDs of any other datacenter could equal Leaf's anywhere", worker.ErrContract, w.leaf.forever(), leaf.String(), req.Datacenter)
	}
	if req.Workers > MaxLeafWorkers {
		return fmt.Errorf("%w: %d workers, but Leaf's layout has %d worker ids", worker.ErrInvalidConfig, req.Workers, MaxLeafWorkers)
	}
	return nil
}

// leafData is what a Leaf server uploads to its node.
type leafData struct {
	IP        string          `json:"ip"`
	Port      json.RawMessage `json:"port"` // a string in Leaf; a number is accepted
	Timestamp *int64          `json:"timestamp"`
}

// leafNode is one node of Leaf's forever/ directory.
type leafNode struct {
	*node
	addr    string // the ip:port of its name
	ld      leafData
	garbage string // why the data cannot be read; "" when it can
	fenced  bool   // its timestamp is LeafFenceTimestamp
}

// fence is the node's data with the fence timestamp.
func (n *leafNode) fence() []byte {
	port := n.ld.Port
	if len(port) == 0 {
		port = json.RawMessage(`""`)
	}
	b, _ := json.Marshal(struct {
		IP        string          `json:"ip"`
		Port      json.RawMessage `json:"port"`
		Timestamp int64           `json:"timestamp"`
	}{n.ld.IP, port, LeafFenceTimestamp})
	return b
}

// leafID is what the Leaf nodes of one worker id say.
type leafID struct {
	all       []*leafNode
	live      *leafNode // a node written within Interval + Margin, or nil
	garbage   *leafNode // a node whose data cannot be read, or nil
	highMs    int64     // no Leaf ID of this worker id has a time at or after it
	liveUntil int64     // the live node's Mtime + Interval + Margin
}

// nodes is the id's Leaf nodes; none for a nil leafID.
func (l *leafID) nodes() []*leafNode {
	if l == nil {
		return nil
	}
	return l.all
}

// holder is the holder Read reports for the id, and until when (Unix ms),
// when Leaf holds it: a node that cannot be read (for ever), a live Leaf
// server, or — on an id a flakeid holder holds (ours), whose Acquire
// fenced every Leaf node of it — a node written again since.
func (l *leafID) holder(ours bool) (string, int64, bool) {
	if l.garbage != nil {
		return fmt.Sprintf("leaf:%s (unreadable: %s)", l.garbage.addr, l.garbage.garbage), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli(), true
	}
	for _, n := range l.all {
		if ours && !n.fenced {
			return fmt.Sprintf("leaf:%s (its node %s was written again after a flakeid holder fenced it)", n.addr, n.path), l.liveUntil, true
		}
	}
	if l.live != nil {
		return "leaf:" + l.live.addr, l.liveUntil, true
	}
	return "", 0, false
}

// parseLeafName splits a forever/ child "<ip>:<port>-<10-digit sequence>".
func parseLeafName(name string) (addr string, seq int64, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || len(name)-i-1 != 10 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return "", 0, false
	}
	return name[:i], seq, true
}

// readLeaf reads Leaf's forever/ directory. nowMs is ZooKeeper's clock
// (taken before the read); 0 means unknown (List), which judges no node live
// and reports every unfenced node's expiry instead.
func (w *Workers) readLeaf(ctx context.Context, nowMs int64) (map[int64]*leafID, error) {
	dir := w.leaf.forever()
	conn := w.shared()
	kids, err := await(ctx, func() ([]string, error) { c, _, err := conn.Children(dir); return c, err })
	if err != nil {
		if errors.Is(err, gozk.ErrNoNode) {
			return nil, fmt.Errorf("%w: there is no Leaf registry at %s on ZooKeeper %s: check the Leaf path (leaf=/snowflake/<leaf.name>)",
				worker.ErrInvalidConfig, dir, strings.Join(w.servers, ","))
		}
		return nil, w.unavailable(ctx, err, "listing the Leaf nodes under %s", dir)
	}
	var paths []string
	var seqs []int64
	var addrs []string
	for _, k := range kids {
		addr, seq, ok := parseLeafName(k)
		if !ok || seq >= MaxLeafWorkers {
			// Not Leaf's, or a sequence Leaf refuses to start with.
			continue
		}
		paths, seqs, addrs = append(paths, dir+"/"+k), append(seqs, seq), append(addrs, addr)
	}
	nodes, err := getMany(ctx, conn, paths)
	if err != nil {
		return nil, w.unavailable(ctx, err, "reading the Leaf nodes under %s", dir)
	}
	after := w.leaf.after().Milliseconds()
	out := map[int64]*leafID{}
	for i, n := range nodes {
		if n == nil {
			continue // deleted since listed
		}
		ln := &leafNode{node: n, addr: addrs[i]}
		if err := json.Unmarshal(n.data, &ln.ld); err != nil {
			ln.garbage = fmt.Sprintf("%q is not Leaf's JSON", n.data)
		} else if ln.ld.Timestamp == nil {
			ln.garbage = fmt.Sprintf("%q has no timestamp", n.data)
		}
		l := out[seqs[i]]
		if l == nil {
			l = &leafID{}
			out[seqs[i]] = l
		}
		l.all = append(l.all, ln)
		switch {
		case ln.garbage != "":
			l.garbage = ln
		case *ln.ld.Timestamp == LeafFenceTimestamp:
			// Fenced by a takeover: our own high node carries its mark.
			ln.fenced = true
		default:
			// Leaf issues by its own clock (the timestamp it uploads) up
			// to its next upload; ZooKeeper's Mtime counts too, in case
			// Leaf's clock was behind.
			last := max(*ln.ld.Timestamp, n.stat.Mtime)
			l.highMs = max(l.highMs, last+after)
			l.liveUntil = max(l.liveUntil, n.stat.Mtime+after)
			if nowMs > 0 && nowMs-n.stat.Mtime < after {
				l.live = ln
			}
		}
	}
	return out, nil
}
