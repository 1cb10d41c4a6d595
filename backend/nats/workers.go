package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// DefaultBucket is the KV bucket of a URL without one.
const DefaultBucket = "flakeid"

// DefaultNamespace is the namespace of a URL without namespace=.
const DefaultNamespace = "flakeid"

// history is how many revisions of each key the bucket keeps (NATS's
// most): a clock read finds the revision it wrote while fewer than that many
// other reads have written the key since.
const history = 64

// spaceKey holds the registry's ID space.
const spaceKey = "space"

// Workers is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// on a NATS JetStream KV bucket: protocol.Driver over the bucket.
type Workers struct {
	*protocol.Driver
	js        jetstream.JetStream
	server    string // the server's URL, without credentials, for errors
	bucket    string
	namespace string
	nc        *natsgo.Conn // closed by Close when OpenWorkers made it

	mu sync.Mutex
	kv jetstream.KeyValue // the bucket's handle, again after ensureBucket
}

// document is a datacenter's key: the registry's claim on it, and the
// namespace record and slots of Owner, the namespace that last held it.
type document struct {
	Claim  protocol.Claim           `json:"claim"`
	Owner  string                   `json:"owner,omitempty"`
	Record *protocol.Record         `json:"record,omitempty"`
	Slots  map[string]protocol.Slot `json:"slots,omitempty"`
}

// version is what Commit compares, the datacenter key's revision (0 when
// absent), and what it keeps: the document's owner and record, which a
// write by another namespace (that sees no record) leaves as they are.
type version struct {
	rev    uint64
	owner  string
	record *protocol.Record
}

// OpenWorkers opens the coordinator a nats:// or tls:// URL names (see the
// package doc), connecting to the server and creating the bucket when it
// is missing. Unknown parameters and registry= are refused.
func OpenWorkers(ctx context.Context, u *url.URL) (*Workers, error) {
	if s := strings.ToLower(u.Scheme); s != "nats" && s != "tls" {
		return nil, coord.InvalidURL(fmt.Errorf("scheme %q, want nats or tls", u.Scheme))
	}
	if err := coord.RefuseRegistry(u, "the bucket itself"); err != nil {
		return nil, err
	}
	if err := coord.CheckParams(u, "namespace"); err != nil {
		return nil, err
	}
	bucket := strings.Trim(u.Path, "/")
	if bucket == "" {
		bucket = DefaultBucket
	}
	if !validName(bucket) {
		return nil, coord.InvalidURL(fmt.Errorf("bucket %q: want letters, digits, - and _", bucket))
	}
	ns := u.Query().Get("namespace")
	if ns == "" {
		ns = DefaultNamespace
	}
	server := url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host}
	nc, err := natsgo.Connect(server.String(), natsgo.Name("flakeid"), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to %s: %w", worker.ErrUnavailable, server.Redacted(), err)
	}
	w, err := NewWorkers(ctx, nc, bucket, ns)
	if err != nil {
		nc.Close()
		return nil, err
	}
	w.nc = nc
	return w, nil
}

// NewWorkers returns the coordinator of namespace ns in the bucket of nc's
// JetStream, creating the bucket when it is missing. The caller keeps nc.
func NewWorkers(ctx context.Context, nc *natsgo.Conn, bucket, ns string) (*Workers, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%w: JetStream: %w", worker.ErrUnavailable, err)
	}
	w := &Workers{js: js, server: nc.ConnectedUrlRedacted(), bucket: bucket, namespace: ns}
	if err := w.ensureBucket(ctx); err != nil {
		return nil, err
	}
	w.Driver = protocol.New(w.store())
	return w, nil
}

// ensureBucket opens the bucket, creating it when it is missing: never
// made, or lost (deleted, a server back without its store) — then empty,
// which the protocol finds as a lost state and quarantines.
func (w *Workers) ensureBucket(ctx context.Context) error {
	kv, err := w.js.KeyValue(ctx, w.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = w.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: w.bucket, History: history, Storage: jetstream.FileStorage,
			Description: "flakeid worker-id coordinator"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = w.js.KeyValue(ctx, w.bucket)
		}
	}
	if err != nil {
		return coord.Unavailable(ctx, err, "opening the bucket %s at %s", w.bucket, w.server)
	}
	w.mu.Lock()
	w.kv = kv
	w.mu.Unlock()
	return nil
}

// bucketKV is the bucket's handle.
func (w *Workers) bucketKV() jetstream.KeyValue {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kv
}

// Close closes the connection OpenWorkers made.
func (w *Workers) Close() error {
	if w.nc != nil {
		w.nc.Close()
	}
	return nil
}

// store is w as a protocol.Store; Workers does not implement it itself, so
// that its exported methods are the coordinator's.
func (w *Workers) store() store { return store{w} }

type store struct{ w *Workers }

func (s store) Names() protocol.Names {
	where := fmt.Sprintf("the bucket %s at %s", s.w.bucket, s.w.server)
	return protocol.Names{Registry: where, Namespace: s.w.namespace, Place: where, Store: "the bucket"}
}

func dcKey(dc int64) string    { return "dc." + strconv.FormatInt(dc, 10) }
func clockKey(dc int64) string { return "clock." + strconv.FormatInt(dc, 10) }

// Read implements protocol.Store: the space, the datacenter's document,
// then the clock. A lost bucket is made again (empty) and read.
func (s store) Read(ctx context.Context, dc int64) (protocol.State, error) {
	st, err := s.read(ctx, dc)
	if errors.Is(err, errNoBucket) {
		if err := s.w.ensureBucket(ctx); err != nil {
			return st, err
		}
		st, err = s.read(ctx, dc)
	}
	return st, err
}

// errNoBucket marks a read of a bucket that is gone.
var errNoBucket = errors.New("the bucket is gone")

func (s store) read(ctx context.Context, dc int64) (protocol.State, error) {
	// A write first: a read of a bucket that is gone waits for its
	// context, a write fails at once.
	if _, err := s.w.bucketKV().Put(ctx, clockKey(dc), nil); errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return protocol.State{}, fmt.Errorf("%w: %w: %s in %s", worker.ErrUnavailable, errNoBucket, err, s.Names().Place)
	} else if err != nil {
		return protocol.State{}, coord.Unavailable(ctx, err, "writing the clock key %s in %s", clockKey(dc), s.Names().Place)
	}
	st := protocol.State{Datacenter: dc, Slots: map[int64]protocol.Slot{}, Version: version{}}
	space, err := s.get(ctx, spaceKey)
	if err != nil {
		return st, err
	}
	if space != nil {
		st.Space, st.HasSpace = string(space.Value()), true
	}
	d, v, err := s.document(ctx, dc)
	if err != nil {
		return st, err
	}
	st.Claim, st.Record, st.Slots, st.Version = d.Claim, d.Record, d.Slots, v
	st.Now, err = s.clock(ctx, dc)
	return st, err
}

// document reads datacenter dc's document as this namespace sees it, and
// its version.
func (s store) document(ctx context.Context, dc int64) (protocol.State, version, error) {
	e, err := s.get(ctx, dcKey(dc))
	if err != nil || e == nil {
		return protocol.State{Slots: map[int64]protocol.Slot{}}, version{}, err
	}
	st, d, err := parseDocument(e.Value(), s.w.namespace)
	if err != nil {
		return st, version{}, fmt.Errorf("%w: corrupt datacenter document %s in %s: %v: %q", worker.ErrUnavailable, e.Key(), s.Names().Place, err, e.Value())
	}
	return st, version{e.Revision(), d.Owner, d.Record}, nil
}

// parseDocument is a datacenter's document as namespace ns sees it: the
// claim, and the slots; the record only if it is ns's (another namespace's
// record is no record of this one: a namespace that claims the datacenter
// after it starts a record of its own, keeping the slots' marks).
func parseDocument(b []byte, ns string) (protocol.State, document, error) {
	var d document
	st := protocol.State{Slots: map[int64]protocol.Slot{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return st, d, err
	}
	if dec.More() {
		return st, d, errors.New("data after the document")
	}
	if d.Record != nil && (d.Record.Incarnation == "" || d.Owner == "") || d.Record == nil && d.Owner != "" {
		return st, d, errors.New("a namespace record without an incarnation or an owner")
	}
	if d.Claim.Freeing && d.Claim.Namespace == "" {
		return st, d, errors.New("a claim being freed without a namespace")
	}
	st.Claim = d.Claim
	if d.Owner == ns {
		st.Record = d.Record
	}
	for k, sl := range d.Slots {
		id, ok := coord.ParseID(k)
		if !ok {
			return st, d, fmt.Errorf("worker id %q", k)
		}
		st.Slots[id] = sl
	}
	return st, d, nil
}

// encodeDocument is the document of state st, written by namespace ns
// over the version read: without a record of ns, the owner and record read
// stay.
func encodeDocument(st protocol.State, ns string, read version) []byte {
	d := document{Claim: st.Claim, Owner: read.owner, Record: read.record, Slots: map[string]protocol.Slot{}}
	if st.Record != nil {
		d.Owner, d.Record = ns, st.Record
	}
	for id, sl := range st.Slots {
		d.Slots[strconv.FormatInt(id, 10)] = sl
	}
	b, _ := json.Marshal(d) // cannot fail: strings and integers
	return b
}

// clock writes the datacenter's clock key and returns the server's
// timestamp of that write (reading it again when another write of the key
// replaced it first).
func (s store) clock(ctx context.Context, dc int64) (time.Time, error) {
	for range protocol.MaxAttempts {
		rev, err := s.w.bucketKV().Put(ctx, clockKey(dc), nil)
		if err != nil {
			return time.Time{}, coord.Unavailable(ctx, err, "writing the clock key %s in %s", clockKey(dc), s.Names().Place)
		}
		e, err := s.w.bucketKV().GetRevision(ctx, clockKey(dc), rev)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return time.Time{}, coord.Unavailable(ctx, err, "reading the clock key %s in %s", clockKey(dc), s.Names().Place)
		}
		return e.Created().Round(0), nil
	}
	return time.Time{}, fmt.Errorf("%w: the clock key %s in %s was rewritten under every read", worker.ErrUnavailable, clockKey(dc), s.Names().Place)
}

// get reads key, nil when it is absent.
func (s store) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := s.w.bucketKV().Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		return nil, coord.Unavailable(ctx, err, "reading %s in %s", key, s.Names().Place)
	}
	return e, nil
}

// Commit implements protocol.Store: the space, created if absent, then the
// datacenter's document, guarded by the revision read.
func (s store) Commit(ctx context.Context, read, next protocol.State) error {
	if next.HasSpace && !read.HasSpace {
		if _, err := s.w.bucketKV().Create(ctx, spaceKey, []byte(next.Space)); errors.Is(err, jetstream.ErrKeyExists) {
			return protocol.ErrConflict
		} else if err != nil {
			return coord.Unavailable(ctx, err, "writing %s in %s", spaceKey, s.Names().Place)
		}
	}
	v := encodeDocument(next, s.w.namespace, read.Version.(version))
	key, rev := dcKey(read.Datacenter), read.Version.(version).rev
	var err error
	if rev == 0 {
		_, err = s.w.bucketKV().Create(ctx, key, v)
	} else {
		_, err = s.w.bucketKV().Update(ctx, key, v, rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return protocol.ErrConflict
	case err != nil:
		return coord.Unavailable(ctx, err, "writing %s in %s", key, s.Names().Place)
	}
	return nil
}

// Claims implements protocol.ClaimsReader: the space and every datacenter
// document's claim.
func (s store) Claims(ctx context.Context) (worker.Claims, error) {
	var c worker.Claims
	space, err := s.get(ctx, spaceKey)
	if err != nil {
		return c, err
	}
	if space != nil {
		c.Space, c.HasSpace = string(space.Value()), true
	}
	keys, err := s.w.bucketKV().Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return c, coord.Unavailable(ctx, err, "listing %s", s.Names().Place)
	}
	var dcs []int64
	for _, k := range keys {
		if id, ok := coord.ParseID(strings.TrimPrefix(k, "dc.")); ok && strings.HasPrefix(k, "dc.") {
			dcs = append(dcs, id)
		}
	}
	slices.Sort(dcs)
	for _, dc := range dcs {
		d, _, err := s.document(ctx, dc)
		if err != nil {
			return c, err
		}
		if d.Claim.Namespace != "" {
			c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: d.Claim.Namespace})
		}
	}
	return c, nil
}

// validName reports whether a bucket name is one NATS accepts: letters,
// digits, - and _.
func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return s != ""
}
