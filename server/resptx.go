package server

// MULTI, EXEC and DISCARD: client libraries send their pipelines as
// transactions by default (redis-py's pipeline(), Jedis's multi()), so
// the listener queues the commands between MULTI and EXEC and runs them, in
// order, at EXEC. IDs are independent of each other, so there is nothing to
// isolate or roll back: a queued command that fails at EXEC answers its
// error in EXEC's array, as in Redis. A command refused while queued
// (unknown, wrong arguments, not authenticated, over the limits) makes
// EXEC abort the transaction without running any of it (EXECABORT).

// respTx is a transaction under way: the commands queued for EXEC.
type respTx struct {
	queued [][][]byte // copies of the commands' arguments
	size   int        // bytes of arguments queued
	failed bool       // a command was refused while queued
}

// The most a transaction may queue: more is refused (and aborts it), so
// that a client cannot make the server hold unbounded input.
const (
	respTxMaxCommands = 10_000
	respTxMaxBytes    = 4 << 20
)

// queue adds a copy of a command to the transaction.
func (tx *respTx) queue(args [][]byte) error {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	if len(tx.queued) >= respTxMaxCommands || tx.size+n > respTxMaxBytes {
		return respErrorf("ERR", "a transaction may queue at most %d commands and %d bytes of arguments; it is discarded at EXEC", respTxMaxCommands, respTxMaxBytes)
	}
	buf := make([]byte, 0, n)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a):]
	}
	tx.queued = append(tx.queued, cp)
	tx.size += n
	return nil
}

func (c *respConn) multi([][]byte) error {
	if c.tx != nil {
		return respErrorf("ERR", "MULTI calls can not be nested")
	}
	c.tx = &respTx{}
	c.wr.WriteString("OK")
	return nil
}

func (c *respConn) discard([][]byte) error {
	if c.tx == nil {
		return respErrorf("ERR", "DISCARD without MULTI")
	}
	c.tx = nil
	c.wr.WriteString("OK")
	return nil
}

// execTx runs the queued commands in order and answers their replies as
// one array.
func (c *respConn) execTx([][]byte) error {
	tx := c.tx
	if tx == nil {
		return respErrorf("ERR", "EXEC without MULTI")
	}
	c.tx = nil
	if tx.failed {
		return respErrorf("EXECABORT", "Transaction discarded because of previous errors.")
	}
	c.wr.WriteArray(len(tx.queued))
	for _, args := range tx.queued {
		cmd := c.s.resp.lookup(args[0])
		err := c.check(cmd, args)
		if err == nil {
			err = cmd.run(c, args)
		}
		c.reply(cmd, err)
		if c.quit {
			break
		}
	}
	return nil
}
