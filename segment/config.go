package segment

import (
	"fmt"
	"log/slog"
	"time"
)

// Source is one store a tag is served from. With several sources (Tinyid's
// multi-database mode) each keeps its own row per tag and serves only the
// IDs of its range that are ≡ Remainder (mod Delta), so that the sources
// never collide and losing one database loses only its share.
type Source struct {
	// Store keeps this source's rows. Required.
	Store Store
	// Delta and Remainder select the IDs this source serves: those ≡
	// Remainder (mod Delta). Delta: 1 or more, the same for every source;
	// default 1. Remainder: 0 to Delta−1, distinct per source; default 0.
	// Which store serves which remainder must never change once it has
	// issued IDs (docs/GUARANTEES.md says why).
	Delta, Remainder int64
}

// Config configures an Allocator. Zero fields mean their defaults.
type Config struct {
	// Store is the single source of segments; or give Sources, not both.
	// Required (one of the two).
	Store Store
	// Sources are several stores for one tag set (see Source); all share
	// one Delta and have distinct Remainders in [0, Delta).
	Sources []Source
	// Prefetch is the fraction of the current segment handed out when the
	// next is fetched in the background. Range 0.01–0.99. Default 0.1 (as
	// Leaf; Tinyid uses 0.2).
	Prefetch float64
	// SegmentDuration is what the dynamic step aims for: a step should last
	// about this long. At each fetch, the rate measured over the last
	// segment used up says how long a step lasts now: less than this, the
	// step doubles (up to MaxStep); twice this or more, it halves (never
	// below the tag's configured step). Default 15m (Leaf's rule); negative
	// keeps every tag at its configured step.
	SegmentDuration time.Duration
	// MaxStep caps the dynamic step. Range 1–2^31−1. Default 1,000,000.
	MaxStep int64
	// MaxBatch bounds the n of Next. Range 1–10,000,000. Default 100,000.
	MaxBatch int
	// AutoCreate creates an unknown tag on first use, with DefaultStep.
	// Default false: an unknown tag is ErrUnknownTag.
	AutoCreate bool
	// DefaultStep is the step of tags created on first use. Range
	// 1–MaxStep. Default 1000, or MaxStep when that is smaller.
	DefaultStep int64
	// FetchTimeout bounds one fetch from a store. Range: more than 0.
	// Default 5s.
	FetchTimeout time.Duration
	// Logger receives fetch failures, and an error when a store is seen
	// going backwards (see ErrRegressed). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the dynamic step and of series' periods. Default
	// time.Now.
	Now func() time.Time
	// CounterKeys returns the key a masked series was created with, by key
	// id (an idmask.Keyring's key; *idmask.Masker is a CounterMasker).
	// Default nil: masked series are refused with ErrNoKey.
	CounterKeys func(keyID uint8) (CounterMasker, error)
}

// Validate checks the fields and their relations, with defaults applied.
// Every error wraps ErrInvalidConfig and names the field.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if c.Store != nil && len(c.Sources) > 0 {
		return bad("both a Store and %d Sources: give one or the other", len(c.Sources))
	}
	c = c.withDefaults()
	switch {
	case len(c.Sources) == 0:
		return bad("no Store or Sources")
	case c.Prefetch < 0.01 || c.Prefetch > 0.99:
		return bad("prefetch %v, want 0.01–0.99", c.Prefetch)
	case c.MaxStep < 1 || c.MaxStep > 1<<31-1:
		return bad("max step %d, want 1–%d", c.MaxStep, 1<<31-1)
	case c.MaxBatch < 1 || c.MaxBatch > 10_000_000:
		return bad("max batch %d, want 1–10,000,000", c.MaxBatch)
	case c.DefaultStep < 1 || c.DefaultStep > c.MaxStep:
		return bad("default step %d, want 1–%d (max step)", c.DefaultStep, c.MaxStep)
	case c.FetchTimeout <= 0:
		return bad("fetch timeout %v, want > 0", c.FetchTimeout)
	}
	delta := c.Sources[0].Delta
	seen := map[int64]bool{}
	for i, s := range c.Sources {
		switch {
		case s.Store == nil:
			return bad("source %d has no Store", i)
		case s.Delta != delta:
			return bad("source %d has delta %d, source 0 has %d: all must share one", i, s.Delta, delta)
		case s.Remainder < 0 || s.Remainder >= s.Delta:
			return bad("source %d has remainder %d, want 0–%d", i, s.Remainder, s.Delta-1)
		case seen[s.Remainder]:
			return bad("sources share remainder %d: they would issue the same IDs", s.Remainder)
		}
		seen[s.Remainder] = true
	}
	return nil
}

func (c Config) withDefaults() Config {
	if len(c.Sources) == 0 && c.Store != nil {
		c.Sources = []Source{{Store: c.Store}}
	}
	c.Sources = append([]Source(nil), c.Sources...)
	for i := range c.Sources {
		if c.Sources[i].Delta == 0 {
			c.Sources[i].Delta = 1
		}
	}
	if c.Prefetch == 0 {
		c.Prefetch = 0.1
	}
	if c.SegmentDuration == 0 {
		c.SegmentDuration = 15 * time.Minute
	}
	if c.MaxStep == 0 {
		c.MaxStep = 1_000_000
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 100_000
	}
	if c.DefaultStep == 0 {
		c.DefaultStep = min(1000, c.MaxStep)
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
