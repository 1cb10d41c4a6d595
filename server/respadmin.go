package server

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The connection and server commands of the RESP listener: what Redis
// clients send on connect, for health and for help.

// respCompatVersion is the Redis version flakeid reports in HELLO and INFO:
// clients gate features on it, and flakeid answers the commands they use
// on connect as Redis 7.0 does. It is not flakeid's own version.
const respCompatVersion = "7.0.0"

// ping answers PING [message]: PONG (or the message) when the server is
// ready, else UNAVAILABLE with the reason /readyz gives, so that a health
// check over the protocol sees what a balancer sees.
func (c *respConn) ping(args [][]byte) error {
	if err := c.s.Ready(); err != nil {
		return respErrorf("UNAVAILABLE", "not ready: %v", err)
	}
	if len(args) == 2 {
		c.wr.WriteBulk(args[1])
		return nil
	}
	c.wr.WriteString("PONG")
	return nil
}

func (c *respConn) echo(args [][]byte) error {
	c.wr.WriteBulk(args[1])
	return nil
}

func (c *respConn) quitCmd([][]byte) error {
	c.wr.WriteString("OK")
	c.quit = true
	return nil
}

func (c *respConn) selectDB(args [][]byte) error {
	n, err := strconv.ParseInt(string(args[1]), 10, 64)
	switch {
	case err != nil:
		return respErrorf("ERR", "value is not an integer or out of range")
	case n != 0:
		return respErrorf("ERR", "DB index is out of range: flakeid has one keyspace, 0")
	}
	c.wr.WriteString("OK")
	return nil
}

// auth answers AUTH [user] token.
func (c *respConn) auth(args [][]byte) error {
	user, secret := "", args[1]
	if len(args) == 3 {
		user, secret = string(args[1]), args[2]
	}
	if err := c.login(user, secret); err != nil {
		return err
	}
	c.wr.WriteString("OK")
	return nil
}

// login checks a token (and, when given, a user name: "default" or the
// token's name) and makes it the connection's.
func (c *respConn) login(user string, secret []byte) error {
	if c.s.tokens == nil {
		return respErrorf("ERR", "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct? (flakeid runs without --tokens-file)")
	}
	tok := c.s.lookupToken(string(secret))
	if tok == nil || user != "" && user != "default" && user != tok.Name {
		return respErrorf("WRONGPASS", "invalid username-password pair or user is disabled.")
	}
	c.tok, c.authed = tok, true
	clear(c.tags)
	return nil
}

// hello answers HELLO [protover [AUTH user token] [SETNAME name]].
func (c *respConn) hello(args [][]byte) error {
	proto := c.proto
	if len(args) >= 2 {
		n, err := strconv.ParseInt(string(args[1]), 10, 64)
		if err != nil {
			return respErrorf("ERR", "Protocol version is not an integer or out of range")
		}
		if n != 2 && n != 3 {
			return respErrorf("NOPROTO", "unsupported protocol version")
		}
		proto = int(n)
	}
	var (
		user, name   string
		secret       []byte
		login, named bool
	)
	for i := 2; i < len(args); i++ {
		opt := strings.ToLower(string(args[i]))
		switch {
		case opt == "auth" && i+2 < len(args):
			user, secret, login = string(args[i+1]), args[i+2], true
			i += 2
		case opt == "setname" && i+1 < len(args):
			name, named = string(args[i+1]), true
			i++
		default:
			return respErrorf("ERR", "Syntax error in HELLO option %s", quoteArg(args[i]))
		}
	}
	if named {
		if err := validClientText("Client names", name); err != nil {
			return err
		}
	}
	if login {
		if err := c.login(user, secret); err != nil {
			return err
		}
	}
	if !c.authed {
		return respErrorf("NOAUTH", "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	if named {
		c.name = name
	}
	c.proto = proto
	c.publish()
	c.writeMap(7)
	c.wr.WriteBulkString("server")
	c.wr.WriteBulkString("flakeid")
	c.wr.WriteBulkString("version")
	c.wr.WriteBulkString(respCompatVersion)
	c.wr.WriteBulkString("proto")
	c.wr.WriteInt(c.proto)
	c.wr.WriteBulkString("id")
	c.wr.WriteInt64(c.id)
	c.wr.WriteBulkString("mode")
	c.wr.WriteBulkString("standalone")
	c.wr.WriteBulkString("role")
	c.wr.WriteBulkString("master")
	c.wr.WriteBulkString("modules")
	c.wr.WriteArray(0)
	return nil
}

// validClientText checks a client name or library name or version: Redis
// allows the printable ASCII characters but space.
func validClientText(what, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return respErrorf("ERR", "%s cannot contain spaces, newlines or special characters.", what)
		}
	}
	return nil
}

// client answers CLIENT subcommand […].
func (c *respConn) client(args [][]byte) error {
	sub := strings.ToLower(string(args[1]))
	want := map[string]int{"setname": 3, "getname": 2, "setinfo": 4, "id": 2, "info": 2, "list": 2, "no-evict": 3, "no-touch": 3, "help": 2}
	n, ok := want[sub]
	if !ok {
		return respErrorf("ERR", "unknown subcommand %s. Try CLIENT HELP.", quoteArg(args[1]))
	}
	if len(args) != n {
		return respErrorf("ERR", "wrong number of arguments for 'client|%s' command", sub)
	}
	switch sub {
	case "setname":
		name := string(args[2])
		if err := validClientText("Client names", name); err != nil {
			return err
		}
		c.name = name
		c.publish()
	case "getname":
		if c.name == "" {
			c.writeNull()
		} else {
			c.wr.WriteBulkString(c.name)
		}
		return nil
	case "setinfo":
		attr, v := strings.ToLower(string(args[2])), string(args[3])
		if attr != "lib-name" && attr != "lib-ver" {
			return respErrorf("ERR", "Unrecognized option %s", quoteArg(args[2]))
		}
		if err := validClientText(attr, v); err != nil {
			return err
		}
		if attr == "lib-name" {
			c.libName = v
		} else {
			c.libVer = v
		}
		c.publish()
	case "id":
		c.wr.WriteInt64(c.id)
		return nil
	case "info":
		c.wr.WriteBulkString(c.infoLine())
		return nil
	case "list":
		c.wr.WriteBulkString(c.l.list())
		return nil
	case "no-evict", "no-touch":
		if v := strings.ToLower(string(args[2])); v != "on" && v != "off" {
			return respErrorf("ERR", "syntax error")
		}
	case "help":
		c.writeLines([]string{
			"CLIENT <subcommand> [<arg> ...]. Subcommands are:",
			"SETNAME <name>, GETNAME, SETINFO LIB-NAME|LIB-VER <value>, ID, INFO, LIST,",
			"NO-EVICT ON|OFF, NO-TOUCH ON|OFF (accepted, no effect), HELP.",
		})
		return nil
	}
	c.wr.WriteString("OK")
	return nil
}

// infoLine is the connection as CLIENT INFO describes it.
func (c *respConn) infoLine() string {
	return c.describe(respShown{name: c.name, libName: c.libName, libVer: c.libVer, proto: c.proto})
}

// describe is the CLIENT INFO line of c with what its own goroutine set.
func (c *respConn) describe(sh respShown) string {
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s age=%d db=0 resp=%d lib-name=%s lib-ver=%s\n",
		c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), sh.name, int64(time.Since(c.created).Seconds()), sh.proto, sh.libName, sh.libVer)
}

// respShown is what other connections' CLIENT LIST shows of a connection
// that its own goroutine sets (name, library, protocol); published by
// publish, since those fields are the connection goroutine's alone.
type respShown struct {
	name, libName, libVer string
	proto                 int
}

// publish makes c's name, library and protocol visible to CLIENT LIST.
func (c *respConn) publish() {
	c.shown.Store(&respShown{name: c.name, libName: c.libName, libVer: c.libVer, proto: c.proto})
}

// list is CLIENT LIST: a CLIENT INFO line of every open connection, in the
// order they were opened.
func (l *respListener) list() string {
	l.mu.Lock()
	conns := make([]*respConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	slices.SortFunc(conns, func(a, b *respConn) int { return cmp.Compare(a.id, b.id) })
	var b strings.Builder
	for _, c := range conns {
		sh := c.shown.Load()
		if sh == nil {
			sh = &respShown{proto: 2}
		}
		b.WriteString(c.describe(*sh))
	}
	return b.String()
}

// writeLines writes lines as an array of status replies (Redis's HELP).
func (c *respConn) writeLines(lines []string) {
	c.wr.WriteArray(len(lines))
	for _, l := range lines {
		c.wr.WriteString(l)
	}
}

// info answers INFO [section …]: "server" and "clients" ("default", "all"
// and "everything" are both); other sections are empty, as in Redis.
func (c *respConn) info(args [][]byte) error {
	server, clients := len(args) == 1, len(args) == 1
	for _, a := range args[1:] {
		switch strings.ToLower(string(a)) {
		case "server":
			server = true
		case "clients":
			clients = true
		case "default", "all", "everything":
			server, clients = true, true
		}
	}
	var b bytes.Buffer
	if server {
		st := c.s.node.Status()
		ready, reason := 1, ""
		if err := c.s.Ready(); err != nil {
			ready, reason = 0, respText(err.Error())
		}
		_, port, _ := net.SplitHostPort(c.nc.LocalAddr().String())
		fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nflakeid:1\r\nos:%s\r\narch_bits:64\r\nprocess_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%d\r\n",
			respCompatVersion, runtime.GOOS, os.Getpid(), port, int64(time.Since(c.s.started).Seconds()))
		fmt.Fprintf(&b, "layout:%s\r\ndatacenter_id:%d\r\nworker_id:%d\r\nready:%d\r\n", c.s.node.Layout().String(), st.DatacenterID, st.WorkerID, ready)
		if reason != "" {
			fmt.Fprintf(&b, "not_ready_reason:%s\r\n", reason)
		}
		b.WriteString("\r\n")
	}
	if clients {
		fmt.Fprintf(&b, "# Clients\r\nconnected_clients:%d\r\nmaxclients:%d\r\n\r\n", c.l.open.Load(), c.s.cfg.RESP.MaxConns)
	}
	c.wr.WriteBulk(bytes.TrimSuffix(b.Bytes(), []byte("\r\n")))
	return nil
}

// command answers COMMAND [COUNT | LIST | INFO [name …] | DOCS [name …] |
// HELP] from the command table.
func (c *respConn) command(args [][]byte) error {
	t := c.s.resp
	if len(args) == 1 {
		c.wr.WriteArray(len(t.list))
		for _, cmd := range t.list {
			c.commandEntry(cmd)
		}
		return nil
	}
	sub := strings.ToLower(string(args[1]))
	named := func() []*respCommand { // the commands args[2:] name, nil for unknown ones
		if len(args) == 2 {
			return t.list
		}
		out := make([]*respCommand, 0, len(args)-2)
		for _, a := range args[2:] {
			out = append(out, t.lookup(a))
		}
		return out
	}
	switch sub {
	case "count":
		c.wr.WriteInt(len(t.list))
	case "list":
		c.wr.WriteArray(len(t.list))
		for _, cmd := range t.list {
			c.wr.WriteBulkString(cmd.name)
		}
	case "info":
		cmds := named()
		c.wr.WriteArray(len(cmds))
		for _, cmd := range cmds {
			if cmd == nil {
				c.writeNull()
			} else {
				c.commandEntry(cmd)
			}
		}
	case "docs":
		var cmds []*respCommand
		for _, cmd := range named() {
			if cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		c.writeMap(len(cmds))
		for _, cmd := range cmds {
			c.wr.WriteBulkString(cmd.name)
			c.writeMap(3)
			c.wr.WriteBulkString("summary")
			c.wr.WriteBulkString(cmd.summary)
			c.wr.WriteBulkString("since")
			c.wr.WriteBulkString("1.0.0")
			c.wr.WriteBulkString("group")
			c.wr.WriteBulkString(cmd.group)
		}
	case "help":
		c.writeLines([]string{
			"COMMAND <subcommand> [<arg> ...]. Subcommands are:",
			"(no subcommand): every command. COUNT, LIST, INFO [<name> ...], DOCS [<name> ...], HELP.",
		})
	default:
		return respErrorf("ERR", "unknown subcommand %s. Try COMMAND HELP.", quoteArg(args[1]))
	}
	return nil
}

// commandEntry writes a command as COMMAND INFO describes it: name, arity,
// flags, first key, last key, key step, ACL categories, tips, key
// specifications, subcommands.
func (c *respConn) commandEntry(cmd *respCommand) {
	c.wr.WriteArray(10)
	c.wr.WriteBulkString(cmd.name)
	c.wr.WriteInt(cmd.arity)
	c.wr.WriteArray(len(cmd.flags))
	for _, f := range cmd.flags {
		c.wr.WriteString(f)
	}
	if cmd.keys {
		c.wr.WriteInt(1)
		c.wr.WriteInt(1)
		c.wr.WriteInt(1)
	} else {
		c.wr.WriteInt(0)
		c.wr.WriteInt(0)
		c.wr.WriteInt(0)
	}
	c.wr.WriteArray(1)
	c.wr.WriteString("@" + cmd.group)
	c.wr.WriteArray(0)
	c.wr.WriteArray(0)
	c.wr.WriteArray(0)
}

// configParams are the parameters CONFIG GET answers: what tools ask
// before they start (redis-benchmark asks for save and appendonly), with
// the values that are true of flakeid: it keeps no Redis data (no
// snapshots, no append-only file), has one database, and the RESP port's
// limits.
func (c *respConn) configParams() [][2]string {
	rc := c.s.cfg.RESP
	_, port, _ := net.SplitHostPort(c.nc.LocalAddr().String())
	return [][2]string{
		{"save", ""},
		{"appendonly", "no"},
		{"databases", "1"},
		{"maxclients", strconv.Itoa(rc.MaxConns)},
		{"timeout", strconv.FormatInt(int64(rc.IdleTimeout/time.Second), 10)},
		{"port", port},
		{"proto-max-bulk-len", strconv.Itoa(rc.MaxRequest)},
	}
}

// config answers CONFIG GET pattern…: the parameters of configParams
// whose names match a pattern (a glob, case-insensitive, as Redis's), as
// a map; other parameters do not exist. Every other subcommand is
// refused.
func (c *respConn) config(args [][]byte) error {
	if strings.ToLower(string(args[1])) != "get" {
		return respErrorf("ERR", "CONFIG %s is not supported: flakeid is configured by its flags (see flakeid serve --help)", quoteArg(args[1]))
	}
	if len(args) < 3 {
		return respErrorf("ERR", "wrong number of arguments for 'config|get' command")
	}
	var found [][2]string
	for _, p := range c.configParams() {
		for _, pat := range args[2:] {
			if ok, _ := path.Match(strings.ToLower(string(pat)), p[0]); ok {
				found = append(found, p)
				break
			}
		}
	}
	c.writeMap(len(found))
	for _, p := range found {
		c.wr.WriteBulkString(p[0])
		c.wr.WriteBulkString(p[1])
	}
	return nil
}
