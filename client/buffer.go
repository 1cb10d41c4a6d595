package client

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// chunk is the range a buffer currently hands out. Its fields are fixed when
// it is installed; pos, the index of the next ID, is the only thing the hot
// path writes: one atomic add claims an index, and an index past count means
// the chunk is used up (pos keeps growing; that is harmless).
type chunk struct {
	pos                  atomic.Int64
	first, count, stride int64
	texts                []string // a text buffer's IDs; nil in an ID buffer
	// trigger is the index whose claim leaves the buffer (this chunk plus
	// the queue, as it was at install) below the low-water mark: its
	// claimer asks for a background refill. -1 when there is none.
	trigger int64
}

// round is one refill: done closes when it ends, err says how.
type round struct {
	done chan struct{}
	err  error
}

// buffer is a local stock of IDs of one kind (Snowflake, or one segment
// tag): the current chunk plus a FIFO queue of prefetched ranges. At most one
// refill runs at a time. An ID buffer (next, take) holds ranges of IDs; a
// text buffer (nextText, takeTexts) holds the texts the server wrote, which
// are masked IDs when it masks them, and so form no ranges.
type buffer struct {
	cl    *Client
	tag   string // "" for Snowflake
	texts bool   // a text buffer
	batch int64  // IDs per refill
	low   int64  // refill below this many buffered IDs

	cur atomic.Pointer[chunk]

	mu       sync.Mutex
	queue    []span
	queued   int64     // IDs in queue
	refill   *round    // the refill in flight, or nil
	fails    int       // consecutive failed refills
	retryAt  time.Time // no low-water refill before this after a failure
	retrying bool      // a goroutine waits for retryAt to refill again
}

// newBuffer returns an ID buffer, or a text buffer (texts true), of tag's
// IDs ("" for Snowflake IDs).
func newBuffer(cl *Client, tag string, texts bool, batch int, lowWater float64) *buffer {
	low := int64(math.Ceil(lowWater * float64(batch)))
	return &buffer{cl: cl, tag: tag, texts: texts, batch: int64(batch), low: max(1, min(low, int64(batch)))}
}

// next returns one ID of an ID buffer.
func (b *buffer) next(ctx context.Context) (int64, error) {
	ch, i, err := b.claim(ctx)
	if err != nil {
		return 0, err
	}
	return ch.first + i*ch.stride, nil
}

// nextText is next for a text buffer: one text.
func (b *buffer) nextText(ctx context.Context) (string, error) {
	ch, i, err := b.claim(ctx)
	if err != nil {
		return "", err
	}
	return ch.texts[i], nil
}

// claim claims one ID: it returns the chunk and the ID's index in it. The
// hot path is an atomic load and an atomic add.
func (b *buffer) claim(ctx context.Context) (*chunk, int64, error) {
	ch := b.cur.Load()
	var i int64
	if ch != nil {
		i = ch.pos.Add(1) - 1
		if i < ch.count && i != ch.trigger {
			return ch, i, nil
		}
	}
	return b.claimSlow(ctx, ch, i)
}

// claimSlow finishes claiming one ID when ch was nil or used up, or when
// the claimed index i was the low-water trigger: it returns the chunk and
// the index of the caller's ID.
func (b *buffer) claimSlow(ctx context.Context, ch *chunk, i int64) (*chunk, int64, error) {
	for {
		if ch != nil && i < ch.count {
			if i == ch.trigger {
				b.lowWater()
			}
			return ch, i, nil
		}
		if err := b.wait(ctx, ch); err != nil {
			return nil, 0, err
		}
		if ch = b.cur.Load(); ch != nil {
			i = ch.pos.Add(1) - 1
		}
	}
}

// take returns n IDs of an ID buffer.
func (b *buffer) take(ctx context.Context, n int64) ([]int64, error) {
	out := make([]int64, 0, n)
	err := b.claimN(ctx, n, func(ch *chunk, start, stop int64) {
		for i := start; i < stop; i++ {
			out = append(out, ch.first+i*ch.stride)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// takeTexts returns n texts of a text buffer.
func (b *buffer) takeTexts(ctx context.Context, n int64) ([]string, error) {
	out := make([]string, 0, n)
	err := b.claimN(ctx, n, func(ch *chunk, start, stop int64) {
		out = append(out, ch.texts[start:stop]...)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimN claims n IDs a chunk at a time, passing each claimed run
// [start, stop) of a chunk to got. IDs claimed before an error are dropped
// (gaps, never duplicates).
func (b *buffer) claimN(ctx context.Context, n int64, got func(ch *chunk, start, stop int64)) error {
	for need := n; ; {
		ch := b.cur.Load()
		if ch != nil {
			end := ch.pos.Add(need)
			if start := end - need; start < ch.count {
				stop := min(end, ch.count)
				got(ch, start, stop)
				if start <= ch.trigger && ch.trigger < stop {
					b.lowWater()
				}
				if need -= stop - start; need == 0 {
					return nil
				}
			}
		}
		if err := b.wait(ctx, ch); err != nil {
			return err
		}
	}
}

// lowWater starts a background refill if the buffer is below the low-water
// mark and none is running.
func (b *buffer) lowWater() {
	b.mu.Lock()
	b.startLocked(true)
	b.mu.Unlock()
}

// wait is the slow path, for a caller that found ch used up: it installs
// the next queued range, or waits for a refill (starting one if none runs),
// bounded by ctx. It returns nil when the caller should try again.
func (b *buffer) wait(ctx context.Context, ch *chunk) error {
	b.mu.Lock()
	if cur := b.cur.Load(); cur != ch {
		b.mu.Unlock() // another caller installed a new chunk
		return nil
	}
	if len(b.queue) > 0 {
		b.installLocked()
		b.mu.Unlock()
		return nil
	}
	r := b.startLocked(false)
	b.mu.Unlock()
	if r == nil {
		return ErrClosed
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctxError(ctx.Err(), nil)
	}
}

// installLocked makes the queue's head the current chunk.
func (b *buffer) installLocked() {
	s := b.queue[0]
	b.queue[0] = span{}
	b.queue = b.queue[1:]
	b.queued -= s.count
	// Claiming index i leaves (count-i-1)+queued IDs.
	ch := &chunk{first: s.first, count: s.count, stride: s.stride, texts: s.texts, trigger: s.count + b.queued - b.low}
	below := ch.trigger <= 0
	if below {
		ch.trigger = -1
	}
	b.cur.Store(ch)
	if below {
		b.startLocked(true)
	}
}

// bufferedLocked counts the IDs left in the buffer.
func (b *buffer) bufferedLocked() int64 {
	n := b.queued
	if ch := b.cur.Load(); ch != nil {
		n += max(0, ch.count-ch.pos.Load())
	}
	return n
}

// startLocked returns the refill in flight, or starts one. A low-water
// refill (lowWater true) starts only below the mark and not during the
// backoff after a failed refill; it may return nil. It returns nil too when
// the client is closed.
func (b *buffer) startLocked(lowWater bool) *round {
	if b.refill != nil {
		return b.refill
	}
	if lowWater && (b.bufferedLocked() >= b.low || time.Now().Before(b.retryAt)) {
		return nil
	}
	r := &round{done: make(chan struct{})}
	if !b.cl.spawn(func() { b.run(r) }) {
		return nil
	}
	b.refill = r
	return r
}

// retryLocked refills again after d while the buffer still holds IDs: a
// low-water refill that failed is retried in the background, so that the
// buffer rides out an outage shorter than what it holds (a caller who finds
// it empty starts a refill of its own). At most one retry waits; Close ends
// it.
func (b *buffer) retryLocked(d time.Duration) {
	if b.retrying || b.bufferedLocked() == 0 {
		return
	}
	b.retrying = b.cl.spawn(func() {
		err := sleep(b.cl.bg, d)
		b.mu.Lock()
		b.retrying = false
		if err == nil {
			b.startLocked(true)
		}
		b.mu.Unlock()
	})
}

// run is the refill goroutine: it fetches one batch and queues it.
func (b *buffer) run(r *round) {
	var spans []span
	var err error
	if b.texts {
		spans, err = b.cl.fetchTextSpan(b.cl.bg, b.tag, b.batch)
	} else {
		spans, err = b.cl.fetch(b.cl.bg, b.tag, b.batch)
	}
	b.mu.Lock()
	if err == nil {
		b.queue = append(b.queue, spans...)
		b.queued += b.batch
		b.fails, b.retryAt = 0, time.Time{}
	} else {
		if b.cl.closed.Load() {
			err = ErrClosed
		}
		// The next low-water refill waits for the backoff, or until the
		// soonest endpoint is back by its server's word.
		now := time.Now()
		b.retryAt = now.Add(b.cl.t.bo.Next(b.fails))
		if back := b.cl.t.soonestBack(); back.After(b.retryAt) {
			b.retryAt = back
		}
		b.fails++
		b.retryLocked(b.retryAt.Sub(now))
		// A tag the server refuses (unknown, forbidden) is forgotten, so
		// that bad tags do not pile up buffers.
		if ae, ok := errors.AsType[*APIError](err); ok && b.tag != "" && !retryable(ae.Status) && b.bufferedLocked() == 0 {
			b.cl.segmentBuffers(b.texts).CompareAndDelete(b.tag, b)
		}
	}
	r.err = err
	b.refill = nil
	b.mu.Unlock()
	close(r.done)
}
