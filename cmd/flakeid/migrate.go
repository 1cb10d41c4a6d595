package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/internal/humanize"
	"github.com/flakeid/flakeid/snowflake"
)

// migrateCmd groups the commands of a move from another ID system.
type migrateCmd struct {
	Plan migratePlanCmd `cmd:"" help:"Plan the move from another ID system: a flakeid configuration under which every new ID is above every old one (so primary keys keep sorting), how long it lasts, and the steps of the cutover."`
}

// migratePlanCmd prints a migration plan.
type migratePlanCmd struct {
	From         string      `required:"" placeholder:"SYSTEM" help:"What the old system is: a layout preset (${presets}: flakeid layout --preset NAME shows one), \"layout\" (its fields in --from-fields, --from-epoch, --from-time-unit) or \"sequence\" (an auto-increment column, a Leaf, Tinyid or ticket-server counter)."`
	FromFields   string      `placeholder:"T/D/W/S" help:"With --from layout: the old layout's time/datacenter/worker/sequence bits, e.g. 41/0/10/12."`
	FromEpoch    *epochFlag  `placeholder:"TIME" help:"With --from layout: the old layout's epoch (RFC 3339, a UTC date or Unix milliseconds)."`
	FromTimeUnit string      `placeholder:"DURATION" default:"1ms" help:"With --from layout: the old layout's time unit."`
	MaxID        *int64      `name:"max-id" placeholder:"N" help:"The highest ID the old system issued (after its writers stopped)."`
	MaxIDFrom    string      `name:"max-id-from" placeholder:"URL" help:"Read the highest ID from a table column instead: postgres://…/db?column=table.column or mysql://…/db?column=table.column."`
	Tag          string      `placeholder:"NAME" help:"For a sequence: the segment tag that continues it (the plan gives its first ID)."`
	MinYears     float64     `default:"10" help:"Refuse a plan whose IDs last fewer years than this."`
	JSON         bool        `name:"json" help:"Print the plan as one JSON object."`
	Layout       layoutFlags `embed:""`
}

// migrationPlan is a plan, as --json prints it.
type migrationPlan struct {
	From        string           `json:"from"`
	Source      string           `json:"source,omitempty"`
	MaxID       int64            `json:"max_id"`
	MaxIDTime   string           `json:"max_id_time,omitempty"`
	Layout      string           `json:"layout"`
	EpochMoved  bool             `json:"epoch_moved"`
	Flags       []string         `json:"flags"`
	FirstID     string           `json:"first_id"` // the smallest ID of the tick the plan is made in
	RunsUntil   string           `json:"runs_until"`
	Years       float64          `json:"years"`
	SegmentTag  string           `json:"segment_tag,omitempty"`
	SegmentFrom int64            `json:"segment_start,omitempty"`
	Steps       []string         `json:"steps"`
	layout      snowflake.Layout // the new layout
}

// Run makes the plan, or says why none is safe.
func (c *migratePlanCmd) Run(ctx context.Context, out *streams) error {
	p, err := c.plan(ctx, time.Now())
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(out.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	rows := [][2]string{{"old system", p.From}}
	if p.Source != "" {
		rows = append(rows, [2]string{"source", p.Source})
	}
	maxID := strconv.FormatInt(p.MaxID, 10)
	if p.MaxIDTime != "" {
		maxID += " (issued at " + p.MaxIDTime + ")"
	}
	rows = append(rows, [2]string{"highest old ID", maxID})
	if p.SegmentTag != "" {
		rows = append(rows, [2]string{"segment tag", fmt.Sprintf("%s, first ID %d", p.SegmentTag, p.SegmentFrom)})
	}
	layout := p.Layout
	if p.EpochMoved {
		layout += " (the epoch moved back so that today's IDs start above the old ones)"
	}
	rows = append(rows,
		[2]string{"flakeid layout", layout},
		[2]string{"flags", strings.Join(p.Flags, " ")},
		[2]string{"first new ID", "at least " + p.FirstID + " (now)"},
		[2]string{"lasts", fmt.Sprintf("until %s (%.1f years)", p.RunsUntil, p.Years)})
	if err := writeFields(out.stdout, rows); err != nil {
		return err
	}
	fmt.Fprintln(out.stdout, "steps:")
	for i, s := range p.Steps {
		fmt.Fprintf(out.stdout, "  %d. %s\n", i+1, s)
	}
	return nil
}

// oldLayout is the layout of the old system, nil for a sequence.
func (c *migratePlanCmd) oldLayout() (*snowflake.Layout, string, error) {
	switch strings.ToLower(c.From) {
	case "sequence":
		return nil, "", nil
	case "layout":
		var t, d, w, s int
		if _, err := fmt.Sscanf(c.FromFields, "%d/%d/%d/%d", &t, &d, &w, &s); err != nil {
			return nil, "", fmt.Errorf("--from layout needs --from-fields T/D/W/S (time/datacenter/worker/sequence bits), got %q", c.FromFields)
		}
		if c.FromEpoch == nil {
			return nil, "", fmt.Errorf("--from layout needs --from-epoch, the old layout's epoch")
		}
		unit, err := time.ParseDuration(c.FromTimeUnit)
		if err != nil {
			return nil, "", fmt.Errorf("--from-time-unit %q: %v", c.FromTimeUnit, err)
		}
		l, err := snowflake.Layout{TimeBits: t, DatacenterBits: d, WorkerBits: w, SequenceBits: s, Epoch: time.Time(*c.FromEpoch), TimeUnit: unit}.Normalize()
		return &l, "", err
	}
	if c.FromFields != "" || c.FromEpoch != nil {
		return nil, "", fmt.Errorf("--from-fields and --from-epoch go with --from layout, not --from %s", c.From)
	}
	info, err := snowflake.DescribePreset(c.From)
	if err != nil {
		return nil, "", fmt.Errorf("--from %q: want a preset (%s), layout or sequence", c.From, strings.Join(snowflake.PresetNames(), ", "))
	}
	l, err := snowflake.Preset(c.From)
	return &l, info.Source, err
}

// plan makes the plan at the instant now.
func (c *migratePlanCmd) plan(ctx context.Context, now time.Time) (migrationPlan, error) {
	old, source, err := c.oldLayout()
	if err != nil {
		return migrationPlan{}, err
	}
	maxID, err := c.maxID(ctx)
	if err != nil {
		return migrationPlan{}, err
	}
	p := migrationPlan{From: strings.ToLower(c.From), Source: source, MaxID: maxID}
	if old != nil {
		parts, err := old.Decode(snowflake.ID(maxID))
		if err != nil {
			return p, fmt.Errorf("the highest old ID does not decode as %s: %w", old, err)
		}
		p.MaxIDTime = parts.Time.Format(time.RFC3339Nano)
		if parts.Time.After(now.Add(24 * time.Hour)) {
			return p, fmt.Errorf("the highest old ID, %d, decodes as %s to %s, more than a day ahead of this clock: is --from right?", maxID, old, p.MaxIDTime)
		}
	}
	if c.Tag != "" {
		if old != nil {
			return p, fmt.Errorf("--tag is for a sequence (--from sequence): a Snowflake system's IDs are continued by Snowflake IDs")
		}
		if maxID == 1<<63-1 {
			return p, fmt.Errorf("the sequence is at the largest int64: nothing is left above it")
		}
		p.SegmentTag, p.SegmentFrom = c.Tag, maxID+1
	}
	l, err := c.Layout.layout()
	if err != nil {
		return p, err
	}
	above, err := l.Above(snowflake.ID(maxID), now)
	if errors.Is(err, snowflake.ErrTimeExhausted) {
		left := uint64(1<<63-1) - uint64(maxID)
		return p, fmt.Errorf("no plan: %w. Above the old IDs only %s IDs are left (about 2^%d)%s; keep the old keys and give new rows new ones, or move to a segment tag (--from sequence --tag NAME) if the IDs need not carry time",
			err, humanize.Thousands(int64(left)), bitLen(left), layoutHint(l))
	}
	if err != nil {
		return p, err
	}
	capa := above.Capacity()
	p.Years = capa.RunsUntil.Sub(now).Hours() / 24 / 365.2425
	if p.Years < c.MinYears {
		left := uint64(1<<63-1) - uint64(maxID)
		return p, fmt.Errorf("no plan: with the old IDs up to %d, layout %s would last only until %s (%.1f years, under --min-years %g): only %s IDs are left above them (about 2^%d)%s",
			maxID, above, capa.RunsUntil.Format(time.DateOnly), p.Years, c.MinYears, humanize.Thousands(int64(left)), bitLen(left), layoutHint(l))
	}
	if _, err := snowflake.New(snowflake.Settings{Layout: above, Now: func() time.Time { return now }}); err != nil {
		return p, err
	}
	p.layout, p.Layout = above, above.String()
	p.EpochMoved = !above.Epoch.Equal(l.Epoch)
	p.RunsUntil = capa.RunsUntil.Format(time.DateOnly)
	b, err := above.Bounds(now, now.Add(above.TimeUnit))
	if err != nil {
		return p, err
	}
	p.FirstID = strconv.FormatInt(int64(b.Min), 10)
	p.Flags = layoutArgs(c.Layout, above)
	p.Steps = c.steps(p, old != nil)
	return p, nil
}

// maxID is --max-id, or what --max-id-from reads.
func (c *migratePlanCmd) maxID(ctx context.Context) (int64, error) {
	switch {
	case (c.MaxID == nil) == (c.MaxIDFrom == ""):
		return 0, fmt.Errorf("give the highest old ID: --max-id N, or --max-id-from URL?column=table.column (one of them)")
	case c.MaxID != nil:
		if *c.MaxID < 0 {
			return 0, fmt.Errorf("--max-id %d: IDs are not negative", *c.MaxID)
		}
		return *c.MaxID, nil
	}
	u, err := url.Parse(c.MaxIDFrom)
	if err != nil {
		return 0, fmt.Errorf("--max-id-from: %w", err)
	}
	n, err := sqldb.MaxOfColumn(ctx, u)
	if err != nil {
		return 0, fmt.Errorf("--max-id-from %s: %w", redactURL(c.MaxIDFrom), err)
	}
	if n < 0 {
		return 0, fmt.Errorf("--max-id-from %s: the column's largest value is %d, negative", redactURL(c.MaxIDFrom), n)
	}
	return n, nil
}

// steps are the cutover's steps.
func (c *migratePlanCmd) steps(p migrationPlan, snowflakeOld bool) []string {
	flags := strings.Join(p.Flags, " ")
	check := fmt.Sprintf("Check before moving clients: `flakeid next %s` prints an ID above %d.", flags, p.MaxID)
	if p.SegmentTag != "" {
		return []string{
			"Stop the old system's writers, and read its highest ID again: the plan holds for " + strconv.FormatInt(p.MaxID, 10) + " or lower.",
			fmt.Sprintf("Create the tag above it: `flakeid tags create %s --start %d --store …` (with several stores, one per database with its --delta and --remainder).", p.SegmentTag, p.SegmentFrom),
			fmt.Sprintf("Start flakeid, and move clients to GET /v1/segment/%s/next.", p.SegmentTag),
			"Or, if the keys may carry time, use Snowflake IDs instead: `flakeid serve " + flags + "` (every one is above the old IDs).",
		}
	}
	first := "Stop the old system's writers, and read its highest ID again: the plan holds for " + strconv.FormatInt(p.MaxID, 10) + " or lower."
	if snowflakeOld {
		first += " Its hosts' clocks do not matter: the new IDs are above it by value."
	}
	return []string{
		first,
		"Start every flakeid node with the same layout: `flakeid serve " + flags + " --coordinator …`. Keep these flags for good: another epoch would give other IDs.",
		check,
		"Move clients to flakeid; the old system must not issue again.",
	}
}

// layoutArgs are the layout flags that give l: the user's own, and
// --epoch when the plan moved it.
func layoutArgs(f layoutFlags, l snowflake.Layout) []string {
	args := []string{"--preset", strings.ToLower(strings.TrimSpace(f.Preset))}
	if args[1] == "" {
		args[1] = "default"
	}
	for _, o := range []struct {
		name string
		v    *int
	}{{"--time-bits", f.TimeBits}, {"--datacenter-bits", f.DatacenterBits}, {"--worker-bits", f.WorkerBits}, {"--sequence-bits", f.SequenceBits}} {
		if o.v != nil {
			args = append(args, o.name, strconv.Itoa(*o.v))
		}
	}
	if f.TimeUnit != nil {
		args = append(args, "--time-unit", f.TimeUnit.String())
	}
	preset, err := snowflake.Preset(f.Preset)
	if f.Epoch != nil || err != nil || !preset.Epoch.Equal(l.Epoch) {
		args = append(args, "--epoch", l.Epoch.UTC().Format(time.RFC3339Nano))
	}
	return args
}

// bitLen is the number of bits of n.
func bitLen(n uint64) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

// layoutHint says how the new layout's fields below its time field bear on
// the room left.
func layoutHint(l snowflake.Layout) string {
	below := l.DatacenterBits + l.WorkerBits + l.SequenceBits
	return fmt.Sprintf(", and layout %s takes %d bits below its time field", l, below)
}
