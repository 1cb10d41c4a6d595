package segment

import (
	"fmt"
	"log/slog"
	"time"
)

// Source is one store a tag is served from. With several sources (Tinyid's
// multi-database mode, Flickr's ticket servers) each keeps its own row per
// tag and serves only the IDs of its ranges that are ≡ a remainder (mod a
// delta), so that the sources never collide and losing one database loses
// only its share.
//
// Which store serves which remainder is best recorded in the store itself,
// per tag (Tag.Delta and Tag.Remainder, which every store of flakeid keeps):
// leave Delta and Remainder 0 in every Source and the allocator serves each
// store's recorded share, checks the shares of one tag against each other
// before it issues from them (CheckStrides checks every tag at once), and
// refuses a tag whose shares collide, whatever the order of Sources.
type Source struct {
	// Store keeps this source's rows. Required.
	Store Store
	// Name names the source in errors and logs (a URL without its
	// password, say). Default "source <index>".
	Name string
	// Delta and Remainder, when Delta is set, configure the IDs this
	// source serves instead: those ≡ Remainder (mod Delta). Delta: 1 or
	// more, the same for every source; Remainder: 0 to Delta−1, distinct
	// per source. A store that records another share for a tag is refused
	// for it. Default 0, 0: the share each store records for the tag (all
	// its IDs when it records none and is the only source). Set in all
	// sources or in none. Which store serves which remainder must never
	// change once it has issued IDs (docs/GUARANTEES.md says why): the
	// recorded form cannot be reordered by mistake.
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
	// Default false: an unknown tag is ErrUnknownTag. Not with several
	// sources that record their shares: nodes listing them in different
	// orders would record colliding ones.
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
	recorded := 0
	for i, s := range c.Sources {
		if s.Store == nil {
			return bad("%s has no Store", c.sourceName(i))
		}
		if s.Delta == 0 && s.Remainder == 0 {
			recorded++
		}
	}
	if recorded == len(c.Sources) {
		if recorded > 1 && c.AutoCreate {
			return bad("auto-create with %d sources that record their shares: nodes listing them in another order would record colliding ones; create tags with their shares (Allocator.Create does)", recorded)
		}
		return nil
	}
	delta := c.Sources[0].Delta
	seen := map[int64]int{}
	for i, s := range c.Sources {
		switch {
		case s.Delta < 1:
			return bad("%s has delta %d, want 1 or more: set Delta in every source or in none", c.sourceName(i), s.Delta)
		case s.Delta != delta:
			return bad("%s has delta %d, %s has %d: all must share one", c.sourceName(i), s.Delta, c.sourceName(0), delta)
		case s.Remainder < 0 || s.Remainder >= s.Delta:
			return bad("%s has remainder %d, want 0–%d", c.sourceName(i), s.Remainder, s.Delta-1)
		}
		if j, ok := seen[s.Remainder]; ok {
			return bad("%s and %s share remainder %d: they would issue the same IDs", c.sourceName(j), c.sourceName(i), s.Remainder)
		}
		seen[s.Remainder] = i
	}
	return nil
}

// sourceName names source i in messages: its Name, else "source i".
func (c Config) sourceName(i int) string {
	if c.Sources[i].Name != "" {
		return c.Sources[i].Name
	}
	return fmt.Sprintf("source %d", i)
}

// recorded reports whether the sources' shares are the ones their stores
// record (no Source sets Delta).
func (c Config) recorded() bool { return c.Sources[0].Delta == 0 }

func (c Config) withDefaults() Config {
	if len(c.Sources) == 0 && c.Store != nil {
		c.Sources = []Source{{Store: c.Store}}
	}
	c.Sources = append([]Source(nil), c.Sources...)
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
