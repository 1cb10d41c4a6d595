package coord

import (
	"net/url"

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
