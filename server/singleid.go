package server

import (
	"net/http"
	"strings"
)

// The single-ID paths with a name wildcard, as {prefix}{name}{suffix}.
const (
	leafSnowflakePrefix = "/api/snowflake/get/"
	leafSegmentPrefix   = "/api/segment/get/"
	segmentNextPrefix   = "/v1/segment/"
	segmentNextSuffix   = "/next"
)

// singleIDRoute is a single-ID path whose pattern has one name wildcard:
// {prefix}{name}{suffix}.
type singleIDRoute struct {
	prefix, suffix string
	h              http.Handler
}

// matches reports whether a path is the route's with a name that is one
// clean segment.
func (rt singleIDRoute) matches(path string) bool {
	rest, ok := strings.CutPrefix(path, rt.prefix)
	if !ok {
		return false
	}
	name, ok := strings.CutSuffix(rest, rt.suffix)
	return ok && name != "" && name != "." && name != ".." && strings.IndexByte(name, '/') < 0
}

// pathName is the name segment of a request that reached a route of rt,
// through the mux or through singleIDPaths. It equals what the mux's
// wildcard holds: the mux serves only clean paths, and it unescapes a
// wildcard's segment just as r.URL.Path is unescaped.
func pathName(r *http.Request, prefix, suffix string) string {
	return strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix), suffix)
}

// singleIDPaths serves the single-ID paths with a name wildcard
// (/api/snowflake/get/{key}, /api/segment/get/{key},
// /v1/segment/{tag}/next) without ServeMux's matching, which allocates the
// wildcard's value on every request. It takes only plain GETs of clean,
// unescaped paths; anything else goes to the mux, which routes the same
// patterns to the same handlers, so the answers do not depend on which one
// served the request. (A HEAD, which the mux lets a GET pattern take,
// reaches the same handlers and is refused there: see endpoint.)
func singleIDPaths(mux *http.ServeMux, routes ...singleIDRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.RawPath == "" {
			for _, rt := range routes {
				if rt.matches(r.URL.Path) {
					rt.h.ServeHTTP(w, r)
					return
				}
			}
		}
		mux.ServeHTTP(w, r)
	})
}
