package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// respProtocolError is a framing error of a RESP client: answered
// "-ERR Protocol error: …", then the connection is closed (as Redis does).
type respProtocolError struct{ msg string }

func (e *respProtocolError) Error() string { return "Protocol error: " + e.msg }

func protocolErrorf(format string, args ...any) error {
	return &respProtocolError{msg: fmt.Sprintf(format, args...)}
}

// respReader reads the commands of a RESP connection: arrays of bulk
// strings (what every client library sends), and inline commands (what a
// person types over telnet; split by redcon, quotes and all).
//
// It holds the client to the limits before buffering anything: a command
// has at most maxArgs arguments and maxRequest bytes, framing included, and
// its buffer never grows past maxRequest. Each header is checked as soon as
// it arrives, so a 512 MB bulk length or a million-element array is refused
// on its header alone, without waiting for (or keeping) what would follow.
// Commands are parsed in place: the arguments next returns point into the
// buffer, so the hot path allocates nothing.
//
// It also sets the read deadline: between commands, idle (0: none); once a
// command has started, the rest of it must arrive within readTimeout of the
// read that found it incomplete.
type respReader struct {
	conn        net.Conn
	stopped     *atomic.Bool // the listener stops: read no more
	maxArgs     int
	maxRequest  int
	readTimeout time.Duration
	idle        time.Duration

	buf        []byte
	start, end int      // buf[start:end] is read and not yet parsed
	args       [][]byte // the last command's arguments, reused
	dl, mid    bool     // a read deadline is set; it is a command's
	dlEnd      int64    // unix nanoseconds of the idle deadline set
	consumed   int64    // bytes parsed so far: where the command under way starts
	midAt      int64    // the command whose deadline is set, by where it starts
}

// respReadBuf is the size a reader's buffer starts at; it grows (up to
// maxRequest) only for a longer command.
const respReadBuf = 4096

// next parses the next command in the buffer. It returns its arguments
// (valid until the next call of next or fill), nil when the buffer holds no
// whole command, or the violation of the protocol or a limit that the
// buffered bytes show.
func (r *respReader) next() ([][]byte, error) {
	for r.start < r.end {
		b := r.buf[r.start:r.end]
		if b[0] != '*' {
			args, n, err := r.inline(b)
			if err != nil || n == 0 {
				return nil, err
			}
			r.start += n
			r.consumed += int64(n)
			if args == nil {
				continue // an empty line
			}
			return args, nil
		}
		args, n, err := r.array(b)
		if err != nil || n == 0 {
			return nil, err
		}
		r.start += n
		r.consumed += int64(n)
		if args == nil {
			continue // *0 or *-1: an empty command, skipped as Redis does
		}
		return args, nil
	}
	return nil, nil
}

// array parses a command sent as an array of bulk strings at the start of
// b. It returns the arguments and the command's length, or n = 0 when b
// holds only part of it.
func (r *respReader) array(b []byte) (args [][]byte, n int, err error) {
	if len(b) > 1 && b[1] == '-' { // *-1: a null array, an empty command
		_, i, err := respLength(b, 2, 1<<31, "multibulk")
		if err != nil || i == 0 {
			return nil, 0, r.partial(b, err)
		}
		return nil, i, nil
	}
	count, i, err := respLength(b, 1, r.maxArgs, "multibulk")
	if err != nil || i == 0 {
		return nil, 0, r.partial(b, err)
	}
	if count == 0 {
		return nil, i, nil
	}
	args = r.args[:0]
	for range count {
		if i >= len(b) {
			return nil, 0, r.partial(b, nil)
		}
		if b[i] != '$' {
			return nil, 0, protocolErrorf("expected '$', got %s", strconv.QuoteRune(rune(b[i])))
		}
		size, j, err := respLength(b, i+1, r.maxRequest, "bulk")
		if err != nil || j == 0 {
			return nil, 0, r.partial(b, err)
		}
		if j+size+2 > len(b) {
			return nil, 0, r.partial(b, nil)
		}
		if b[j+size] != '\r' || b[j+size+1] != '\n' {
			return nil, 0, protocolErrorf("a bulk of %d bytes is not followed by CRLF", size)
		}
		args = append(args, b[j:j+size:j+size])
		i = j + size + 2
		if i > r.maxRequest {
			return nil, 0, r.tooLong()
		}
	}
	r.args = args
	return args, i, nil
}

// inline parses an inline command (a line) at the start of b: its
// arguments (nil for an empty line) and length, or n = 0 when the line has
// not ended yet.
func (r *respReader) inline(b []byte) (args [][]byte, n int, err error) {
	end := bytes.IndexByte(b, '\n')
	if end < 0 {
		return nil, 0, nil // fill refuses a line longer than the buffer may grow
	}
	line := b[:end+1]
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, end + 1, nil
	}
	cmd, err := redcon.Parse(line)
	switch {
	case err != nil: // redcon's message starts "Protocol error: " too
		return nil, 0, protocolErrorf("%s", strings.TrimPrefix(err.Error(), "Protocol error: "))
	case len(cmd.Args) == 0:
		return nil, end + 1, nil
	case len(cmd.Args) > r.maxArgs:
		return nil, 0, protocolErrorf("too many arguments: a command of more than %d (resp max args)", r.maxArgs)
	}
	return cmd.Args, end + 1, nil
}

// partial is what a command that b holds only part of means: err, if its
// headers broke a rule, else nil (wait for more), unless it is already
// longer than maxRequest.
func (r *respReader) partial(b []byte, err error) error {
	if err == nil && len(b) > r.maxRequest {
		return r.tooLong()
	}
	return err
}

func (r *respReader) tooLong() error {
	return protocolErrorf("command of more than %d bytes (resp max request)", r.maxRequest)
}

// respLength reads the length of a header that starts at b[i] (after its
// '*' or '$'): digits, CR, LF. It returns the length and the index after the
// LF, or j = 0 when the header has not ended yet; a length over max or a
// malformed header is an error, as soon as it shows.
func respLength(b []byte, i, max int, what string) (n, j int, err error) {
	start := i
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > max {
			if what == "multibulk" {
				return 0, 0, protocolErrorf("too many arguments: a command of more than %d (resp max args)", max)
			}
			return 0, 0, protocolErrorf("bulk of more than %d bytes (resp max request)", max)
		}
	}
	switch {
	case i == len(b):
		return 0, 0, nil
	case i == start || b[i] != '\r':
		return 0, 0, protocolErrorf("invalid %s length", what)
	case i+1 == len(b):
		return 0, 0, nil
	case b[i+1] != '\n':
		return 0, 0, protocolErrorf("invalid %s length", what)
	}
	return n, i + 2, nil
}

// fill reads more of the connection into the buffer, making room first:
// it moves a partial command to the front, and grows the buffer (up to
// maxRequest) when that command fills it.
func (r *respReader) fill() error {
	if r.start == r.end {
		r.start, r.end = 0, 0
	} else if r.start > 0 && r.end == len(r.buf) {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		if len(r.buf) >= r.maxRequest {
			return r.tooLong()
		}
		nb := make([]byte, min(2*len(r.buf), r.maxRequest))
		r.end = copy(nb, r.buf[r.start:r.end])
		r.start, r.buf = 0, nb
	}
	if err := r.setDeadline(); err != nil {
		return err
	}
	// After the deadline is set: stopReading sets the flag, then a
	// deadline in the past, so a read that misses the flag is woken.
	if r.stopped.Load() {
		return io.EOF
	}
	n, err := r.conn.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		return nil // an error comes again with the next read
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// setDeadline moves the read deadline to what the state asks: a command
// under way (part of it is buffered) gets readTimeout from now, once; an
// idle connection gets idle from now (moved at most every idle/8), or none.
func (r *respReader) setDeadline() error {
	if r.start < r.end {
		if r.dl && r.mid && r.midAt == r.consumed {
			return nil
		}
		r.dl, r.mid, r.midAt = true, true, r.consumed
		return r.conn.SetReadDeadline(time.Now().Add(r.readTimeout))
	}
	if r.idle == 0 {
		if !r.dl {
			return nil
		}
		r.dl, r.mid = false, false
		return r.conn.SetReadDeadline(time.Time{})
	}
	end := time.Now().Add(r.idle).UnixNano()
	if r.dl && !r.mid && end-r.dlEnd < int64(r.idle/8) {
		return nil
	}
	r.dl, r.mid, r.dlEnd = true, false, end
	return r.conn.SetReadDeadline(time.Unix(0, end))
}
