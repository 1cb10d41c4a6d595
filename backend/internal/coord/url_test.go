package coord

import (
	"errors"
	"net/url"
	"testing"

	"github.com/flakeid/flakeid/worker"
)

func TestTakeQuery(t *testing.T) {
	u, err := url.Parse("redis://:pw@h:1/2?prefix=p&dial_timeout=2s&registry=r&registry=s")
	if err != nil {
		t.Fatal(err)
	}
	vals, rest := TakeQuery(u, "prefix", "registry", "table")
	if len(vals) != 3 || vals[0] != "p" || vals[1] != "r" || vals[2] != "" {
		t.Fatalf("values %q; want p, r (the first of two) and nothing", vals)
	}
	if got, want := rest.String(), "redis://:pw@h:1/2?dial_timeout=2s"; got != want {
		t.Fatalf("the rest is %s; want %s", got, want)
	}
	if u.RawQuery != "prefix=p&dial_timeout=2s&registry=r&registry=s" {
		t.Fatalf("TakeQuery changed its argument: %s", u)
	}
	// Nothing taken: the query is re-encoded all the same.
	u, _ = url.Parse("mysql://h/db?b=2&a=%2f")
	if _, rest := TakeQuery(u); rest.RawQuery != "a=%2F&b=2" {
		t.Fatalf("the rest's query is %s; want a=%%2F&b=2", rest.RawQuery)
	}
}

func TestInvalidURL(t *testing.T) {
	cause := errors.New("no etcd endpoint")
	err := InvalidURL(cause)
	if err.Error() != "no etcd endpoint" || !errors.Is(err, worker.ErrInvalidConfig) || !errors.Is(err, cause) {
		t.Fatalf("InvalidURL: %q (ErrInvalidConfig %v, the cause %v); want the cause's text, both visible",
			err, errors.Is(err, worker.ErrInvalidConfig), errors.Is(err, cause))
	}
}
