package load

import (
	"context"
	"errors"
	"fmt"
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
}

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
		h        Histogram
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
			for {
				t0 := time.Now()
				if t0.After(we) || ctx.Err() != nil {
					return
				}
				ids, err := op(ctx)
				t1 := time.Now()
				if t1.After(we) {
					return
				}
				if err != nil {
					if t1.Before(ws) {
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
				if t1.Before(ws) {
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
	h := &Histogram{}
	var firstErr error
	for _, r := range results {
		h.Merge(&r.h)
		rec.Ops += r.ops
		rec.IDs += r.ids
		rec.Errors += r.errs
		if firstErr == nil {
			firstErr = r.firstErr
		}
	}
	rec.OpsPerS = float64(rec.Ops) / cfg.Duration.Seconds()
	rec.IDsPerS = float64(rec.IDs) / cfg.Duration.Seconds()
	rec.FromHistogram(h)
	if aborted != nil {
		return rec, h, aborted
	}
	if firstErr != nil {
		rec.Note = "first error: " + firstErr.Error()
	}
	return rec, h, nil
}
