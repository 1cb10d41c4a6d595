package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// decodeCmd splits IDs into their fields.
//
// Every argument is decoded on its own: one that does not parse, or does not
// fit the layout, is reported on stderr (naming the argument) and skipped, the
// others are still printed, and the exit status is 1 if any failed.
type decodeCmd struct {
	JSON bool     `name:"json" env:"FLAKEID_JSON" help:"Print one JSON object per ID, one per line (NDJSON)."`
	IDs  []string `arg:"" name:"id" help:"IDs to decode: decimal, 13-character Crockford base32 or 11-character base58 (digits only are read as decimal), or an ID's UUIDv7, TypeID or ULID text (masked ones with --mask-key or --mask-keyring); with --tag, numbers of that series (ORD-20261128-000123, or their numeric form). An ID that does not parse or fit the layout is reported on stderr and skipped; the exit status is then 1. Put -- before IDs that start with a dash."`
	Tag  string   `placeholder:"TAG" help:"Read the arguments as numbers of this series tag (its settings come from --store; a masked series needs its key: --mask-key or --mask-keyring)."`

	Layout layoutFlags  `embed:""`
	Data   dataFlags    `embed:""`
	Store  storeFlags   `embed:""`
	Mask   maskKeyFlags `embed:"" prefix:"mask-"`
}

// decodedID is the --json form of one decoded ID.
type decodedID struct {
	ID         string `json:"id"`
	Time       string `json:"time"`
	Tick       int64  `json:"tick"`
	Datacenter int64  `json:"datacenter"`
	Worker     int64  `json:"worker"`
	Sequence   int64  `json:"sequence"`
	Form       string `json:"form,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
	KeyID      *uint8 `json:"key_id,omitempty"`
}

// Run decodes every argument.
func (c *decodeCmd) Run(ctx context.Context, out *streams) error {
	if c.Tag != "" {
		return c.numbers(ctx, out)
	}
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	tf := timeFormat(l)
	uuids, err := c.uuidReader(l)
	if err != nil {
		return err
	}
	return c.each(out, "IDs", func(arg string) (any, [][2]string, error) {
		var d decoded
		var err error
		if arg = strings.TrimSpace(arg); idview.LooksLikeText(arg) {
			d, err = uuids(arg)
		} else {
			d, err = decodeOne(l, arg)
		}
		if err != nil {
			return nil, nil, err
		}
		rec := decodedID{ID: d.id.String(), Time: d.Time.Format(tf), Tick: d.Tick,
			Datacenter: d.Datacenter, Worker: d.Worker, Sequence: d.Sequence}
		fields := [][2]string{
			{"id", rec.ID},
			{"time", rec.Time},
			{"tick", strconv.FormatInt(rec.Tick, 10)},
			{"datacenter", strconv.FormatInt(rec.Datacenter, 10)},
			{"worker", strconv.FormatInt(rec.Worker, 10)},
			{"sequence", strconv.FormatInt(rec.Sequence, 10)},
		}
		if d.form != 0 {
			rec.Form, rec.UUID, rec.Prefix = d.form.String(), d.uuid.String(), d.prefix
			fields = append(fields, [2]string{"form", rec.Form}, [2]string{"uuid", rec.UUID})
			if d.prefix != "" {
				fields = append(fields, [2]string{"prefix", d.prefix})
			}
			if d.keyID != nil {
				rec.KeyID = d.keyID
				fields = append(fields, [2]string{"key_id", strconv.Itoa(int(*d.keyID))})
			}
		}
		return rec, fields, nil
	})
}

// uuidReader returns the reader of UUIDv7, TypeID and ULID arguments for
// layout l: plain (the layout's view) without mask keys, masked (keyed
// payload, unmasked with --mask-key or --mask-keyring) with them.
func (c *decodeCmd) uuidReader(l snowflake.Layout) (func(string) (decoded, error), error) {
	view, err := idview.New(l)
	if err != nil {
		return nil, err
	}
	def := idmask.Bits63 // the space of the layout's IDs, as serve takes it
	if l.TimeBits+l.DatacenterBits+l.WorkerBits+l.SequenceBits <= idmask.Bits53 {
		def = idmask.Bits53
	}
	ring, err := c.Mask.keyringFor("mask-", def)
	if err != nil {
		return nil, err
	}
	return func(arg string) (decoded, error) {
		u, form, prefix, err := idview.ParseText(arg)
		if err != nil {
			return decoded{}, err
		}
		d := decoded{form: form, uuid: u, prefix: prefix}
		if ring != nil {
			id, keyID, err := ring.UnmaskUUID(u, view)
			if err != nil {
				return decoded{}, err
			}
			d.id, d.keyID = id, &keyID
		} else if d.id, err = view.ID(u); err != nil {
			return decoded{}, err
		}
		d.Parts, err = l.Decode(d.id)
		return d, err
	}, nil
}

// each decodes every argument with decode, which returns the --json record
// and the fields of the text form; an argument it fails on is reported on
// stderr (naming it) and skipped, and makes the command fail at the end.
// what names the arguments in that error ("IDs", "numbers").
func (c *decodeCmd) each(out *streams, what string, decode func(arg string) (any, [][2]string, error)) error {
	w := bufio.NewWriter(out.stdout)
	enc := json.NewEncoder(w)
	failed, printed := 0, 0
	for i, arg := range c.IDs {
		rec, fields, err := decode(arg)
		if err != nil {
			// Keep stdout and stderr in order when both are a terminal.
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out.stderr, "flakeid decode: argument %d %q: %v\n", i+1, arg, err)
			failed++
			continue
		}
		if c.JSON {
			err = enc.Encode(rec)
		} else {
			if printed > 0 {
				w.WriteString("\n")
			}
			err = writeFields(w, fields)
		}
		if err != nil {
			return err
		}
		printed++
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %s could not be decoded", failed, len(c.IDs), what)
	}
	return nil
}

type decoded struct {
	id snowflake.ID
	snowflake.Parts
	// form, uuid and prefix are set for a UUID-shaped argument, and keyID
	// for a masked one.
	form   idview.Form
	uuid   idview.UUID
	prefix string
	keyID  *uint8
}

// decodeOne parses arg in any of the accepted forms and decodes it with l.
func decodeOne(l snowflake.Layout, arg string) (decoded, error) {
	id, err := snowflake.ParseAny(strings.TrimSpace(arg))
	if err != nil {
		return decoded{}, err
	}
	p, err := l.Decode(id)
	if err != nil {
		return decoded{}, err
	}
	return decoded{id: id, Parts: p}, nil
}

// numbers decodes the arguments as numbers of the series tag c.Tag.
func (c *decodeCmd) numbers(ctx context.Context, out *streams) error {
	keys, _, err := c.Mask.counterKeys()
	if err != nil {
		return err
	}
	cfg := segment.Config{Logger: discardLogger(), CounterKeys: keys}
	store, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer store.Close()
	a, err := store.allocator(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	f, err := a.Format(ctx, c.Tag)
	if err != nil {
		return err
	}
	return c.each(out, "numbers", func(arg string) (any, [][2]string, error) {
		d, err := a.DecodeNumber(ctx, c.Tag, strings.TrimSpace(arg))
		if err != nil {
			return nil, nil, err
		}
		rec := decodedNumber{Tag: c.Tag, Number: d.Text, Numeric: strconv.FormatInt(d.Numeric, 10), Period: string(f.Series().Period),
			Label: strconv.FormatInt(d.Label, 10), PeriodStart: d.Start.Format(time.RFC3339), PeriodEnd: d.End.Format(time.RFC3339),
			Counter: d.Counter, Seq: d.Seq}
		return rec, [][2]string{
			{"tag", rec.Tag}, {"number", rec.Number}, {"numeric", rec.Numeric}, {"period", rec.Period},
			{"label", rec.Label}, {"period_start", rec.PeriodStart}, {"period_end", rec.PeriodEnd},
			{"counter", strconv.FormatInt(rec.Counter, 10)}, {"seq", strconv.FormatInt(rec.Seq, 10)},
		}, nil
	})
}

// decodedNumber is the --json form of a decoded series number; its fields
// are those of GET /v1/segment/{tag}/decode/{number}.
type decodedNumber struct {
	Tag         string `json:"tag"`
	Number      string `json:"number"`
	Numeric     string `json:"numeric"`
	Period      string `json:"period"`
	Label       string `json:"label"`
	PeriodStart string `json:"period_start"`
	PeriodEnd   string `json:"period_end"`
	Counter     int64  `json:"counter"`
	Seq         int64  `json:"seq"`
}
