// Package bench compares flakeid's snowflake generator with peer ID
// libraries. It is a module of its own so that the peers never enter the
// main module's dependencies.
//
// Impls is the one table of implementations: the Go benchmarks in
// peers_test.go and the cmd/idrace program both run every entry of it.
package bench

import (
	"fmt"
	"sync"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/flakeid/flakeid/snowflake"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"github.com/rs/xid"
	"github.com/segmentio/ksuid"
	"github.com/sony/sonyflake"
	"github.com/yitter/idgenerator-go/idgen"
)

// BatchSize is the n that the flakeid-nextn implementation asks NextN for.
const BatchSize = 4096

// Caller is what one goroutine calls to get IDs. Exactly one of the three
// functions is set, according to the shape of the implementation's IDs.
type Caller struct {
	// Int returns one integer ID (snowflake-type generators).
	Int func() (int64, error)
	// Bytes writes one ID of Impl.Width bytes to the start of dst (xid,
	// UUIDv7, ULID, KSUID).
	Bytes func(dst *[20]byte) error
	// Batch reserves IDs first, first+1, …, first+n−1 (flakeid NextN).
	Batch func() (first int64, n int, err error)
}

// Impl is one ID generator under test.
type Impl struct {
	// Name is the sub-benchmark and table name.
	Name string
	// Width is the size of one ID in bytes.
	Width int
	// Ceiling is the theoretical IDs per second of one generator for a
	// snowflake-type layout (2^sequence bits per tick); 0 when there is none.
	Ceiling float64
	// Note is a short remark shown with the results.
	Note string
	// New builds a fresh generator and returns a factory of callers: each
	// goroutine calls the factory once and then only its own Caller, so an
	// implementation may keep per-goroutine state (the NextN batch).
	New func() (func() Caller, error)
}

// bwGlobals serialises changes to bwmarrin's package-level widths.
var bwGlobals sync.Mutex

// shared returns a factory that hands every goroutine the same Caller.
func shared(c Caller) func() Caller { return func() Caller { return c } }

func flakeid(l snowflake.Layout) func() (func() Caller, error) {
	return func() (func() Caller, error) {
		g, err := snowflake.New(snowflake.Settings{Layout: l})
		if err != nil {
			return nil, err
		}
		return shared(Caller{Int: func() (int64, error) {
			id, err := g.NextID()
			return int64(id), err
		}}), nil
	}
}

// WideLayout is a layout whose 22-bit sequence does not bind NextID at any
// rate reached here (4,194,304 IDs per millisecond).
func WideLayout() snowflake.Layout { return snowflake.Layout{TimeBits: 41, SequenceBits: 22} }

// Impls returns every implementation, flakeid's first.
func Impls() []Impl {
	return []Impl{
		{
			Name: "flakeid", Width: 8, Ceiling: 4_096_000,
			Note: "default layout 41/5/5/12 × 1ms, Wait policy",
			New:  flakeid(snowflake.Layout{}),
		},
		{
			Name: "flakeid-wide", Width: 8, Ceiling: 4_194_304_000,
			Note: "41/0/0/22 × 1ms: the sequence does not bind NextID",
			New:  flakeid(WideLayout()),
		},
		{
			Name: "flakeid-nextn", Width: 8, Ceiling: 4_194_304_000,
			Note: "NextN(4096) on the wide layout; one op = one batch",
			New: func() (func() Caller, error) {
				g, err := snowflake.New(snowflake.Settings{Layout: WideLayout()})
				if err != nil {
					return nil, err
				}
				return shared(Caller{Batch: func() (int64, int, error) {
					b, err := g.NextN(BatchSize)
					return int64(b.First), b.Count, err
				}}), nil
			},
		},
		{
			Name: "bwmarrin", Width: 8, Ceiling: 4_096_000,
			Note: "bwmarrin/snowflake v0.3.0, node 1 (41/10/12 × 1ms, mutex)",
			New: func() (func() Caller, error) {
				bwGlobals.Lock()
				n, err := bwsnowflake.NewNode(1)
				bwGlobals.Unlock()
				if err != nil {
					return nil, err
				}
				return shared(Caller{Int: func() (int64, error) { return n.Generate().Int64(), nil }}), nil
			},
		},
		{
			Name: "bwmarrin-wide", Width: 8, Ceiling: 4_194_304_000,
			Note: "bwmarrin/snowflake v0.3.0 with NodeBits 0, StepBits 22 (node 0): its sequence does not bind either",
			New: func() (func() Caller, error) {
				// bwmarrin reads its widths from package globals when a node
				// is created; set them for this node only.
				bwGlobals.Lock()
				defer bwGlobals.Unlock()
				defer func(nb, sb uint8) { bwsnowflake.NodeBits, bwsnowflake.StepBits = nb, sb }(bwsnowflake.NodeBits, bwsnowflake.StepBits)
				bwsnowflake.NodeBits, bwsnowflake.StepBits = 0, 22
				n, err := bwsnowflake.NewNode(0)
				if err != nil {
					return nil, err
				}
				return shared(Caller{Int: func() (int64, error) { return n.Generate().Int64(), nil }}), nil
			},
		},
		{
			Name: "sonyflake", Width: 8, Ceiling: 25_600,
			Note: "sony/sonyflake v1.2.0, machine 1 (39/8/16 × 10ms, mutex)",
			New: func() (func() Caller, error) {
				sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (uint16, error) { return 1, nil }})
				if err != nil {
					return nil, err
				}
				return shared(Caller{Int: func() (int64, error) {
					id, err := sf.NextID()
					return int64(id), err
				}}), nil
			},
		},
		{
			Name: "yitter", Width: 8,
			Note: "yitter/idgenerator-go v1.3.3, worker 1, default options (6-bit sequence, drift); process-global generator",
			New: func() (func() Caller, error) {
				// idgen keeps one generator in a package global: every New
				// replaces it. That is the peer's design; nothing here runs
				// two yitter generators at once.
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("yitter: %v", r)
						}
					}()
					idgen.SetIdGenerator(idgen.NewIdGeneratorOptions(1))
				}()
				if err != nil {
					return nil, err
				}
				return shared(Caller{Int: func() (int64, error) { return idgen.NextId(), nil }}), nil
			},
		},
		{
			Name: "xid", Width: 12,
			Note: "rs/xid v1.6.0 (seconds + machine + pid + 24-bit counter)",
			New: func() (func() Caller, error) {
				return shared(Caller{Bytes: func(dst *[20]byte) error {
					id := xid.New()
					copy(dst[:], id[:])
					return nil
				}}), nil
			},
		},
		{
			Name: "uuidv7", Width: 16,
			Note: "google/uuid v1.6.0 NewV7 (crypto/rand per call)",
			New: func() (func() Caller, error) {
				return shared(Caller{Bytes: func(dst *[20]byte) error {
					u, err := uuid.NewV7()
					copy(dst[:], u[:])
					return err
				}}), nil
			},
		},
		{
			Name: "ulid", Width: 16,
			Note: "oklog/ulid/v2 v2.1.1 Make (monotonic entropy)",
			New: func() (func() Caller, error) {
				return shared(Caller{Bytes: func(dst *[20]byte) error {
					u := ulid.Make()
					copy(dst[:], u[:])
					return nil
				}}), nil
			},
		},
		{
			Name: "ksuid", Width: 20,
			Note: "segmentio/ksuid v1.0.4 New (seconds + 16 random bytes)",
			New: func() (func() Caller, error) {
				return shared(Caller{Bytes: func(dst *[20]byte) error {
					k, err := ksuid.NewRandom()
					*dst = k
					return err
				}}), nil
			},
		},
	}
}

// Select returns the implementations named in names (all when names is
// empty), in table order, or an error naming an unknown one.
func Select(names []string) ([]Impl, error) {
	all := Impls()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Impl
	for _, im := range all {
		if want[im.Name] {
			out = append(out, im)
			delete(want, im.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown implementation %q", n)
	}
	return out, nil
}
