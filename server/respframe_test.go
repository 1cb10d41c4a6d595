package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tidwall/redcon"
)

// respValue is one RESP reply as the tests read it.
type respValue struct {
	// kind is the type byte: '+', '-', ':', '$', '*', or (RESP3) '%', '_',
	// ',', '#', '(', '=', '~'.
	kind  byte
	str   string      // a simple string, error, bulk, double, big number, verbatim text
	num   int64       // an integer
	null  bool        // $-1, *-1 or _
	elems []respValue // an array's or set's elements; a map's keys and values in turn
}

func (v respValue) isError() bool { return v.kind == '-' }

// String shows a reply compactly for failure messages.
func (v respValue) String() string {
	switch {
	case v.null:
		return "(nil)"
	case v.kind == ':':
		return strconv.FormatInt(v.num, 10)
	case v.kind == '*' || v.kind == '%' || v.kind == '~':
		parts := make([]string, 0, min(len(v.elems), 8))
		for i, e := range v.elems {
			if i == 8 {
				parts = append(parts, fmt.Sprintf("… %d more", len(v.elems)-8))
				break
			}
			parts = append(parts, e.String())
		}
		return string(v.kind) + "[" + strings.Join(parts, " ") + "]"
	}
	return string(v.kind) + strconv.Quote(v.str)
}

// fields reads a RESP2 flat array of pairs or a RESP3 map as a map.
func (v respValue) fields() (map[string]respValue, error) {
	if (v.kind != '*' && v.kind != '%') || len(v.elems)%2 != 0 {
		return nil, fmt.Errorf("%v is not a map or a flat array of pairs", v)
	}
	m := map[string]respValue{}
	for i := 0; i < len(v.elems); i += 2 {
		k := v.elems[i]
		if k.kind != '$' && k.kind != '+' {
			return nil, fmt.Errorf("key %v is not a string", k)
		}
		m[k.str] = v.elems[i+1]
	}
	return m, nil
}

// respCmd is a command in RESP's framing: an array of bulk strings.
func respCmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// errRESPSyntax marks a reply stream that is not valid RESP.
var errRESPSyntax = errors.New("invalid RESP")

// readRESP reads one reply of the protocol version proto (2 or 3) and
// checks its syntax strictly: every line ends in CRLF and holds no other CR
// or LF, integers and lengths are plain decimals, a bulk is followed by
// CRLF, and RESP3's types are refused in RESP2. It returns io.EOF when the
// stream ends cleanly before a reply, io.ErrUnexpectedEOF within one.
func readRESP(br *bufio.Reader, proto int) (respValue, error) {
	return readRESPDepth(br, proto, 0, true)
}

func readRESPDepth(br *bufio.Reader, proto, depth int, top bool) (respValue, error) {
	bad := func(format string, args ...any) (respValue, error) {
		return respValue{}, fmt.Errorf("%w: "+format, append([]any{errRESPSyntax}, args...)...)
	}
	if depth > 32 {
		return bad("nested more than 32 deep")
	}
	line, err := br.ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			if top && line == "" {
				return respValue{}, io.EOF
			}
			return respValue{}, io.ErrUnexpectedEOF
		}
		return respValue{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return bad("line %q is not a type byte and text ended by CRLF", line)
	}
	kind, text := line[0], line[1:len(line)-2]
	if strings.ContainsAny(text, "\r\n") {
		return bad("line %q holds a CR or LF", line)
	}
	number := func() (int64, bool) {
		t := strings.TrimPrefix(text, "-")
		if t == "" || strings.Trim(t, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(text, 10, 64)
		return n, err == nil
	}
	v := respValue{kind: kind}
	switch kind {
	case '+', '-':
		v.str = text
		return v, nil
	case ':':
		n, ok := number()
		if !ok {
			return bad("integer %q", text)
		}
		v.num = n
		return v, nil
	case '$', '=':
		n, ok := number()
		switch {
		case !ok || n < -1 || n > 256<<20:
			return bad("bulk length %q", text)
		case n == -1 && kind == '$':
			v.null = true
			return v, nil
		case n == -1 || kind == '=' && proto != 3:
			return bad("%q in RESP%d", line, proto)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return respValue{}, io.ErrUnexpectedEOF
			}
			return respValue{}, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return bad("bulk of %d bytes not followed by CRLF: %q", n, b[n:])
		}
		v.str = string(b[:n])
		if kind == '=' && (n < 4 || v.str[3] != ':') {
			return bad("verbatim string %q without its format", v.str)
		}
		return v, nil
	case '*', '%', '~':
		if kind != '*' && proto != 3 {
			return bad("%q in RESP%d", line, proto)
		}
		n, ok := number()
		switch {
		case !ok || n < -1 || n > 1<<24:
			return bad("aggregate length %q", text)
		case n == -1 && kind == '*':
			v.null = true
			return v, nil
		case n == -1:
			return bad("aggregate length %q", text)
		}
		if kind == '%' {
			n *= 2
		}
		v.elems = make([]respValue, 0, min(n, 1024))
		for range n {
			e, err := readRESPDepth(br, proto, depth+1, false)
			if err != nil {
				return respValue{}, err
			}
			v.elems = append(v.elems, e)
		}
		return v, nil
	case '_', ',', '#', '(':
		if proto != 3 {
			return bad("%q in RESP%d", line, proto)
		}
		switch kind {
		case '_':
			if text != "" {
				return bad("null %q", line)
			}
			v.null = true
		case ',':
			if _, err := strconv.ParseFloat(text, 64); err != nil && text != "inf" && text != "-inf" && text != "nan" {
				return bad("double %q", text)
			}
		case '#':
			if text != "t" && text != "f" {
				return bad("boolean %q", text)
			}
		case '(':
			if _, ok := number(); !ok && strings.Trim(strings.TrimPrefix(text, "-"), "0123456789") != "" {
				return bad("big number %q", text)
			}
		}
		v.str = text
		return v, nil
	}
	return bad("unknown type byte %q in line %q", kind, line)
}

// respErrorPrefixes are the error prefixes the spec allows (EXECABORT: EXEC
// of a transaction in which a command was refused).
var respErrorPrefixes = map[string]bool{"ERR": true, "NOAUTH": true, "WRONGPASS": true, "NOPERM": true,
	"UNAVAILABLE": true, "EXHAUSTED": true, "NOPROTO": true, "EXECABORT": true}

// errorLine matches an error reply's text: an upper-case prefix, then
// nothing or a space and the message.
var errorLine = regexp.MustCompile(`^([A-Z]+)( |$)`)

// checkErrorReply checks an error reply's form: one line (readRESP checked
// it has no CR or LF) that starts with one of the spec's prefixes.
func checkErrorReply(v respValue) error {
	m := errorLine.FindStringSubmatch(v.str)
	if m == nil || !respErrorPrefixes[m[1]] {
		return fmt.Errorf("error reply %q does not start with ERR, NOAUTH, WRONGPASS, NOPERM, UNAVAILABLE, EXHAUSTED, NOPROTO or EXECABORT", v.str)
	}
	return nil
}

// checkErrors checks every error reply in v, nested ones (EXEC's) too.
func checkErrors(v respValue) error {
	if v.isError() {
		return checkErrorReply(v)
	}
	for _, e := range v.elems {
		if err := checkErrors(e); err != nil {
			return err
		}
	}
	return nil
}

// asciiLower is a command name in lower case, as the server's lookup
// folds it (ASCII letters only).
func asciiLower(b []byte) string {
	out := make([]byte, len(b))
	for i, x := range b {
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		out[i] = x
	}
	return string(out)
}

// isProtocolError reports whether a reply is the answer to a framing error.
func isProtocolError(v respValue) bool {
	return v.isError() && strings.HasPrefix(v.str, "ERR Protocol error")
}

// splitCommands reads the whole commands at the start of a client's byte
// stream, framed as a RESP server frames them: "*N\r\n" and N bulks
// "$L\r\n" + L bytes + "\r\n" (plain decimal lengths; *0 and *-N are
// empty commands, skipped as Redis does), or, for a command that does not
// start with '*', an inline line up to '\n' (split into arguments as redcon
// does; a blank line is no command). It stops at the first incomplete
// command, or at a framing error (bad). It is at least as lenient as the
// server: it knows none of its limits.
func splitCommands(in []byte) (cmds [][][]byte, bad bool) {
	p := 0
	// header reads "<c>digits\r\n" at p: the number and the offset after it.
	header := func(c byte, limit int) (n, next int, ok, complete bool) {
		if p >= len(in) {
			return 0, 0, false, false
		}
		if in[p] != c {
			return 0, 0, false, true
		}
		i := p + 1
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			n = n*10 + int(in[i]-'0')
			if n > limit {
				return 0, 0, false, true
			}
			i++
		}
		switch {
		case i+1 >= len(in) && (i == len(in) || in[i] == '\r'):
			return 0, 0, false, false
		case i == p+1 || in[i] != '\r' || in[i+1] != '\n':
			return 0, 0, false, true
		}
		return n, i + 2, true, true
	}
	for p < len(in) {
		if in[p] != '*' {
			j := bytes.IndexByte(in[p:], '\n')
			if j < 0 {
				return cmds, false
			}
			if len(bytes.TrimSpace(in[p:p+j])) > 0 {
				cmd, err := redcon.Parse(in[p : p+j+1])
				if err != nil {
					return cmds, true // unbalanced quotes
				}
				cmds = append(cmds, cmd.Args)
			}
			p += j + 1
			continue
		}
		if p+1 < len(in) && in[p+1] == '-' { // *-N: a null array, skipped
			p++
			_, next, ok, complete := header('-', 1<<40)
			switch {
			case !complete:
				return cmds, false
			case !ok:
				return cmds, true
			}
			p = next
			continue
		}
		n, next, ok, complete := header('*', 1<<30)
		switch {
		case !complete:
			return cmds, false
		case !ok:
			return cmds, true
		case n == 0:
			p = next
			continue
		}
		save := p
		p = next
		args := make([][]byte, 0, min(n, 64))
		for range n {
			l, next, ok, complete := header('$', 1<<30)
			if !complete {
				p = save
				return cmds, false
			}
			if !ok {
				return cmds, true
			}
			switch {
			case next+l+2 > len(in):
				if next+l < len(in) && in[next+l] != '\r' || next+l+1 < len(in) && in[next+l+1] != '\n' {
					return cmds, true
				}
				p = save
				return cmds, false
			case in[next+l] != '\r' || in[next+l+1] != '\n':
				return cmds, true
			}
			args = append(args, in[next:next+l])
			p = next + l + 2
		}
		cmds = append(cmds, args)
	}
	return cmds, false
}

// TestFrameSplitCommands checks the tests' own framing reader.
func TestFrameSplitCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string // each command's arguments joined by "|"
		bad  bool
	}{
		{"PING\r\n", []string{"PING"}, false},
		{"PING\r\n\r\n  \r\nECHO 'a b'\nINCR", []string{"PING", "ECHO|a b"}, false},
		{"*2\r\n$4\r\nINCR\r\n$6\r\norders\r\n*1\r\n$4\r\nPI", []string{"INCR|orders"}, false},
		{"*0\r\nPING\r\n*-1\r\n*-\r\n", []string{"PING"}, true},
		{"*-1\r", nil, false},
		{"*1\r\n:5\r\n", nil, true},
		{"*1\r\n$3\r\nabcde", nil, true},
		{"*1\r\n$3\r\nab", nil, false},
		{"*1\r\n$0\r\n\r\n", []string{""}, false},
		{"\"x\r\n", nil, true},
		{"*1\r", nil, false},
		{"*1\rx", nil, true},
	} {
		cmds, bad := splitCommands([]byte(tc.in))
		var got []string
		for _, c := range cmds {
			got = append(got, string(bytes.Join(c, []byte("|"))))
		}
		if bad != tc.bad || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("splitCommands(%q) = %q, bad %v; want %q, bad %v", tc.in, got, bad, tc.want, tc.bad)
		}
	}
}

// chunkConn is a connection whose reads deliver a stream in the given
// pieces (a piece longer than the reader's room over several reads), then
// EOF.
type chunkConn struct {
	pieceConn
	pieces [][]byte
}

// pieceConn is the rest of a net.Conn for readers that only Read.
type pieceConn struct{ net.Conn }

func (c *chunkConn) Read(p []byte) (int, error) {
	for len(c.pieces) > 0 && len(c.pieces[0]) == 0 {
		c.pieces = c.pieces[1:]
	}
	if len(c.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.pieces[0] = c.pieces[0][n:]
	return n, nil
}

func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }

// readResult is what a respReader made of a byte stream: the commands it
// parsed, in order, and the violation that ended it ("" for none).
type readResult struct {
	commands []string // each command's arguments, quoted
	err      string
}

// readStream runs a fresh respReader, as a connection runs it (next until
// it has no whole command, then fill), over stream delivered in pieces cut
// at cuts.
func readStream(maxArgs, maxRequest int, stream []byte, cuts []int) readResult {
	var pieces [][]byte
	prev := 0
	for _, cut := range append(cuts, len(stream)) {
		pieces = append(pieces, stream[prev:cut])
		prev = cut
	}
	r := respReader{conn: &chunkConn{pieces: pieces}, stopped: new(atomic.Bool), maxArgs: maxArgs, maxRequest: maxRequest,
		readTimeout: time.Second, buf: make([]byte, min(respReadBuf, maxRequest))}
	var res readResult
	for range 4*len(stream) + 16 {
		args, err := r.next()
		switch {
		case err != nil:
			res.err = err.Error()
			return res
		case args != nil:
			res.commands = append(res.commands, fmt.Sprintf("%q", args))
			continue
		}
		if err := r.fill(); err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err.Error()
			}
			return res
		}
	}
	res.err = "no progress"
	return res
}

// TestFrameReader checks respReader on its own, fed from a connection in
// pieces: framing errors and limits are found at the header that breaks
// them (a 512 MB bulk, a million arguments), the commands before a
// violation are parsed, and the result does not depend on how reads split
// the stream — fed whole, in two pieces cut at every position, in three
// pieces (short streams), and a byte at a time.
func TestFrameReader(t *testing.T) {
	t.Parallel()
	const maxArgs, maxRequest = 4, 1024
	bulk := func(n int) string { return "$" + strconv.Itoa(n) + "\r\n" + strings.Repeat("x", n) + "\r\n" }
	cmd := respCmd
	// A command of exactly maxRequest bytes: "*2\r\n$4\r\nECHO\r\n$1001\r\n…\r\n".
	exact := "*2\r\n$4\r\nECHO\r\n"
	exact += bulk(maxRequest - len(exact) - len("$1001\r\n") - 2)
	if len(exact) != maxRequest {
		t.Fatalf("the exact command is %d bytes", len(exact))
	}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name     string
		in       string
		err      string // a substring of the violation, "" for none
		commands int    // commands parsed
	}{
		{"empty", "", "", 0},
		{"inline", "PING\r\n", "", 1},
		{"inline bare LF", "PING\n", "", 1},
		{"inline quotes", "ECHO \"a b\" 'c'\r\n", "", 1},
		{"blank lines", "\r\n\n   \r\nPING\r\n", "", 1},
		{"resp", cmd("PING"), "", 1},
		{"pipeline", cmd("INCR", "orders") + "PING\r\n" + cmd("ID.NEXT", "orders", "5") + cmd("ECHO", ""), "", 4},
		{"long pipeline", strings.Repeat(cmd("INCR", "orders")+"PING\r\n", 100), "", 200},
		{"partial", cmd("INCR", "orders") + "*2\r\n$4\r\nIN", "", 1},
		{"binary bulk", cmd("ECHO", "\r\n*0\r\n$-1\r\n"), "", 1},
		{"leading zeros", "*01\r\n$004\r\nPING\r\n", "", 1},
		{"max args", cmd("a", "b", "c", "d"), "", 1},
		{"max args inline", "a b c d\r\n", "", 1},
		{"max request", exact, "", 1},
		{"max request twice", exact + exact, "", 2},
		{"inline at max request", strings.Repeat("a", maxRequest-2) + "\r\n", "", 1},
		{"bulk not followed by CRLF", "*1\r\n$3\r\nabcde", "not followed by CRLF", 0},
		{"*0 skipped", "PING\r\n*0\r\nPING\r\n", "", 2},
		{"*-1 skipped", "*-1\r\n*-01\r\nPING\r\n*-1\r\n", "", 1},
		{"*- alone", "*-\r\n", "invalid multibulk length", 0},
		{"*-x", "*-x\r\n", "invalid multibulk length", 0},
		{"* alone", "*\r\n", "invalid multibulk length", 0},
		{"*+1", "*+1\r\n$4\r\nPING\r\n", "invalid multibulk length", 0},
		{"array CR without LF", "*1\rx", "invalid multibulk length", 0},
		{"integer instead of bulk", "*1\r\n:5\r\n", "expected '$', got ':'", 0},
		{"bad bulk length", "*1\r\n$abc\r\n", "invalid bulk length", 0},
		{"negative bulk length", "*1\r\n$-1\r\n", "invalid bulk length", 0},
		{"bulk CR without LF", "*1\r\n$4\rPING\r\n", "invalid bulk length", 0},
		{"empty bulk length", "*1\r\n$\r\n", "invalid bulk length", 0},
		{"512 MB bulk", "*2\r\n$536870912\r\n", "bulk of more than 1024 bytes", 0},
		{"huge bulk length", "*1\r\n$99999999999999999999999999999\r\n", "bulk of more than 1024 bytes", 0},
		{"million args", "*1000000\r\n", "too many arguments", 0},
		{"huge arg count", "*99999999999999999999999999\r\n", "too many arguments", 0},
		{"one arg too many", cmd("a", "b", "c", "d", "e"), "too many arguments", 0},
		{"one arg too many inline", "PING\r\na b c d e\r\n", "too many arguments", 1},
		{"bulk over max request", cmd("ECHO") + "*2\r\n$4\r\nECHO\r\n" + bulk(maxRequest+1), "bulk of more than 1024 bytes", 1},
		{"command over max request", cmd("PING") + "*2\r\n$4\r\nECHO\r\n" + bulk(1010), "more than 1024 bytes", 1},
		{"many args over max request", cmd("a") + cmd(long, long, long, long), "more than 1024 bytes", 1},
		{"inline over max request", "PING\r\n" + strings.Repeat("a", maxRequest-1) + "\r\n", "more than 1024 bytes", 1},
		{"inline without end over max request", strings.Repeat("a", maxRequest+1), "more than 1024 bytes", 0},
		{"unbalanced quotes", "PING\r\nECHO \"abc\r\n", "unbalanced quotes", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			whole := readStream(maxArgs, maxRequest, in, nil)
			if tc.err == "" && whole.err != "" || !strings.Contains(whole.err, tc.err) {
				t.Fatalf("reading %q: violation %q, want one naming %q", clipInput(tc.in), whole.err, tc.err)
			}
			if tc.err != "" && !strings.HasPrefix(whole.err, "Protocol error: ") {
				t.Fatalf("reading %q: violation %q does not start %q", clipInput(tc.in), whole.err, "Protocol error: ")
			}
			if len(whole.commands) != tc.commands {
				t.Fatalf("reading %q: %d commands %q, want %d", clipInput(tc.in), len(whole.commands), whole.commands, tc.commands)
			}
			if want, _ := splitCommands(in); tc.err == "" && len(want) != len(whole.commands) {
				t.Fatalf("reading %q: %d commands, the tests' framing reader finds %d", clipInput(tc.in), len(whole.commands), len(want))
			}
			check := func(how string, cuts []int) {
				t.Helper()
				if got := readStream(maxArgs, maxRequest, in, cuts); fmt.Sprint(got) != fmt.Sprint(whole) {
					t.Fatalf("reading %q %s: %q; fed whole: %q", clipInput(tc.in), how, got, whole)
				}
			}
			for i := 0; i <= len(in); i++ {
				check(fmt.Sprintf("cut at %d", i), []int{i})
			}
			if len(in) <= 64 {
				for i := 0; i <= len(in); i++ {
					for j := i; j <= len(in); j++ {
						check(fmt.Sprintf("cut at %d and %d", i, j), []int{i, j})
					}
				}
			}
			bytewise := make([]int, len(in))
			for i := range bytewise {
				bytewise[i] = i
			}
			check("a byte at a time", bytewise)
		})
	}
}

// clipInput shortens a test input for a message.
func clipInput(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// pipeConn is the server's end of an in-memory connection: it reads what
// the test writes to one pipe and writes to another that the test reads.
// Unlike net.Pipe, the test can end its input (EOF) and still read the
// replies until the server closes.
type pipeConn struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeConn) Close() error                { p.r.Close(); p.w.Close(); return nil }
func (p *pipeConn) LocalAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379} }
func (p *pipeConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (p *pipeConn) SetDeadline(time.Time) error      { return nil }
func (p *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }

// serveBytes runs one connection of the real serve loop, built as
// ServeRESP builds it, on input, and returns all it wrote back.
func serveBytes(t testing.TB, s *Server, input []byte) []byte {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	l := &respListener{s: s, conns: map[*respConn]struct{}{}}
	c := l.add(context.Background(), &pipeConn{r: inR, w: outW})
	served := make(chan struct{})
	go func() { defer close(served); c.serve() }()
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		inW.Write(input) // fails once the server closes: it stopped reading
		inW.Close()
	}()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() { b, err := io.ReadAll(outR); got <- result{b, err} }()
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		inR.Close()
		outR.Close()
		<-got
		<-served
		<-wrote
		t.Fatalf("the connection still runs 20 s after its input %q ended", clipInput(string(input)))
	}
	<-served
	<-wrote
	l.wg.Wait()
	if r.err != nil {
		t.Fatalf("reading the replies: %v", r.err)
	}
	return r.b
}

// issuedTotal sums flakeid_ids_issued_total over every kind and tag: the
// IDs the server has handed out.
func issuedTotal(t testing.TB, s *Server) float64 {
	t.Helper()
	return metricSum(t, s.metrics.issued)
}

// metricSum sums the values of every series of a counter or gauge
// collector.
func metricSum(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			sum += d.Counter.GetValue()
		case d.Gauge != nil:
			sum += d.Gauge.GetValue()
		}
	}
	return sum
}

// FuzzRESP feeds arbitrary bytes to one connection of the real serve loop
// (a server with MaxArgs 16, MaxRequest 1024, MaxCount 100, no tokens, tag
// "orders") and checks: no panic; the reply stream is valid RESP (strict
// RESP2 unless the input holds a HELLO, which may switch to RESP3, also
// inside a transaction); there are no more replies than whole
// commands, besides a protocol error, which comes last; every error reply
// is one line starting with a spec prefix; and the IDs handed out are
// exactly those in the replies of INCR and ID.NEXT, so an error reply took
// none (replies in EXEC's array counted against the commands queued).
func FuzzRESP(f *testing.F) {
	e := newRESPEnv(f, func(c *Config) {
		// MaxCount 100 keeps an input of many ID.NEXT cheap.
		c.MaxCount, c.StreamBatch = 100, 100
		c.RESP.MaxArgs, c.RESP.MaxRequest = 16, 1024
	}, nil)
	cmd := respCmd
	for _, seed := range []string{
		"PING\r\n",
		cmd("PING"),
		cmd("INCR", "orders"),
		cmd("INCR", "snowflake") + cmd("INCR", "SNOWFLAKE:x"),
		cmd("ID.NEXT", "orders", "5") + "ID.NEXT snowflake 3\r\n",
		"ID.DECODE 1234567890123\r\nID.DECODE garbage!\r\nID.DECODE 1 plain\r\nID.DECODE 1 masked\r\n",
		"HELLO 3\r\nID.DECODE 1234567890123\r\nCLIENT GETNAME\r\nCOMMAND INFO incr nosuch\r\nHELLO 2\r\nPING\r\n",
		"HELLO 3 SETNAME x\r\nCOMMAND DOCS\r\nHELLO 4\r\nHELLO x\r\n",
		"INCRBY orders 5\r\nDECR orders\r\nDECRBY x 1\r\nINCRBYFLOAT orders 1.5\r\n",
		"ID.NEXT orders 0\r\nID.NEXT orders -1\r\nID.NEXT orders abc\r\nID.NEXT orders 101\r\nID.NEXT orders 100\r\nID.NEXT snowflake 99999999999999999999\r\n",
		"INCR a/b\r\nINCR nope\r\nINCR\r\nINCR a b\r\nFLUSHALL\r\n" + cmd("FOO", "a\r\nb", "\x00\xff"),
		"*2\r\n$536870912\r\n",
		"*1000000\r\n",
		"*0\r\n", "*-1\r\n", "*1\r\n:5\r\n", "*1\r\n$abc\r\n", "*1\r\n$3\r\nabcde",
		"PING\r\n" + cmd("INCR", "orders") + "*0\r\nPING\r\n",
		"PING\r\n*2\r\n$4\r\nECHO\r\n$1025\r\n" + strings.Repeat("x", 1025) + "\r\n",
		strings.Repeat("a", 1100) + "\r\n",
		"*17\r\n" + strings.Repeat("$1\r\na\r\n", 17),
		"POST / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"QUIT\r\nPING\r\n",
		"\"unbalanced\r\nPING\r\n",
		"ECHO \"a b\" 'c'\r\nECHO \"\\x41\"\r\n",
		"CLIENT SETNAME x\r\nCLIENT GETNAME\r\nCLIENT INFO\r\nCLIENT ID\r\nCLIENT SETINFO LIB-NAME y\r\nCLIENT NO-EVICT on\r\nCLIENT HELP\r\nCLIENT KILL\r\n",
		"INFO\r\nINFO server\r\nINFO clients\r\nCOMMAND\r\nCOMMAND COUNT\r\nCOMMAND LIST\r\nCOMMAND HELP\r\nCOMMAND X\r\n",
		"SELECT 0\r\nSELECT 1\r\nSELECT x\r\nECHO hi\r\nAUTH x\r\nAUTH a b\r\nPING a\r\nPING a b\r\n",
		strings.Repeat(cmd("INCR", "orders")+"ID.NEXT snowflake 2\r\n", 50),
		"*2\r\n$4\r\nINCR\r\n",
		"*0\r\n*-1\r\nPING\r\n",
		"MULTI\r\nINCR orders\r\nID.NEXT snowflake 2\r\nINCR a/b\r\nPING\r\nEXEC\r\n",
		"MULTI\r\nINCR orders\r\nFOO\r\nEXEC\r\nMULTI\r\nINCR orders\r\nDISCARD\r\nEXEC\r\nMULTI\r\nMULTI\r\nEXEC\r\n",
		"MULTI\r\nHELLO 3\r\nCLIENT GETNAME\r\nINCRBY orders 1\r\nEXEC\r\nINCRBY orders 2\r\n",
		"CONFIG GET maxmemory\r\nCONFIG SET x y\r\nCONFIG\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		before := issuedTotal(t, e.srv)
		out := serveBytes(t, e.srv, input)
		taken := issuedTotal(t, e.srv) - before
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("input %q\nreplies %q\n%s", input, out, fmt.Sprintf(format, args...))
		}

		cmds, _ := splitCommands(input)
		// Strict RESP2, unless a HELLO may have switched to RESP3 (also
		// one queued in a transaction, which switches in EXEC's array).
		proto := 2
		if bytes.Contains(bytes.ToLower(input), []byte("hello")) {
			proto = 3
		}
		br := bufio.NewReader(bytes.NewReader(out))
		delivered := 0
		// ids counts the IDs a reply to a command named name hands out.
		ids := func(name string, v respValue) {
			switch {
			case v.isError():
			case name == "incr" || name == "incrby": // INCRBY key 1 is INCR
				if v.kind != ':' {
					fail("%s answered %v", name, v)
				}
				delivered++
			case name == "id.next":
				if v.kind != '*' {
					fail("ID.NEXT answered %v", v)
				}
				delivered += len(v.elems)
			}
		}
		var (
			replies []respValue
			inTx    bool
			queued  []string // the names of the commands queued since MULTI
		)
		for {
			k := len(replies)
			v, err := readRESP(br, proto)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fail("reply %d: %v", k+1, err)
			}
			if k > 0 && isProtocolError(replies[k-1]) {
				fail("reply %v after the protocol error %v", v, replies[k-1])
			}
			replies = append(replies, v)
			if err := checkErrors(v); err != nil {
				fail("reply %d: %v", k+1, err)
			}
			if isProtocolError(v) {
				continue
			}
			if k >= len(cmds) {
				fail("reply %d (%v), but the input holds only %d whole commands", k+1, v, len(cmds))
			}
			switch name := asciiLower(cmds[k][0]); {
			case name == "multi":
				if !v.isError() {
					inTx, queued = true, nil
				}
			case name == "discard":
				if !v.isError() {
					inTx, queued = false, nil
				}
			case name == "exec":
				if v.kind == '*' {
					if !inTx || len(v.elems) != len(queued) {
						fail("EXEC answered %d replies, for %d commands queued (in a transaction: %v)", len(v.elems), len(queued), inTx)
					}
					for i, el := range v.elems {
						ids(queued[i], el)
					}
				}
				inTx, queued = false, nil
			case inTx:
				switch {
				case v.kind == '+' && v.str == "QUEUED":
					queued = append(queued, name)
				case !v.isError():
					fail("%s in a transaction answered %v, want QUEUED or an error", name, v)
				}
			default:
				ids(name, v)
			}
		}
		if taken != float64(delivered) {
			fail("%v IDs taken, %d handed out in the replies", taken, delivered)
		}
	})
}
