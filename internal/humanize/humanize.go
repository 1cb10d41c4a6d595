// Package humanize formats numbers for people: the CLI's output and the
// verifier's report.
package humanize

import "strconv"

// Thousands writes n with thousands separators: 4096000 → "4,096,000".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := 0
	if n < 0 {
		start = 1
	}
	digits := len(s) - start
	b := make([]byte, 0, len(s)+digits/3)
	b = append(b, s[:start]...)
	for i := start; i < len(s); i++ {
		if i > start && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}
