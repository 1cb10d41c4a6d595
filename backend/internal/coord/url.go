package coord

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/flakeid/flakeid/internal/suggest"
	"github.com/flakeid/flakeid/worker"
)

// TakeQuery returns the values of the query parameters keys of u ("" for
// one not given; the first, for one given twice) and a copy of u without
// them, for a driver that must not see them (go-redis and the SQL drivers
// refuse parameters they do not know). The copy's query is re-encoded, in
// url.Values.Encode's order, whether or not a key was taken out.
func TakeQuery(u *url.URL, keys ...string) (vals []string, rest *url.URL) {
	q := u.Query()
	vals = make([]string, len(keys))
	for i, k := range keys {
		vals[i] = q.Get(k)
		q.Del(k)
	}
	v := *u
	v.RawQuery = q.Encode()
	return vals, &v
}

// InvalidURL marks err, something wrong in a coordinator URL, as a
// worker.ErrInvalidConfig without changing its text: the flakeid command
// shows it after the flag and the URL, in the words it always used.
// errors.Is and errors.As see both err and worker.ErrInvalidConfig.
func InvalidURL(err error) error { return invalidURL{err} }

// invalidURL is InvalidURL's error.
type invalidURL struct{ err error }

func (e invalidURL) Error() string   { return e.err.Error() }
func (e invalidURL) Unwrap() []error { return []error{worker.ErrInvalidConfig, e.err} }

// CheckParams refuses, as InvalidURL, a query parameter of u that is none
// of known, naming the nearest known one, and a known one given twice: a
// misspelt parameter (registy= for registry=) must never be ignored.
func CheckParams(u *url.URL, known ...string) error {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return InvalidURL(fmt.Errorf("query: %w", err))
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(known, k):
			return InvalidURL(UnknownParam(k, known))
		case len(q[k]) != 1:
			return InvalidURL(fmt.Errorf("%s= given %d times", k, len(q[k])))
		}
	}
	return nil
}

// CheckTypos refuses, as InvalidURL, a query parameter of u that is not one
// of ours but near one of them, for a URL whose other parameters pass to a
// driver that takes any name (a PostgreSQL runtime parameter, a MySQL
// system variable) or refuses it without saying what was meant.
func CheckTypos(u *url.URL, ours ...string) error {
	for k := range u.Query() {
		if slices.Contains(ours, k) {
			continue
		}
		if best, ok := suggest.Nearest(k, ours); ok {
			return InvalidURL(fmt.Errorf("unknown parameter %q: did you mean %s=?", k, best))
		}
	}
	return nil
}

// UnknownParam is the error of a query parameter key that is none of
// known: it names the nearest known one, if any is near, and every one.
func UnknownParam(key string, known []string) error {
	list := "none"
	if len(known) > 0 {
		list = strings.Join(known, ", ")
	}
	if best, ok := suggest.Nearest(key, known); ok {
		return fmt.Errorf("unknown parameter %q: did you mean %s=? (known: %s)", key, best, list)
	}
	return fmt.Errorf("unknown parameter %q (known: %s)", key, list)
}

// RefuseRegistry refuses, as InvalidURL, a registry= parameter in u.
// A coordinator keeps one datacenter registry, at a fixed place (registry:
// the key, path or table, to name), that every namespace on it shares:
// admission reads the ID space and the datacenter claims there, so that no
// two nodes on the coordinator can hold the same datacenter and worker id
// or use overlapping layouts, whatever their prefixes, paths or tables. A
// registry chosen per URL would split the coordinator into independent
// worlds that issue the same IDs, so the parameter is refused rather than
// ignored.
func RefuseRegistry(u *url.URL, registry string) error {
	if _, ok := u.Query()["registry"]; !ok {
		return nil
	}
	return InvalidURL(fmt.Errorf("registry= is not accepted: every namespace on a coordinator shares its one datacenter registry (%s), "+
		"so that two clusters on one coordinator can never hold the same datacenter and worker id or use two layouts; "+
		"remove the parameter (the nodes' namespaces keep their own prefixes, paths or tables), "+
		"and give a cluster that must stay apart a coordinator of its own", registry))
}

// InsideRegistry refuses, as InvalidURL, a namespace prefix (a key prefix or
// path, without a trailing "/") at or under the registry's: its keys would
// stand among the registry's entries, which every namespace of the
// coordinator reads as datacenter claims.
func InsideRegistry(prefix, registry string) error {
	if prefix != registry && !strings.HasPrefix(prefix, registry+"/") {
		return nil
	}
	return InvalidURL(fmt.Errorf("the prefix %s lies inside the datacenter registry %s, which every namespace of the coordinator shares: choose another", prefix, registry))
}
