package load

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Op performs one operation (one request, one received message, one block
// of in-process calls) and returns how many IDs it delivered.
type Op func(ctx context.Context) (ids int64, err error)

// Worker is one concurrent client: its Op, called in a loop from one
// goroutine, and Close (may be nil), called when the run ends.
type Worker struct {
	Op    Op
	Close func()
}

// RunConfig says how to run: Workers goroutines, each with its own Worker
// (connection), call their Op in a loop for Warmup and then Duration.
type RunConfig struct {
	Workers   int
	Warmup    time.Duration
	Duration  time.Duration
	NewWorker func(ctx context.Context, i int) (Worker, error)
	// MaxErrors aborts the run after this many failed ops (0: 1000).
	MaxErrors int64
	// Grace is how long after the window the run waits for ops still in
	// flight before it cancels their context (0: 5s).
	Grace time.Duration
	// Rate, when positive, is the offered load in ops per second over all
	// workers (wrk2's fixed-rate mode): each worker sends one op every
	// Workers/Rate seconds, on a schedule staggered across the workers
	// that does not wait for slow answers, and an op's latency counts from
	// the moment its schedule meant to send it, so that a stall shows in
	// the percentiles (the ops owed during it go out back to back after
	// it) instead of lowering the load — the correction for coordinated
	// omission. An op then counts when its scheduled time falls inside
	// the window, whenever it completes (within Grace). The sleeps' own
	// lateness is recorded apart (Record.LateP999, LateMax). 0: closed
	// loop, each worker sends its next op when the previous one returns.
	Rate float64
	// Spin is how long before each scheduled send a fixed-rate worker
	// stops sleeping and yields the processor in a loop until the send is
	// due: Go's timers wake up to a millisecond late when the process is
	// otherwise idle (its network poller waits in whole milliseconds), and
	// that lateness would count as the server's latency. 0: sleep only.
	// idload uses SpinBefore.
	Spin time.Duration
	// ServerCPU, when set, is read at the start and at the end of the
	// window: the server's CPU time so far (ProcessCPU). Their difference
	// is Record.ServerCPU.
	ServerCPU func() (time.Duration, error)
}

// SpinBefore is the Spin idload uses: a millisecond, the poller's
// granularity.
const SpinBefore = time.Millisecond

// Run runs cfg and returns a Record (without label, mode or target) and the
// merged latency histogram. Every worker is created before the clock
// starts; then all start together. An op counts (in ops, IDs and latency)
// when it completes inside the window [start+Warmup, start+Warmup+Duration];
// the rates are those counts over Duration. An op still in flight at the
// end is not counted, and an error after the window is ignored.
func Run(ctx context.Context, cfg RunConfig) (Record, *Histogram, error) {
	if cfg.Workers < 1 {
		return Record{}, nil, errors.New("load: workers < 1")
	}
	if cfg.Duration <= 0 {
		return Record{}, nil, errors.New("load: duration ≤ 0")
	}
	if cfg.Rate < 0 || cfg.Rate > 10e6 {
		return Record{}, nil, fmt.Errorf("load: rate %v, want 0–10M ops/s", cfg.Rate)
	}
	var every time.Duration // a worker's period in fixed-rate mode
	if cfg.Rate > 0 {
		every = time.Duration(float64(cfg.Workers) / cfg.Rate * float64(time.Second))
	}
	maxErr := cfg.MaxErrors
	if maxErr == 0 {
		maxErr = 1000
	}
	grace := cfg.Grace
	if grace == 0 {
		grace = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	workers := make([]Worker, cfg.Workers)
	defer func() {
		for _, w := range workers {
			if w.Close != nil {
				w.Close()
			}
		}
	}()
	for i := range workers {
		w, err := cfg.NewWorker(ctx, i)
		if err != nil {
			return Record{}, nil, fmt.Errorf("load: worker %d: %w", i, err)
		}
		workers[i] = w
	}

	type result struct {
		h, late  Histogram
		ops, ids int64
		errs     int64
		firstErr error
	}
	results := make([]*result, cfg.Workers)
	var (
		wg      sync.WaitGroup
		startCh = make(chan struct{})
		start   time.Time
		ws, we  time.Time
		abortMu sync.Mutex
		aborted error
		errTot  int64
	)
	for i := range workers {
		res := &result{}
		results[i] = res
		wg.Add(1)
		go func(op Op) {
			defer wg.Done()
			<-startCh
			next := start.Add(every * time.Duration(i) / time.Duration(cfg.Workers))
			for {
				t0 := time.Now()
				if every > 0 {
					if d := next.Sub(t0); d > 0 {
						waitUntil(next, cfg.Spin)
						if late := time.Since(next); !next.Before(ws) {
							res.late.Record(late)
						}
					}
					t0, next = next, next.Add(every)
				}
				if t0.After(we) || every > 0 && t0.Equal(we) || ctx.Err() != nil {
					return
				}
				ids, err := op(ctx)
				t1 := time.Now()
				if every == 0 && t1.After(we) {
					return
				}
				inWindow := !t1.Before(ws)
				if every > 0 {
					inWindow = !t0.Before(ws) // scheduled in the window
				}
				if err != nil {
					if !inWindow || ctx.Err() != nil {
						continue
					}
					res.errs++
					if res.firstErr == nil {
						res.firstErr = err
					}
					abortMu.Lock()
					errTot++
					if errTot >= maxErr && aborted == nil {
						aborted = fmt.Errorf("load: %d errors, the first: %w", errTot, res.firstErr)
						cancel()
					}
					abortMu.Unlock()
					time.Sleep(time.Millisecond) // never spin on a dead target
					continue
				}
				if !inWindow {
					continue
				}
				res.ops++
				res.ids += ids
				res.h.Record(t1.Sub(t0))
			}
		}(workers[i].Op)
	}
	load0 := Load1()
	start = time.Now()
	ws = start.Add(cfg.Warmup)
	we = ws.Add(cfg.Duration)
	close(startCh)

	type cpuSpan struct {
		d   time.Duration
		err error
	}
	cpuc := make(chan cpuSpan, 1)
	if cfg.ServerCPU != nil {
		go func() {
			at := func(t time.Time) error { // wait for t, or the run's end
				select {
				case <-time.After(time.Until(t)):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err := at(ws); err != nil {
				cpuc <- cpuSpan{}
				return
			}
			c0, err := cfg.ServerCPU()
			if err != nil {
				cpuc <- cpuSpan{err: err}
				return
			}
			if err := at(we); err != nil {
				cpuc <- cpuSpan{}
				return
			}
			c1, err := cfg.ServerCPU()
			cpuc <- cpuSpan{c1 - c0, err}
		}()
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(we) + grace):
		cancel() // ops stuck past the window (e.g. a stream waiting)
		<-done
	}

	rec := Record{
		Workers: cfg.Workers,
		Start:   ws.UTC().Format(time.RFC3339),
		Seconds: cfg.Duration.Seconds(),
		Load1:   load0,
		Load1E:  Load1(),
	}
	h, late := &Histogram{}, &Histogram{}
	var firstErr error
	for _, r := range results {
		h.Merge(&r.h)
		late.Merge(&r.late)
		rec.Ops += r.ops
		rec.IDs += r.ids
		rec.Errors += r.errs
		if firstErr == nil {
			firstErr = r.firstErr
		}
	}
	if cfg.ServerCPU != nil {
		c := <-cpuc
		if c.err != nil && aborted == nil {
			aborted = fmt.Errorf("load: the server's CPU time: %w", c.err)
		}
		rec.ServerCPU = c.d.Seconds()
	}
	rec.OpsPerS = float64(rec.Ops) / cfg.Duration.Seconds()
	rec.IDsPerS = float64(rec.IDs) / cfg.Duration.Seconds()
	rec.FromHistogram(h)
	if every > 0 {
		rec.Rate = cfg.Rate
		rec.LateP999, rec.LateMax = float64(late.Quantile(0.999))/1e3, float64(late.Max())/1e3
	}
	if aborted != nil {
		return rec, h, aborted
	}
	if firstErr != nil {
		rec.Note = "first error: " + firstErr.Error()
	}
	return rec, h, nil
}

// waitUntil returns at t: it sleeps until spin before t, then yields the
// processor in a loop until t.
func waitUntil(t time.Time, spin time.Duration) {
	if d := time.Until(t) - spin; d > 0 {
		time.Sleep(d)
	}
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}
