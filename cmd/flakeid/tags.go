package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/flakeid/flakeid/segment"
)

// tagsCmd groups the segment-tag commands.
type tagsCmd struct {
	Ls      tagsLsCmd      `cmd:"" help:"List segment tags: max id, step, description."`
	Create  tagsCreateCmd  `cmd:"" help:"Create a segment tag."`
	SetStep tagsSetStepCmd `cmd:"" name:"set-step" help:"Change a tag's step (and description)."`
	Delete  tagsDeleteCmd  `cmd:"" help:"Delete a segment tag: it hands out nothing more, and creating it again continues above every ID it handed out (its max id is kept)."`
	Schema  tagsSchemaCmd  `cmd:"" help:"Print the DDL of a SQL store's table (Leaf's leaf_alloc) for a migration tool."`
}

type tagsLsCmd struct {
	JSON  bool       `help:"One JSON object per tag (NDJSON)."`
	Data  dataFlags  `embed:""`
	Store storeFlags `embed:""`
}

// storeTag is a tag as one of several stores holds it.
type storeTag struct {
	segment.Tag
	Store string `json:"store,omitempty"`
}

// Run lists the tags; with several stores, each store's row of each tag
// (its own max id and share).
func (c *tagsLsCmd) Run(ctx context.Context, out *streams) error {
	s, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer s.Close()
	var rows []storeTag
	for i, st := range s.list {
		one := &stores{list: []store{st}, names: []string{s.names[i]}}
		a, err := one.allocator(segment.Config{})
		if err != nil {
			return err
		}
		tags, err := a.Tags(ctx) // series with their settings; their periods' rows left out
		a.Close()
		if err != nil {
			return err
		}
		for _, t := range tags {
			rows = append(rows, storeTag{Tag: t, Store: map[bool]string{true: s.names[i]}[len(s.list) > 1]})
		}
	}
	slices.SortStableFunc(rows, func(a, b storeTag) int { return strings.Compare(a.Name, b.Name) })
	if c.JSON {
		enc := json.NewEncoder(out.stdout)
		for _, t := range rows {
			if err := enc.Encode(t); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		fmt.Fprintln(out.stdout, "no tags")
		return nil
	}
	tw := tabwriter.NewWriter(out.stdout, 0, 0, 2, ' ', 0)
	storeCol := map[bool]string{true: "\tSTORE"}[len(s.list) > 1]
	fmt.Fprintln(tw, "TAG"+storeCol+"\tMAX ID\tSTEP\tUPDATED\tDESCRIPTION")
	for _, t := range rows {
		maxID, desc := strconv.FormatInt(t.MaxID, 10), t.Description
		if t.Series != nil {
			maxID = "-"
			desc = seriesSummary(*t.Series) + sep(desc) + desc
		}
		if t.Delta > 1 {
			desc = fmt.Sprintf("IDs ≡ %d (mod %d)", t.Remainder, t.Delta) + sep(desc) + desc
		}
		name := t.Name
		if t.Store != "" {
			name += "\t" + t.Store
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", name, maxID, t.Step, stamp(t.Updated), desc)
	}
	return tw.Flush()
}

type tagsCreateCmd struct {
	Tag         string       `arg:"" help:"Tag name: 1–128 of A–Z a–z 0–9 - _ . : (not \".\" or \"..\"); a series' name at most 100."`
	Step        int64        `default:"1000" help:"IDs per fetch from the store, 1–2^31−1; the dynamic step never goes below it. A series keeps it: at most one step per node per period is lost."`
	MaxID       int64        `name:"start" default:"1" help:"The first ID the tag hands out; for a series, the first counter of every period."`
	Description string       `help:"Free text, up to 256 bytes (a series' settings share them)."`
	Delta       int64        `help:"Hand out only the IDs ≡ --remainder (mod --delta), as Tinyid's delta and remainder columns do; the store records them, and the tag keeps them for life. Default: every ID, or, with several --store, store i of n the IDs ≡ i (mod n)."`
	Remainder   int64        `help:"See --delta: 0 to delta−1."`
	Period      string       `enum:",minute,hour,day,week,month,year" default:"" help:"Make the tag a series of business numbers whose counter starts again every minute, hour, day, week, month or year (with --template)."`
	Template    string       `placeholder:"TEXT" help:"A series' number: literal text, date parts {yyyy} {yy} {MM} {dd} {HH} {mm} {GGGG} {ww} of the period (several in one pair of braces, as {yyyyMMdd}) and one counter {seq:N} of N digits, e.g. ORD-{yyyyMMdd}-{seq:6}."`
	TZ          string       `name:"tz" placeholder:"ZONE" help:"A series' IANA time zone, e.g. Asia/Shanghai: its day starts at local midnight there. Default UTC."`
	Masked      bool         `help:"Show a series' counter as a keyed permutation of the period's counters, so that numbers do not tell the period's volume (needs --mask-key or --mask-keyring: the first key masks the series for its life)."`
	Mask        maskKeyFlags `embed:"" prefix:"mask-"`
	Data        dataFlags    `embed:""`
	Store       storeFlags   `embed:""`
}

// Run creates the tag.
func (c *tagsCreateCmd) Run(ctx context.Context, out *streams) error {
	if (c.Period == "") != (c.Template == "") || c.Period == "" && (c.TZ != "" || c.Masked) {
		return fmt.Errorf("a series needs both --period and --template (--tz and --masked apply to a series only)")
	}
	cfg := segment.Config{Logger: discardLogger()}
	t := segment.Tag{Name: c.Tag, Step: c.Step, MaxID: c.MaxID, Description: c.Description, Delta: c.Delta, Remainder: c.Remainder}
	if c.Period != "" {
		ser := segment.Series{Period: segment.Period(c.Period), TZ: c.TZ, Template: c.Template, Start: c.MaxID, Masked: c.Masked}
		t.MaxID = 0
		if c.Masked {
			keys, id, err := c.Mask.counterKeys()
			if err != nil {
				return err
			}
			if keys == nil {
				return fmt.Errorf("--masked needs the key the server masks with: --mask-key (FLAKEID_MASK_KEY) or --mask-keyring (FLAKEID_MASK_KEYRING)")
			}
			cfg.CounterKeys, ser.KeyID = keys, id
		}
		if _, err := segment.CompileSeries(ser, c.Step); err != nil {
			return err // before the store is opened
		}
		t.Series = &ser
	}
	s, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := s.allocator(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Create(ctx, t); err != nil {
		return err
	}
	if t.Series != nil {
		fmt.Fprintf(out.stdout, "created series %s (step %d): %s\n", c.Tag, c.Step, seriesSummary(*t.Series))
		return nil
	}
	if len(s.list) == 1 {
		first := max(c.MaxID, 1)
		if got, err := s.list[0].Get(ctx, c.Tag); err == nil {
			first = got.MaxID // a recovered store's floor may have raised it
		}
		fmt.Fprintf(out.stdout, "created tag %s (step %d, first ID %d)\n", c.Tag, c.Step, first)
		return nil
	}
	fmt.Fprintf(out.stdout, "created tag %s (step %d) in %d stores:\n", c.Tag, c.Step, len(s.list))
	for i, st := range s.list {
		got, err := st.Get(ctx, c.Tag)
		if err != nil {
			return err
		}
		fmt.Fprintf(out.stdout, "  %s: IDs ≡ %d (mod %d), from %d\n", s.names[i], got.Remainder, got.Delta, got.MaxID)
	}
	return nil
}

type tagsSetStepCmd struct {
	Tag         string     `arg:"" help:"Tag name."`
	Step        int64      `arg:"" help:"New step, 1–2^31−1."`
	Description *string    `help:"New description."`
	Data        dataFlags  `embed:""`
	Store       storeFlags `embed:""`
}

// Run changes the step.
func (c *tagsSetStepCmd) Run(ctx context.Context, out *streams) error {
	if c.Step < 1 || c.Step > segment.MaxStep {
		return fmt.Errorf("step %d is out of range: want 1 to %d", c.Step, segment.MaxStep)
	}
	s, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := s.allocator(segment.Config{})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Update(ctx, c.Tag, &c.Step, c.Description); err != nil { // a series keeps its settings
		return err
	}
	fmt.Fprintf(out.stdout, "tag %s: step %d\n", c.Tag, c.Step)
	return nil
}

type tagsDeleteCmd struct {
	Tag   string     `arg:"" help:"Tag name."`
	Data  dataFlags  `embed:""`
	Store storeFlags `embed:""`
}

// Run deletes the tag in the store. Running servers stop serving it at
// their next fetch (a server's own DELETE /v1/segment/tags/{tag} stops it
// at once).
func (c *tagsDeleteCmd) Run(ctx context.Context, out *streams) error {
	s, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer s.Close()
	var kept []string
	for i, st := range s.list {
		if row, err := st.Get(ctx, c.Tag); err == nil {
			kept = append(kept, strconv.FormatInt(row.MaxID, 10)+map[bool]string{true: " in " + s.names[i]}[len(s.list) > 1])
		}
	}
	a, err := s.allocator(segment.Config{})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Delete(ctx, c.Tag); err != nil {
		return err
	}
	fmt.Fprintf(out.stdout, "deleted tag %s (max id %s kept: creating it again continues from there)\n", c.Tag, strings.Join(kept, ", "))
	return nil
}

// seriesSummary describes a series' settings in one line.
func seriesSummary(s segment.Series) string {
	tz := s.TZ
	if tz == "" {
		tz = "UTC"
	}
	out := fmt.Sprintf("series %s, every %s (%s) from %d", s.Template, s.Period, tz, s.Start)
	if f, err := segment.CompileSeries(s, 1); err == nil {
		out += ", " + f.CapacityText()
	}
	if s.Masked {
		out += fmt.Sprintf(", masked with key %d", s.KeyID)
	}
	return out
}

// sep is "; " before a non-empty text.
func sep(s string) string {
	if s == "" {
		return ""
	}
	return "; "
}

// discardLogger is the logger of an allocator a command uses for one
// administrative call.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
