package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/flakeid/flakeid/backend/consul"
	"github.com/flakeid/flakeid/backend/sqldb"
	"github.com/flakeid/flakeid/backend/zk"
)

// schemaFor prints the DDL of a SQL table for a postgres:// or mysql:// URL
// without connecting: the table the coordinator (kind "workers") or the
// segment store (kind "segments") uses; for a zk:// or consul://
// coordinator, the nodes or keys it uses and the permissions it needs. The commands create the table when
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
	case "zk", "zookeeper", "consul", "consuls":
		if kind == "workers" {
			return treeFor(u, out)
		}
		return fmt.Errorf("%q: ZooKeeper and Consul are coordinators, not segment stores", redactedURL(u))
	default:
		return fmt.Errorf("%q: only SQL, ZooKeeper and Consul coordinators and SQL stores have a schema (file, etcd, Redis and NATS need none)", redactedURL(u))
	}
	table := u.Query().Get("table")
	var ddl string
	if kind == "workers" {
		if err := noRegistry(u); err != nil {
			return err
		}
		ddl, err = sqldb.SchemaSQL(d, table)
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

// treeFor prints, without connecting, the nodes (ZooKeeper) or keys (Consul)
// a coordinator URL's coordinator creates, and the permissions its client
// needs: the counterpart of a SQL schema for an operator who sets up ACLs.
func treeFor(u *url.URL, out *streams) error {
	if err := noRegistry(u); err != nil {
		return err
	}
	q := u.Query()
	path := strings.TrimRight(u.Path, "/")
	var lines []string
	if strings.HasPrefix(strings.ToLower(u.Scheme), "consul") {
		path = strings.Trim(path, "/")
		if path == "" {
			path = consul.DefaultPrefix
		}
		registry := consul.DefaultRegistry
		lines = []string{
			"# Consul KV keys of the coordinator (created when missing), and one session per held worker id",
			path + "/<datacenter>/namespace         the namespace record (JSON: incarnation, ID-space contract, floor)",
			path + "/<datacenter>/<worker>/holder   the holder (JSON: owner, lease, clock), locked by its session (TTL = --lease-ttl, behavior=delete)",
			path + "/<datacenter>/<worker>/high     the high-water mark, Unix milliseconds; only grows",
			registry + "/space                     the ID space every namespace on the registry shares",
			registry + "/<datacenter>              which namespace claimed the datacenter id (JSON)",
			"# ACL policy the token needs:",
			fmt.Sprintf("#   key_prefix %q { policy = \"write\" }", path+"/"),
			fmt.Sprintf("#   key_prefix %q { policy = \"write\" }", registry+"/"),
			"#   session_prefix \"\" { policy = \"write\" }",
		}
	} else {
		if path == "" {
			path = zk.DefaultPrefix
		}
		registry := zk.DefaultRegistry
		lines = []string{
			"# ZooKeeper nodes of the coordinator (created when missing, with the open ACL unless the ensemble sets one)",
			path + "/<datacenter>/namespace         persistent: the namespace record (JSON: incarnation, ID-space contract, floor)",
			path + "/<datacenter>/<worker>/holder   ephemeral, on the holder's own session (timeout = --lease-ttl)",
			path + "/<datacenter>/<worker>/high     persistent: the high-water mark, Unix milliseconds",
			path + "/clock                          persistent, empty: every read writes it to read ZooKeeper's clock",
			registry + "/<datacenter>              persistent: which namespace claimed the datacenter id (JSON)",
			registry + "/space                     persistent: the ID space (layout) every namespace of the ensemble issues in",
			"# The client needs CREATE, READ, WRITE and DELETE under both paths.",
		}
		if leaf := q.Get("leaf"); leaf != "" {
			lines = append(lines,
				"# Leaf takeover: reads "+strings.TrimRight(leaf, "/")+"/forever/<ip>:<port>-<seq> (READ) and fences a taken-over",
				"# Leaf worker id by writing the timestamp 2100-01-01 into its node (WRITE).")
		}
	}
	_, err := fmt.Fprintln(out.stdout, strings.Join(lines, "\n"))
	return err
}

// noRegistry refuses a coordinator URL with registry=, as opening it would:
// a coordinator has one datacenter registry, at a fixed place.
func noRegistry(u *url.URL) error {
	if u.Query().Has("registry") {
		return fmt.Errorf("%q: registry= is not accepted: every namespace on a coordinator shares its one datacenter registry", redactedURL(u))
	}
	return nil
}

// tagsSchemaCmd prints the segment table's DDL.
type tagsSchemaCmd struct {
	Store storeFlags `embed:""`
}

// Run prints the DDL.
func (c *tagsSchemaCmd) Run(out *streams) error {
	if len(c.Store.Store) > 1 {
		return fmt.Errorf("--store is given %d times; tags schema prints the DDL of one", len(c.Store.Store))
	}
	return schemaFor("segments", strings.Join(c.Store.Store, ""), out)
}

// workersSchemaCmd prints the worker table's DDL.
type workersSchemaCmd struct {
	Coord coordFlags `embed:""`
}

// Run prints the DDL.
func (c *workersSchemaCmd) Run(out *streams) error {
	return schemaFor("workers", c.Coord.Coordinator, out)
}
