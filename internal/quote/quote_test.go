package quote

import (
	"strings"
	"testing"
)

func TestInput(t *testing.T) {
	if got := Input("abc"); got != `"abc"` {
		t.Errorf("Input(abc) = %s", got)
	}
	long := strings.Repeat("é", 30) // 60 bytes: cut at a rune boundary
	got := Input([]byte(long))
	if !strings.HasPrefix(got, `"`+strings.Repeat("é", MaxQuoted/2)+`"...`) || !strings.HasSuffix(got, "(60 bytes)") {
		t.Errorf("Input of 60 bytes = %s", got)
	}
}

func TestCharAt(t *testing.T) {
	for s, want := range map[string]string{"aé": `'é'`, "a\xff": "byte 0xff"} {
		if got := CharAt(s, 1); got != want {
			t.Errorf("CharAt(%q, 1) = %s, want %s", s, got, want)
		}
	}
}
