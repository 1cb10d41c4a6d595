package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/flakeid/flakeid/backend/sqldb"
)

// schemaFor prints the DDL of a SQL table for a postgres:// or mysql:// URL
// without connecting: the table the coordinator (kind "workers") or the
// segment store (kind "segments") uses. The commands create the table when
// it is missing; this is for DBAs who apply schema changes themselves.
func schemaFor(kind, raw string, out *streams) error {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return fmt.Errorf("a postgres:// or mysql:// URL is needed to print a schema (got %q)", redactURL(raw))
	}
	var d sqldb.Dialect
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		d = sqldb.Postgres
	case "mysql":
		d = sqldb.MySQL
	default:
		return fmt.Errorf("%q: only SQL stores have a schema (file, etcd and Redis need none)", redactedURL(u))
	}
	table := u.Query().Get("table")
	var ddl string
	if kind == "workers" {
		ddl, err = sqldb.SchemaSQLWithRegistry(d, table, u.Query().Get("registry"))
	} else {
		if table == "" {
			table = sqldb.DefaultSegmentTable
		}
		ddl, err = sqldb.SegmentSchemaSQL(d, table)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out.stdout, strings.TrimRight(ddl, ";\n")+";")
	return err
}

// tagsSchemaCmd prints the segment table's DDL.
type tagsSchemaCmd struct {
	Store storeFlags `embed:""`
}

// Run prints the DDL.
func (c *tagsSchemaCmd) Run(out *streams) error { return schemaFor("segments", c.Store.Store, out) }

// workersSchemaCmd prints the worker table's DDL.
type workersSchemaCmd struct {
	Coord coordFlags `embed:""`
}

// Run prints the DDL.
func (c *workersSchemaCmd) Run(out *streams) error {
	return schemaFor("workers", c.Coord.Coordinator, out)
}
