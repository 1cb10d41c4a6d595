package load

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Median returns the median of vs (the mean of the middle two for an even
// count; 0 when empty).
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Group is the records of one label, in input order.
type Group struct {
	Label   string
	Records []Record
}

// Groups splits recs by label, in the order labels first appear.
func Groups(recs []Record) []Group {
	var gs []Group
	idx := map[string]int{}
	for _, r := range recs {
		i, ok := idx[r.Label]
		if !ok {
			i = len(gs)
			idx[r.Label] = i
			gs = append(gs, Group{Label: r.Label})
		}
		gs[i].Records = append(gs[i].Records, r)
	}
	return gs
}

func field(rs []Record, f func(Record) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// WriteSummary writes a markdown table with one row per label: the number
// of runs, and the median over them of ops/s, IDs/s and each latency
// quantile (each column's median is taken on its own), with the ops/s
// range, the total errors and the median 1-minute load average at the
// runs' starts.
func WriteSummary(w io.Writer, recs []Record) {
	fmt.Fprintln(w, "| label | runs | ops/s (median) | ops/s min–max | IDs/s (median) | p50 | p90 | p99 | p99.9 | errors | load1 | IDs per server CPU-s |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range Groups(recs) {
		rs := g.Records
		ops := field(rs, func(r Record) float64 { return r.OpsPerS })
		var errs int64
		for _, r := range rs {
			errs += r.Errors
		}
		// A tool that does not report a percentile leaves it 0: show "–".
		opt := func(get func(Record) float64) string {
			if v := Median(field(rs, get)); v > 0 {
				return Us(v)
			}
			return "–"
		}
		perCPU := "–"
		if v := Median(field(rs, IDsPerCPU)); v > 0 {
			perCPU = Si(v)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s–%s | %s | %s | %s | %s | %s | %d | %.2f | %s |\n",
			g.Label, len(rs), Si(Median(ops)), Si(slices.Min(ops)), Si(slices.Max(ops)),
			Si(Median(field(rs, func(r Record) float64 { return r.IDsPerS }))),
			Us(Median(field(rs, func(r Record) float64 { return r.P50 }))),
			opt(func(r Record) float64 { return r.P90 }),
			Us(Median(field(rs, func(r Record) float64 { return r.P99 }))),
			opt(func(r Record) float64 { return r.P999 }), errs, Median(field(rs, func(r Record) float64 { return r.Load1 })), perCPU)
	}
}

// WriteFixedRate writes a markdown table of the fixed-rate runs (Rate > 0),
// one row per label: the offered and achieved rate, and the median over the
// runs of each latency quantile and of the load generator's own lateness
// (how late its sleeps woke), which the latencies include.
func WriteFixedRate(w io.Writer, recs []Record) {
	fmt.Fprintln(w, "| label | runs | offered ops/s | achieved (median) | p50 | p99 | p99.9 | max | generator late p99.9 | late max | errors | load1 |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range Groups(recs) {
		var rs []Record
		for _, r := range g.Records {
			if r.Rate > 0 {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		var errs int64
		for _, r := range rs {
			errs += r.Errors
		}
		med := func(get func(Record) float64) float64 { return Median(field(rs, get)) }
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %.2f |\n",
			g.Label, len(rs), Si(med(func(r Record) float64 { return r.Rate })), Si(med(func(r Record) float64 { return r.OpsPerS })),
			Us(med(func(r Record) float64 { return r.P50 })), Us(med(func(r Record) float64 { return r.P99 })),
			Us(med(func(r Record) float64 { return r.P999 })), Us(med(func(r Record) float64 { return r.Max })),
			Us(med(func(r Record) float64 { return r.LateP999 })), Us(med(func(r Record) float64 { return r.LateMax })),
			errs, med(func(r Record) float64 { return r.Load1 }))
	}
}

// Ratio is a quantity (Of) of label A over the same of label B, taken per
// round (only between records of the same round, which ran minutes apart
// at most).
type Ratio struct {
	A, B   string
	Of     string
	Rounds []int
	Values []float64
}

// Ratios computes, for each "A/B" pair, A's IDs/s over B's in every round
// both have a record in (the first record of a label in a round counts).
func Ratios(recs []Record, pairs []string) ([]Ratio, error) {
	return RatiosOf(recs, pairs, "IDs/s", func(r Record) float64 { return r.IDsPerS })
}

// P999Ratios is Ratios of the p99.9 latency: above 1 means A's tail is
// longer than B's.
func P999Ratios(recs []Record, pairs []string) ([]Ratio, error) {
	return RatiosOf(recs, pairs, "p99.9", func(r Record) float64 { return r.P999 })
}

// CPURatios is Ratios of the IDs per CPU-second of the server's process
// (Record.ServerCPU): what each server does with the core it gets, so that
// time another process took from it does not count. A round in which
// either has no CPU time counts not.
func CPURatios(recs []Record, pairs []string) ([]Ratio, error) {
	return RatiosOf(recs, pairs, "IDs per server CPU-s", IDsPerCPU)
}

// IDsPerCPU is r's IDs per second of its server's CPU time, or 0 when
// that was not measured.
func IDsPerCPU(r Record) float64 {
	if r.ServerCPU <= 0 {
		return 0
	}
	return float64(r.IDs) / r.ServerCPU
}

// RatiosOf computes, for each "A/B" pair, of(A) over of(B) in every round
// both have a record in (the first record of a label in a round counts).
func RatiosOf(recs []Record, pairs []string, name string, of func(Record) float64) ([]Ratio, error) {
	type key struct {
		label string
		round int
	}
	byKey := map[key]Record{}
	var rounds []int
	for _, r := range recs {
		k := key{r.Label, r.Round}
		if _, ok := byKey[k]; !ok {
			byKey[k] = r
		}
		if !slices.Contains(rounds, r.Round) {
			rounds = append(rounds, r.Round)
		}
	}
	slices.Sort(rounds)
	var out []Ratio
	for _, p := range pairs {
		a, b, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("ratio %q: want LABEL_A/LABEL_B", p)
		}
		rt := Ratio{A: a, B: b, Of: name}
		for _, rd := range rounds {
			ra, okA := byKey[key{a, rd}]
			rb, okB := byKey[key{b, rd}]
			if okA && okB && of(ra) > 0 && of(rb) > 0 {
				rt.Rounds = append(rt.Rounds, rd)
				rt.Values = append(rt.Values, of(ra)/of(rb))
			}
		}
		out = append(out, rt)
	}
	return out, nil
}

// WriteRatios writes a markdown table of same-round ratios: the median,
// min–max and every round's value.
func WriteRatios(w io.Writer, rs []Ratio) {
	of := "IDs/s"
	if len(rs) > 0 && rs[0].Of != "" {
		of = rs[0].Of
	}
	fmt.Fprintf(w, "| A / B (%s, same round) | rounds | median | min–max | per round |\n", of)
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, r := range rs {
		if len(r.Values) == 0 {
			fmt.Fprintf(w, "| %s / %s | 0 | – | – | no round has both |\n", r.A, r.B)
			continue
		}
		per := make([]string, len(r.Values))
		for i, v := range r.Values {
			per[i] = fmt.Sprintf("%.3f×", v)
		}
		fmt.Fprintf(w, "| %s / %s | %d | %.3f× | %.3f–%.3f× | %s |\n", r.A, r.B, len(r.Values),
			Median(r.Values), slices.Min(r.Values), slices.Max(r.Values), strings.Join(per, " "))
	}
}
