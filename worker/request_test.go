package worker

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRequestValidate(t *testing.T) {
	good := Request{Datacenter: 0, Workers: 1, Owner: "o", TTL: time.Millisecond}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v, want nil", good, err)
	}
	// The fields no coordinator needs are not checked.
	loose := good
	loose.Reserve, loose.Now, loose.Contract = time.Time{}, time.Unix(-1, 0), ""
	if err := loose.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v, want nil", loose, err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Request)
		want []string // what the error must say
	}{
		{"negative datacenter", func(r *Request) { r.Datacenter = -1 }, []string{"datacenter -1"}},
		{"no workers", func(r *Request) { r.Workers = 0 }, []string{"workers 0"}},
		{"negative workers", func(r *Request) { r.Workers = -7 }, []string{"workers -7"}},
		{"empty owner", func(r *Request) { r.Owner = "" }, []string{"owner empty"}},
		{"zero TTL", func(r *Request) { r.TTL = 0 }, []string{"TTL 0s"}},
		{"negative TTL", func(r *Request) { r.TTL = -time.Second }, []string{"TTL -1s"}},
		{"negative quarantine", func(r *Request) { r.Quarantine = -time.Millisecond }, []string{"quarantine -1ms"}},
		{"every field", func(r *Request) { *r = Request{Datacenter: -2, Quarantine: -time.Second} },
			[]string{"datacenter -2", "workers 0", "owner empty", "TTL 0s", "quarantine -1s"}},
	} {
		r := good
		tc.edit(&r)
		err := r.Validate()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate(%+v) = %v, want ErrInvalidConfig", tc.name, r, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate(%+v) = %q, want it to say %q", tc.name, r, err, w)
			}
		}
	}
}
