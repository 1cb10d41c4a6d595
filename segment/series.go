package segment

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Period is how often a series' counter starts again.
type Period string

// The periods of a series. A period is named by its label in the series'
// time zone: minute 202611281530, hour 2026112815, day 20261128, week
// 202648 (ISO 8601 week-numbering year and week), month 202611, year 2026.
const (
	Minute Period = "minute"
	Hour   Period = "hour"
	Day    Period = "day"
	Week   Period = "week"
	Month  Period = "month"
	Year   Period = "year"
)

// labelDigits is the number of digits of a period's label.
func (p Period) labelDigits() int {
	switch p {
	case Minute:
		return 12
	case Hour:
		return 10
	case Day:
		return 8
	case Week, Month:
		return 6
	case Year:
		return 4
	}
	return 0
}

// MaxTemplateLen is the longest series template, in bytes.
const MaxTemplateLen = 64

// MaxSeriesNameLen is the longest name of a series tag: its periods are
// kept as rows named <tag>::<label>, which must fit Leaf's VARCHAR(128).
const MaxSeriesNameLen = 100

// periodSep separates a series tag from a period label in the name of the
// period's row.
const periodSep = "::"

// Series makes a tag a series of business numbers (ORD-20261128-000123):
// a counter that starts again every period, shown through a template.
// Set it when the tag is created; it cannot be changed afterwards (create a
// new tag instead), as a changed template could show a number twice.
type Series struct {
	// Period is when the counter starts again. Required.
	Period Period `json:"period"`
	// TZ is the IANA time zone whose local time the periods follow (the
	// day starts at local midnight there, DST included). Default "" (UTC).
	TZ string `json:"tz,omitempty"`
	// Template shapes the number: literal text, the period's date parts in
	// braces ({yyyy} {yy} {MM} {dd} {HH} {mm} for the year, its last two
	// digits, month, day, hour and minute of the period's start; {GGGG} and
	// {ww} for the ISO week-numbering year and week; several may share one
	// pair of braces, as in {yyyyMMdd}) and exactly one counter {seq:N},
	// zero-padded to N digits (1–14). Up to 64 bytes; no control
	// characters. The date parts must name the period: a day series shows
	// the year, month and day. Required.
	Template string `json:"template"`
	// Start is the first counter of every period. Range 0 to 10^N − 1.
	// The HTTP API and the CLI default it to 1; here 0 is 0.
	Start int64 `json:"start"`
	// Masked shows the counter as a keyed permutation of the period's
	// counters (unique within the period, of the same width), so that
	// consecutive numbers do not show the period's volume. Default false.
	Masked bool `json:"masked,omitempty"`
	// KeyID is the mask key the series is masked with (Masked only); it is
	// chosen when the series is created and kept for its life.
	KeyID uint8 `json:"key_id,omitempty"`
}

// dateToken is one date part of a template.
type dateToken uint8

const (
	tokYYYY dateToken = iota + 1
	tokYY
	tokMM
	tokDD
	tokHH
	tokMin
	tokGGGG
	tokWW
	tokSeq // the counter
)

// tokens lists the date tokens as written, longest first where they share
// a prefix.
var tokenNames = [...]struct {
	text string
	tok  dateToken
}{
	{"yyyy", tokYYYY}, {"yy", tokYY}, {"MM", tokMM}, {"dd", tokDD},
	{"HH", tokHH}, {"mm", tokMin}, {"GGGG", tokGGGG}, {"ww", tokWW},
}

func (t dateToken) width() int {
	switch t {
	case tokYYYY, tokGGGG:
		return 4
	}
	return 2
}

func (t dateToken) String() string {
	for _, n := range tokenNames {
		if n.tok == t {
			return "{" + n.text + "}"
		}
	}
	return "{seq}"
}

// part is a piece of a compiled template: literal text, a date token, or
// the counter.
type part struct {
	lit string
	tok dateToken
}

// Format is a compiled series: how a number of one of its periods reads.
// Get it from CompileSeries; it is immutable and safe for concurrent use.
type Format struct {
	s     Series
	loc   *time.Location
	parts []part
	width int   // N of {seq:N}
	pow   int64 // 10^width
	cap   int64 // counters per period: 10^N − Start
	size  int   // length of every number's text, in bytes
}

// CompileSeries checks a series' settings for a tag with step step and
// compiles them. Every error wraps ErrInvalidTag and names what is wrong:
// an unknown period or time zone, an unknown placeholder, a missing or
// second counter, a counter the step cannot fit in, date parts that cannot
// tell the periods apart or are finer than the period, a numeric form
// (period digits and counter) past 18 digits.
func CompileSeries(s Series, step int64) (*Format, error) {
	bad := func(format string, args ...any) (*Format, error) {
		return nil, fmt.Errorf("%w: series: "+format, append([]any{ErrInvalidTag}, args...)...)
	}
	if s.Period.labelDigits() == 0 {
		return bad("period %q, want minute, hour, day, week, month or year", s.Period)
	}
	loc := time.UTC
	if s.TZ != "" && s.TZ != "UTC" {
		l, err := time.LoadLocation(s.TZ)
		if err != nil || s.TZ == "Local" || strings.HasPrefix(s.TZ, "/") {
			return bad("time zone %q is not an IANA zone name such as Europe/Berlin", s.TZ)
		}
		loc = l
	}
	if len(s.Template) > MaxTemplateLen {
		return bad("template of %d bytes, want at most %d", len(s.Template), MaxTemplateLen)
	}
	if !utf8.ValidString(s.Template) {
		return bad("template %q is not UTF-8", s.Template)
	}
	f := &Format{s: s, loc: loc}
	seen := map[dateToken]bool{}
	rest := s.Template
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			open = len(rest)
		}
		if open > 0 {
			lit := rest[:open]
			for _, r := range lit {
				if r < 0x20 || r == 0x7f {
					return bad("template %q has the control character %U", s.Template, r)
				}
			}
			f.parts = append(f.parts, part{lit: lit})
			rest = rest[open:]
			continue
		}
		if rest[0] == '}' {
			return bad("template %q has a } without a {", s.Template)
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return bad("template %q has a { without a }", s.Template)
		}
		inner := rest[1:end]
		rest = rest[end+1:]
		if w, ok := strings.CutPrefix(inner, "seq:"); ok {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > 14 || w[0] == '+' {
				return bad("template %q: {seq:%s} wants a width of 1–14 digits", s.Template, w)
			}
			if f.width != 0 {
				return bad("template %q has two counters {seq:N}; want exactly one", s.Template)
			}
			f.width = n
			f.parts = append(f.parts, part{tok: tokSeq})
			continue
		}
		if inner == "" {
			return bad("template %q has an empty placeholder {}", s.Template)
		}
		for inner != "" {
			found := false
			for _, n := range tokenNames {
				if strings.HasPrefix(inner, n.text) {
					if seen[n.tok] {
						return bad("template %q shows %s twice", s.Template, n.tok)
					}
					seen[n.tok] = true
					f.parts = append(f.parts, part{tok: n.tok})
					inner = inner[len(n.text):]
					found = true
					break
				}
			}
			if !found {
				return bad("template %q has an unknown placeholder at %q: the date parts are yyyy yy MM dd HH mm GGGG ww, and the counter is seq:N", s.Template, inner)
			}
		}
	}
	if f.width == 0 {
		return bad("template %q has no counter: add {seq:N} (N digits, 1–14)", s.Template)
	}
	if seen[tokYYYY] && seen[tokYY] {
		return bad("template %q shows the year twice ({yyyy} and {yy})", s.Template)
	}
	year := seen[tokYYYY] || seen[tokYY]
	need := map[Period][]bool{
		Year:   {year},
		Month:  {year, seen[tokMM]},
		Day:    {year, seen[tokMM], seen[tokDD]},
		Hour:   {year, seen[tokMM], seen[tokDD], seen[tokHH]},
		Minute: {year, seen[tokMM], seen[tokDD], seen[tokHH], seen[tokMin]},
	}
	shows := func(p Period) bool {
		if p == Week {
			return seen[tokGGGG] && seen[tokWW] || year && seen[tokMM] && seen[tokDD]
		}
		for _, ok := range need[p] {
			if !ok {
				return false
			}
		}
		return true
	}
	if !shows(s.Period) {
		want := map[Period]string{
			Year: "{yyyy} (or {yy})", Month: "{yyyy} and {MM}", Day: "{yyyy}, {MM} and {dd}",
			Hour: "{yyyy}, {MM}, {dd} and {HH}", Minute: "{yyyy}, {MM}, {dd}, {HH} and {mm}",
			Week: "{GGGG} and {ww} (or {yyyy}, {MM} and {dd} of the week's Monday)",
		}[s.Period]
		return bad("template %q cannot show which %s a number belongs to: a %s series shows %s", s.Template, s.Period, s.Period, want)
	}
	finer := map[Period][]dateToken{
		Year:   {tokMM, tokDD, tokHH, tokMin, tokGGGG, tokWW},
		Month:  {tokDD, tokHH, tokMin, tokGGGG, tokWW},
		Week:   {tokHH, tokMin},
		Day:    {tokHH, tokMin, tokGGGG, tokWW},
		Hour:   {tokMin, tokGGGG, tokWW},
		Minute: {tokGGGG, tokWW},
	}[s.Period]
	for _, t := range finer {
		if seen[t] {
			return bad("template %q shows %s, which a %s series cannot fill (a number shows its period's start)", s.Template, t, s.Period)
		}
	}
	if s.Period == Week && (seen[tokGGGG] != seen[tokWW]) {
		return bad("template %q: {GGGG} and {ww} go together (the ISO week-numbering year and week)", s.Template)
	}
	f.pow = 1
	for range f.width {
		f.pow *= 10
	}
	if s.Start < 0 || s.Start >= f.pow {
		return bad("start %d, want 0–%d for a counter of %d digits", s.Start, f.pow-1, f.width)
	}
	f.cap = f.pow - s.Start
	if step > f.cap {
		return bad("step %d is more than the %d numbers a %s of {seq:%d} from %d holds: lower the step or widen the counter", step, f.cap, s.Period, f.width, s.Start)
	}
	if d := s.Period.labelDigits() + f.width; d > 18 {
		return bad("the numeric form (the %d digits of the %s and the %d of the counter) would be %d digits, more than the 18 that fit in 64 bits: narrow the counter", s.Period.labelDigits(), s.Period, f.width, d)
	}
	for _, p := range f.parts {
		if p.tok == tokSeq || p.tok == 0 {
			f.size += len(p.lit)
		}
		if p.tok != 0 {
			if p.tok == tokSeq {
				f.size += f.width
			} else {
				f.size += p.tok.width()
			}
		}
	}
	if f.size == f.s.Period.labelDigits()+f.width {
		// A template of digits only, as long as the numeric form, must be
		// the numeric form's order (label, then counter): otherwise one
		// text could be read as two numbers.
		for _, at := range []time.Time{time.Date(2031, 12, 29, 23, 58, 0, 0, loc), time.Date(2046, 1, 2, 3, 4, 0, 0, loc)} {
			l := f.label(at)
			before, after := f.render(l)
			text := string(appendPadded([]byte(before), f.pow-1, f.width)) + after
			if _, ok := allDigits(text); ok && text != strconv.FormatInt(f.Numeric(l, f.pow-1), 10) {
				return bad("template %q writes numbers in digits only, as many as their numeric form has, in another order: %q could be read two ways; add a letter or separator, or put the date before the counter", s.Template, text)
			}
		}
	}
	return f, nil
}

// Series returns the settings f was compiled from.
func (f *Format) Series() Series { return f.s }

// Capacity is how many numbers a period holds: 10^N − Start.
func (f *Format) Capacity() int64 { return f.cap }

// Location is the time zone of the periods.
func (f *Format) Location() *time.Location { return f.loc }

// CapacityText says the capacity in words: "at most 999,999 numbers a day".
func (f *Format) CapacityText() string {
	return "at most " + groupDigits(f.cap) + " numbers a" + map[bool]string{true: "n", false: ""}[f.s.Period == Hour] + " " + string(f.s.Period)
}

// groupDigits writes n with commas between groups of three digits.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// PeriodOf is the period an instant falls in: its label and start in the
// series' zone. The label is the period's name as a number (20261128 for a
// day); the start is the first instant with that label.
type PeriodOf struct {
	Label int64
	Start time.Time
	End   time.Time
}

// label is the label of the period containing t.
func (f *Format) label(t time.Time) int64 {
	lt := t.In(f.loc)
	y, mo, d := lt.Date()
	switch f.s.Period {
	case Year:
		return int64(y)
	case Month:
		return int64(y)*100 + int64(mo)
	case Week:
		wy, w := lt.ISOWeek()
		return int64(wy)*100 + int64(w)
	}
	day := int64(y)*10000 + int64(mo)*100 + int64(d)
	switch f.s.Period {
	case Day:
		return day
	case Hour:
		return day*100 + int64(lt.Hour())
	}
	return (day*100+int64(lt.Hour()))*100 + int64(lt.Minute())
}

// bounds returns the first instant of the period with label l and of the
// one after it, in the series' zone, or false if l names no period.
func (f *Format) bounds(l int64) (start, end time.Time, ok bool) {
	if f.s.Period == Week {
		y, w := l/100, l%100
		jan4 := time.Date(int(y), 1, 4, 0, 0, 0, 0, f.loc)
		monday := jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+int(w-1)*7)
		start = time.Date(monday.Year(), monday.Month(), monday.Day(), 0, 0, 0, 0, f.loc)
		end = time.Date(monday.Year(), monday.Month(), monday.Day()+7, 0, 0, 0, 0, f.loc)
		return start, end, w >= 1 && w <= 53 && y >= 1000 && f.label(start) == l
	}
	y, mo, d, h, mi := f.fields(l)
	if y < 1000 || y > 9999 {
		return start, end, false
	}
	start = time.Date(int(y), time.Month(mo), int(d), int(h), int(mi), 0, 0, f.loc)
	if f.s.Period == Hour || f.s.Period == Minute {
		// A local hour the clocks were set back over happens twice; the
		// period starts at the first.
		for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
			if f.label(start.Add(-back)) == l {
				start = start.Add(-back)
				break
			}
		}
	}
	switch f.s.Period {
	case Year:
		end = time.Date(int(y)+1, 1, 1, 0, 0, 0, 0, f.loc)
	case Month:
		end = time.Date(int(y), time.Month(mo)+1, 1, 0, 0, 0, 0, f.loc)
	case Day:
		end = time.Date(int(y), time.Month(mo), int(d)+1, 0, 0, 0, 0, f.loc)
	case Hour:
		end = time.Date(int(y), time.Month(mo), int(d), int(h)+1, 0, 0, 0, f.loc)
	case Minute:
		end = time.Date(int(y), time.Month(mo), int(d), int(h), int(mi)+1, 0, 0, f.loc)
	}
	return start, end, f.label(start) == l && end.After(start)
}

// Period returns the period t falls in.
func (f *Format) Period(t time.Time) PeriodOf {
	l := f.label(t)
	start, end, _ := f.bounds(l)
	if t.Before(start) || !t.Before(end) {
		// A minute the clocks were set back over happens twice, and bounds
		// gives the first; t is in the second.
		lt := t.In(f.loc)
		start = t.Add(-time.Duration(lt.Second())*time.Second - time.Duration(lt.Nanosecond()))
		end = start.Add(time.Minute)
	}
	return PeriodOf{Label: l, Start: start, End: end}
}

// fields splits the label of a period other than a week into the local
// year, month, day, hour and minute of its start.
func (f *Format) fields(l int64) (y, mo, d, h, mi int64) {
	mo, d = 1, 1
	switch f.s.Period {
	case Year:
		y = l
	case Month:
		y, mo = l/100, l%100
	case Day:
		y, mo, d = l/10000, l/100%100, l%100
	case Hour:
		y, mo, d, h = l/1000000, l/10000%100, l/100%100, l%100
	case Minute:
		y, mo, d, h, mi = l/100000000, l/1000000%100, l/10000%100, l/100%100, l%100
	}
	return y, mo, d, h, mi
}

// render returns the text of period l's numbers before the counter and
// after it.
func (f *Format) render(l int64) (before, after string) {
	y, mo, d, h, mi := f.fields(l)
	var wy, ww int64
	if f.s.Period == Week {
		wy, ww = l/100, l%100
		start, _, _ := f.bounds(l)
		st := start.In(f.loc)
		y, mo, d = int64(st.Year()), int64(st.Month()), int64(st.Day())
	}
	var b, a []byte
	cur := &b
	for _, p := range f.parts {
		switch p.tok {
		case 0:
			*cur = append(*cur, p.lit...)
		case tokSeq:
			cur = &a
		case tokYYYY:
			*cur = appendPadded(*cur, y, 4)
		case tokYY:
			*cur = appendPadded(*cur, y%100, 2)
		case tokMM:
			*cur = appendPadded(*cur, mo, 2)
		case tokDD:
			*cur = appendPadded(*cur, d, 2)
		case tokHH:
			*cur = appendPadded(*cur, h, 2)
		case tokMin:
			*cur = appendPadded(*cur, mi, 2)
		case tokGGGG:
			*cur = appendPadded(*cur, wy, 4)
		case tokWW:
			*cur = appendPadded(*cur, ww, 2)
		}
	}
	return string(b), string(a)
}

// appendPadded appends v (0 ≤ v < 10^width) as width digits.
func appendPadded(dst []byte, v int64, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for range width {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[i:]...)
}

// Numeric is the numeric form of a number: the period's label followed by
// the counter in N digits (20261128000123), for integer columns. It sorts
// by period label, then counter.
func (f *Format) Numeric(label, counter int64) int64 { return label*f.pow + counter }

// Decoded is what a series number says.
type Decoded struct {
	// Label is the period's label (20261128), Start and End its bounds.
	Label      int64
	Start, End time.Time
	// Counter is the counter as the number shows it; Seq is the real
	// counter (they differ in a masked series), from Start.
	Counter, Seq int64
	// Numeric is the number's numeric form, Text its template form.
	Numeric int64
	Text    string
}

// Parse reads a number of the series: its template form, or its numeric
// form (all digits, the period's label then the counter). It checks the
// text against the template (literal parts, digits, a date that names a
// period of the series) and returns the label and the counter as shown.
// Errors wrap ErrInvalidTag and say what does not match.
func (f *Format) Parse(text string) (label, counter int64, err error) {
	bad := func(format string, args ...any) (int64, int64, error) {
		return 0, 0, fmt.Errorf("%w: %q is not a number of this series (%s): "+format, append([]any{ErrInvalidTag, clip(text), f.s.Template}, args...)...)
	}
	numericLen := f.s.Period.labelDigits() + f.width
	if len(text) == f.size {
		label, counter, err = f.parseTemplate(text)
		if err == nil || len(text) != numericLen {
			return label, counter, err
		}
		if _, ok := allDigits(text); !ok {
			return label, counter, err
		}
	}
	if v, ok := allDigits(text); ok && len(text) == numericLen {
		if text[0] == '0' {
			// Numeric is an integer: its decimal form has no leading zero.
			return bad("as a numeric form, it starts with a zero")
		}
		label, counter = v/f.pow, v%f.pow
		if _, _, ok := f.bounds(label); !ok {
			return bad("as a numeric form, %d shows no %s", label, f.s.Period)
		}
		if counter < f.s.Start {
			return bad("as a numeric form, counter %d is below the series' start %d", counter, f.s.Start)
		}
		return label, counter, nil
	}
	return bad("it has %d bytes; the template's numbers have %d, their numeric form %d digits", len(text), f.size, numericLen)
}

// parseTemplate is Parse of the template form.
func (f *Format) parseTemplate(text string) (label, counter int64, err error) {
	bad := func(format string, args ...any) (int64, int64, error) {
		return 0, 0, fmt.Errorf("%w: %q is not a number of this series (%s): "+format, append([]any{ErrInvalidTag, clip(text), f.s.Template}, args...)...)
	}
	fields := map[dateToken]int64{}
	rest := text
	for _, p := range f.parts {
		if p.tok == 0 {
			if !strings.HasPrefix(rest, p.lit) {
				return bad("%q is not where %q should be", clip(rest), p.lit)
			}
			rest = rest[len(p.lit):]
			continue
		}
		w := f.width
		if p.tok != tokSeq {
			w = p.tok.width()
		}
		v, ok := allDigits(rest[:w])
		if !ok {
			return bad("%q is not the %d digits of %s", rest[:w], w, p.tok)
		}
		fields[p.tok] = v
		rest = rest[w:]
	}
	counter = fields[tokSeq]
	y := fields[tokYYYY]
	if _, ok := fields[tokYY]; ok {
		y = 2000 + fields[tokYY]
	}
	mo, d := fields[tokMM], fields[tokDD]
	switch f.s.Period {
	case Week:
		if _, ok := fields[tokWW]; ok {
			label = fields[tokGGGG]*100 + fields[tokWW]
		} else {
			if mo < 1 || mo > 12 || d < 1 || d > 31 || y < 1 {
				return bad("it shows no date")
			}
			label = f.label(time.Date(int(y), time.Month(mo), int(d), 12, 0, 0, 0, f.loc))
		}
	case Year:
		label = y
	case Month:
		label = y*100 + mo
	case Day:
		label = (y*100+mo)*100 + d
	case Hour:
		label = ((y*100+mo)*100+d)*100 + fields[tokHH]
	default:
		label = (((y*100+mo)*100+d)*100+fields[tokHH])*100 + fields[tokMin]
	}
	if _, _, ok := f.bounds(label); !ok {
		return bad("it shows no %s of zone %s", f.s.Period, f.loc)
	}
	if counter < f.s.Start {
		return bad("counter %d is below the series' start %d", counter, f.s.Start)
	}
	before, after := f.render(label)
	if want := string(appendPadded([]byte(before), counter, f.width)) + after; want != text {
		return bad("it shows no %s of the series (that %s's number would read %q)", f.s.Period, f.s.Period, want)
	}
	return label, counter, nil
}

// allDigits parses s as a non-negative decimal of at most 18 digits.
func allDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// seriesMark starts the description of a series tag's row: the settings
// are kept in the description column as "flakeid-series:v1 " followed by
// JSON, so that every store (and Leaf's leaf_alloc) keeps them as they are.
const seriesMark = "flakeid-series:v1 "

// storedSeries is the JSON a series tag's description holds.
type storedSeries struct {
	Series
	Description string `json:"description,omitempty"`
}

// encodeSeries returns the description a series tag's row keeps.
func encodeSeries(s Series, description string) (string, error) {
	b, err := json.Marshal(storedSeries{Series: s, Description: description})
	if err != nil {
		return "", err
	}
	d := seriesMark + string(b)
	if len(d) > 256 {
		return "", fmt.Errorf("%w: series: the settings and description take %d bytes of the 256 the description column holds: shorten the description or the template", ErrInvalidTag, len(d))
	}
	return d, nil
}

// decodeSeries reads a row's description: the series settings and the
// user's description, or nil and the description as it is.
func decodeSeries(d string) (*Series, string, error) {
	j, ok := strings.CutPrefix(d, seriesMark)
	if !ok {
		return nil, d, nil
	}
	var st storedSeries
	dec := json.NewDecoder(strings.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, d, fmt.Errorf("%w: a series tag's stored settings do not read: %v", ErrInvalidTag, err)
	}
	return &st.Series, st.Description, nil
}

// isPeriodRow reports whether a row name is a series' period row.
func isPeriodRow(name string) bool { return strings.Contains(name, periodSep) }

// periodRow is the name of the row of series tag's period label.
func periodRow(tag string, label int64) string {
	return tag + periodSep + strconv.FormatInt(label, 10)
}

// readSeries fills t.Series from a series tag's stored description. Stored
// settings that do not read are refused, never taken for a plain tag.
func readSeries(t Tag) (Tag, error) {
	s, d, err := decodeSeries(t.Description)
	if err != nil {
		return Tag{}, fmt.Errorf("tag %q: %w", t.Name, err)
	}
	t.Series, t.Description = s, d
	return t, nil
}
