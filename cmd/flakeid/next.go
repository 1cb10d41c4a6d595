package main

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/internal/humanize"
	"github.com/flakeid/flakeid/snowflake"
)

// maxCount bounds next -n: ten million IDs is about 200 MB of decimal text
// and a few seconds of a default-layout generator.
const maxCount = 10_000_000

// nextCmd generates IDs in this process, under a worker id leased from the
// coordinator (by default a file under the data directory), so that any
// number of `flakeid next` processes sharing a coordinator never collide and a
// restart never reissues an ID. --worker takes a fixed worker id instead, on
// trust (unsafe, and it says so).
type nextCmd struct {
	Count     int           `short:"n" default:"1" placeholder:"N" env:"FLAKEID_COUNT" help:"Number of IDs to print, 1–${max_count} (default 1)."`
	Worker    *int64        `placeholder:"W" env:"FLAKEID_WORKER" help:"UNSAFE: use this worker id instead of leasing one (0 to 2^worker-bits − 1); two processes with the same id issue duplicates."`
	Policy    string        `default:"wait" enum:"wait,borrow" env:"FLAKEID_POLICY" help:"When a tick's sequence is used up: wait for the next tick, or borrow up to ${max_borrow} from the future (${enum})."`
	Format    string        `short:"f" default:"decimal" enum:"decimal,base32,base58,json,uuid7,typeid,ulid" env:"FLAKEID_FORMAT" help:"Output: decimal, base32 (13 Crockford chars), base58 (11 chars), one per line; json, an array of decimal strings; or the IDs' UUIDv7, TypeID (with --prefix) or ULID texts, one per line (${enum})."`
	Prefix    string        `placeholder:"PREFIX" env:"FLAKEID_TYPEID_PREFIX" help:"TypeID prefix of --format typeid: up to 63 of a–z and _ (not first or last); default none (a --server's own default)."`
	Every     time.Duration `placeholder:"DURATION" env:"FLAKEID_EVERY" help:"Issue one ID per interval (printing each at once) instead of all at once."`
	WaitLease bool          `env:"FLAKEID_WAIT_LEASE" help:"Wait for a worker id while all are held, instead of failing."`
	MaxWait   time.Duration `default:"10s" placeholder:"DURATION" env:"FLAKEID_MAX_WAIT" help:"How long to wait for the clock to pass the worker id's high-water mark (a previous holder's reservation), 0–1m."`

	Tag       string `placeholder:"TAG" env:"FLAKEID_TAG" help:"Segment mode: print the next IDs of this tag (dense integers from --store, Leaf-style) instead of Snowflake IDs."`
	Server    string `placeholder:"URL[,URL…]" env:"FLAKEID_SERVER" help:"Ask running flakeid servers for the IDs (failing over between them) instead of generating them here; a server that masks its IDs gets its masked texts printed."`
	Token     string `placeholder:"TOKEN" env:"FLAKEID_TOKEN" help:"Bearer token for --server."`
	CreateTag bool   `env:"FLAKEID_CREATE_TAG" help:"Segment mode: create the tag (step 1000) if it does not exist."`

	Mask   maskKeyFlags `embed:"" prefix:"mask-" help:"A masked series' key."`
	Data   dataFlags    `embed:""`
	Store  storeFlags   `embed:""`
	Coord  coordFlags   `embed:""`
	Layout layoutFlags  `embed:""`
}

// Run prints c.Count IDs.
func (c *nextCmd) Run(ctx context.Context, out *streams) error {
	if c.Count < 1 || c.Count > maxCount {
		return fmt.Errorf("-n %d is out of range: want 1 to %s IDs", c.Count, humanize.Thousands(maxCount))
	}
	if c.MaxWait < 0 || c.MaxWait > snowflake.MaxMaxWait {
		return fmt.Errorf("--max-wait %v is out of range: want 0 to %v", c.MaxWait, snowflake.MaxMaxWait)
	}
	if err := c.checkUUIDFormat(); err != nil {
		return err
	}
	if c.Server != "" {
		return c.remote(ctx, out)
	}
	if c.Tag != "" {
		return c.segments(ctx, out)
	}
	return c.local(ctx, out)
}

// uuidForm is the UUID form --format names, or 0.
func (c *nextCmd) uuidForm() idview.Form { return idview.FormOf(c.Format) }

// checkUUIDFormat checks --format's UUID forms and --prefix.
func (c *nextCmd) checkUUIDFormat() error {
	f := c.uuidForm()
	switch {
	case f != 0 && c.Tag != "":
		return fmt.Errorf("--format %s is for Snowflake IDs: segment IDs (--tag) carry no time", c.Format)
	case c.Prefix != "" && f != idview.FormTypeID:
		return fmt.Errorf("--prefix is for --format typeid (got --format %s)", c.Format)
	}
	if err := idview.CheckTypeIDPrefix(c.Prefix); err != nil {
		return fmt.Errorf("--prefix: %w", err)
	}
	return nil
}

// uuidWriter writes IDs of layout l as the UUID form of --format, with
// random bits from a ChaCha8 generator seeded from crypto/rand.
type uuidWriter struct {
	view   *idview.View
	rng    *rand.ChaCha8
	form   idview.Form
	prefix string
}

func newUUIDWriter(l snowflake.Layout, f idview.Form, prefix string) (*uuidWriter, error) {
	v, err := idview.New(l)
	if err != nil {
		return nil, err
	}
	var seed [32]byte
	crand.Read(seed[:])
	return &uuidWriter{view: v, rng: rand.NewChaCha8(seed), form: f, prefix: prefix}, nil
}

// appendText appends id's text.
func (u *uuidWriter) appendText(buf []byte, id int64) ([]byte, error) {
	var random [10]byte
	u.rng.Read(random[:])
	v, err := u.view.UUID(snowflake.ID(id), random)
	if err != nil {
		return buf, err
	}
	return v.AppendForm(buf, u.form, u.prefix), nil
}

// appendLine appends id in the line formats of --format (decimal, base32,
// base58) and a newline.
func (c *nextCmd) appendLine(buf []byte, id int64) []byte {
	switch c.Format {
	case "base32":
		buf = append(buf, snowflake.ID(id).Base32()...)
	case "base58":
		buf = append(buf, snowflake.ID(id).Base58()...)
	default:
		buf = strconv.AppendInt(buf, id, 10)
	}
	return append(buf, '\n')
}
