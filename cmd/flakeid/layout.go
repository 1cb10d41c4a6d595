package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flakeid/flakeid/internal/humanize"
	"github.com/flakeid/flakeid/snowflake"
)

// warnWithin is how close the end of a layout's time field may come before
// layout warns about it.
const warnWithin = 10 // years

// layoutCmd explains a layout. It validates the layout against the current
// time (as snowflake.New does), so an epoch in the future or a time
// field that has already run out is an error, like it is for next.
type layoutCmd struct {
	JSON bool `name:"json" env:"FLAKEID_JSON" help:"Print the layout as one JSON object."`

	Layout layoutFlags `embed:""`
}

// layoutInfo is the --json form of a layout.
type layoutInfo struct {
	Preset               string  `json:"preset"`
	Source               string  `json:"source"`
	DecodeOnly           bool    `json:"decode_only,omitempty"`
	Overridden           bool    `json:"overridden"`
	Fields               string  `json:"fields"`
	TimeBits             int     `json:"time_bits"`
	DatacenterBits       int     `json:"datacenter_bits"`
	WorkerBits           int     `json:"worker_bits"`
	SequenceBits         int     `json:"sequence_bits"`
	UnusedBits           int     `json:"unused_bits"`
	Epoch                string  `json:"epoch"`
	EpochUnixMilli       int64   `json:"epoch_unix_ms"`
	TimeUnit             string  `json:"time_unit"`
	TimeUnitNanos        int64   `json:"time_unit_ns"`
	IDsPerTick           int64   `json:"ids_per_tick"`
	IDsPerSecond         float64 `json:"ids_per_second"`
	Datacenters          int64   `json:"datacenters"`
	WorkersPerDatacenter int64   `json:"workers_per_datacenter"`
	Nodes                int64   `json:"nodes"`
	MaxID                string  `json:"max_id"`
	LifetimeYears        float64 `json:"lifetime_years"`
	RunsUntil            string  `json:"runs_until"`
}

// Run prints the layout.
func (c *layoutCmd) Run(out *streams) error {
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	now := time.Now()
	preset, err := snowflake.DescribePreset(c.Layout.Preset)
	if err != nil {
		return err
	}
	// A predecessor's layout (uid-generator's, Sonyflake's) is shown for
	// decoding its IDs and planning the move: its time field may have run
	// out and its field order may not be one flakeid generates.
	predecessor := preset.Predecessor && !c.Layout.overridden()
	_, genErr := snowflake.New(snowflake.Settings{Layout: l}) // epoch in the future, time field run out
	if genErr != nil && !predecessor {
		return genErr
	}
	decodeOnly := genErr != nil
	capa := l.Capacity()
	used := l.TimeBits + l.DatacenterBits + l.WorkerBits + l.SequenceBits
	info := layoutInfo{
		Preset:               preset.Name,
		Source:               preset.Source,
		DecodeOnly:           decodeOnly,
		Overridden:           c.Layout.overridden(),
		Fields:               drawFields(l),
		TimeBits:             l.TimeBits,
		DatacenterBits:       l.DatacenterBits,
		WorkerBits:           l.WorkerBits,
		SequenceBits:         l.SequenceBits,
		UnusedBits:           snowflake.MaxBits - used,
		Epoch:                l.Epoch.UTC().Format(time.RFC3339Nano),
		EpochUnixMilli:       l.Epoch.UnixMilli(),
		TimeUnit:             l.TimeUnit.String(),
		TimeUnitNanos:        int64(l.TimeUnit),
		IDsPerTick:           capa.IDsPerTick,
		IDsPerSecond:         capa.IDsPerSecond,
		Datacenters:          capa.Datacenters,
		WorkersPerDatacenter: capa.WorkersPerDatacenter,
		Nodes:                capa.Nodes,
		MaxID:                strconv.FormatUint(uint64(1)<<used-1, 10),
		LifetimeYears:        capa.LifetimeYears,
		RunsUntil:            capa.RunsUntil.Format(timeFormat(l)),
	}
	if info.Preset == "" {
		info.Preset = "default"
	}

	if c.JSON {
		enc := json.NewEncoder(out.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(info)
	} else {
		shown := info.Preset
		if info.Overridden {
			shown += " (with fields overridden by flags)"
		}
		runsUntil := "runs until " + info.RunsUntil
		switch {
		case capa.RunsUntil.Year() == 9999:
			runsUntil = "runs past the year 9999"
		case !capa.RunsUntil.After(now):
			runsUntil = "ran out on " + info.RunsUntil
		}
		rows := [][2]string{{"preset", shown}, {"source", info.Source}}
		if predecessor {
			use := "decoding its IDs (flakeid decode --preset " + info.Preset + ") and planning the move (flakeid migrate plan --from " + info.Preset + ")"
			if decodeOnly {
				use += "; flakeid cannot generate with it: " + genErr.Error()
			}
			rows = append(rows, [2]string{"use", use})
		}
		err = writeFields(out.stdout, append(rows, [][2]string{
			{"fields", info.Fields},
			{"bits", drawBits(l)},
			{"epoch", fmt.Sprintf("%s (Unix ms %d)", info.Epoch, info.EpochUnixMilli)},
			{"time unit", info.TimeUnit},
			{"IDs per tick", humanize.Thousands(capa.IDsPerTick)},
			{"IDs/s per node", perSecond(capa.IDsPerSecond)},
			{"nodes", fmt.Sprintf("%s × %s = %s",
				count(capa.Datacenters, "datacenter"), count(capa.WorkersPerDatacenter, "worker"), count(capa.Nodes, "node"))},
			{"largest ID", fmt.Sprintf("%s (2^%d − 1)", info.MaxID, used)},
			{"lifetime", fmt.Sprintf("%s, %s", lifetime(capa.LifetimeYears), runsUntil)},
		}...))
	}
	if err != nil {
		return err
	}
	if capa.RunsUntil.Before(now.AddDate(warnWithin, 0, 0)) && !decodeOnly {
		left := capa.RunsUntil.Sub(now).Hours() / 24 / 365.2425
		fmt.Fprintf(out.stderr, "flakeid layout: warning: the time field runs out on %s, in %s (within %d years)\n",
			info.RunsUntil, lifetime(left), warnWithin)
	}
	return nil
}

// drawFields draws the layout's fields from the sign bit down, e.g.
// "0 | time 41 | dc 5 | worker 5 | seq 12". Fields of width zero are left
// out; bits no field uses (below the sign bit, above time) show as "unused".
func drawFields(l snowflake.Layout) string {
	parts := []string{"0"}
	if unused := snowflake.MaxBits - (l.TimeBits + l.DatacenterBits + l.WorkerBits + l.SequenceBits); unused > 0 {
		parts = append(parts, fmt.Sprintf("unused %d", unused))
	}
	fields := []struct {
		name string
		bits int
	}{{"time", l.TimeBits}, {"dc", l.DatacenterBits}, {"worker", l.WorkerBits}, {"seq", l.SequenceBits}}
	if l.Order == snowflake.OrderSequenceNode {
		fields = append(fields[:1], fields[3], fields[1], fields[2])
	}
	for _, f := range fields {
		if f.bits > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.bits))
		}
	}
	return strings.Join(parts, " | ")
}

// drawBits gives the bit positions of drawFields' fields, e.g.
// "63 | 62–22 | 21–17 | 16–12 | 11–0".
func drawBits(l snowflake.Layout) string {
	parts := []string{"63"}
	top := snowflake.MaxBits - 1
	widths := []int{snowflake.MaxBits - (l.TimeBits + l.DatacenterBits + l.WorkerBits + l.SequenceBits),
		l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SequenceBits}
	if l.Order == snowflake.OrderSequenceNode {
		widths = []int{widths[0], l.TimeBits, l.SequenceBits, l.DatacenterBits, l.WorkerBits}
	}
	for _, w := range widths {
		switch {
		case w <= 0:
			continue
		case w == 1:
			parts = append(parts, strconv.Itoa(top))
		default:
			parts = append(parts, fmt.Sprintf("%d–%d", top, top-w+1))
		}
		top -= w
	}
	return strings.Join(parts, " | ")
}

// perSecond formats an ID rate: whole numbers with thousands separators,
// rates below one per second with three significant digits.
func perSecond(v float64) string {
	switch {
	case v < 1:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case v == math.Trunc(v) && v < math.MaxInt64:
		return humanize.Thousands(int64(v))
	case v < math.MaxInt64:
		return "about " + humanize.Thousands(int64(math.Round(v)))
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// lifetime formats a span given in years.
func lifetime(years float64) string {
	switch days := years * 365.2425; {
	case years >= 1:
		return strconv.FormatFloat(years, 'f', 1, 64) + " years"
	case days >= 1:
		return strconv.FormatFloat(days, 'f', 1, 64) + " days"
	default:
		return strconv.FormatFloat(days*24, 'f', 1, 64) + " hours"
	}
}

// count formats "1 worker", "1,024 workers".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return humanize.Thousands(n) + " " + noun + "s"
}
