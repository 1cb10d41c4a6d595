package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// Run lists the tags.
func (c *tagsLsCmd) Run(ctx context.Context, out *streams) error {
	s, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer s.Close()
	tags, err := s.List(ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(out.stdout)
		for _, t := range tags {
			if err := enc.Encode(t); err != nil {
				return err
			}
		}
		return nil
	}
	if len(tags) == 0 {
		fmt.Fprintln(out.stdout, "no tags")
		return nil
	}
	tw := tabwriter.NewWriter(out.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tMAX ID\tSTEP\tUPDATED\tDESCRIPTION")
	for _, t := range tags {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", t.Name, t.MaxID, t.Step, stamp(t.Updated), t.Description)
	}
	return tw.Flush()
}

type tagsCreateCmd struct {
	Tag         string     `arg:"" help:"Tag name: 1–128 of A–Z a–z 0–9 - _ . : (not \".\" or \"..\")."`
	Step        int64      `default:"1000" help:"IDs per fetch from the store, 1–2^31−1; the dynamic step never goes below it."`
	MaxID       int64      `name:"start" default:"1" help:"The first ID the tag hands out."`
	Description string     `help:"Free text, up to 256 bytes."`
	Data        dataFlags  `embed:""`
	Store       storeFlags `embed:""`
}

// Run creates the tag.
func (c *tagsCreateCmd) Run(ctx context.Context, out *streams) error {
	s, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer s.Close()
	t := segment.Tag{Name: c.Tag, Step: c.Step, MaxID: c.MaxID, Description: c.Description}
	if err := s.Create(ctx, t); err != nil {
		return err
	}
	first := max(c.MaxID, 1)
	if got, err := s.Get(ctx, c.Tag); err == nil {
		first = got.MaxID // a recovered store's floor may have raised it
	}
	fmt.Fprintf(out.stdout, "created tag %s (step %d, first ID %d)\n", c.Tag, c.Step, first)
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
	if err := s.Update(ctx, c.Tag, &c.Step, c.Description); err != nil {
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
	row, err := s.Get(ctx, c.Tag)
	if err != nil {
		return err
	}
	if err := s.Delete(ctx, c.Tag); err != nil {
		return err
	}
	fmt.Fprintf(out.stdout, "deleted tag %s (max id %d kept: creating it again continues from there)\n", c.Tag, row.MaxID)
	return nil
}
