package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CORS: a browser page on another origin may call the JSON API, Connect,
// gRPC-Web and the Leaf paths when its origin is in Config.CORSOrigins.

// The request headers a cross-origin caller may send: auth, the JSON API's
// and Connect's, and gRPC-Web's (as connect-web and grpc-web send them).
const corsAllowHeaders = "Authorization, Content-Type, Accept, " +
	"Connect-Protocol-Version, Connect-Timeout-Ms, Connect-Accept-Encoding, Connect-Content-Encoding, " +
	"Grpc-Timeout, Grpc-Accept-Encoding, Grpc-Encoding, X-Grpc-Web, X-User-Agent"

// The answer headers a cross-origin caller may read: gRPC-Web's status in
// headers, and Retry-After of a 503.
const corsExposeHeaders = "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Retry-After, Content-Encoding, Connect-Content-Encoding"

// corsMaxAge is how long (seconds) a browser may keep a preflight's answer.
const corsMaxAge = "7200"

// validateCORSOrigins checks Config.CORSOrigins: each "*" or an origin
// "scheme://host[:port]" with no path, query or trailing slash.
func validateCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || o != strings.ToLower(u.Scheme)+"://"+u.Host {
			return fmt.Errorf("CORS origin %q: want * or scheme://host[:port] (http or https, no path, no trailing slash), as a browser sends it in Origin", o)
		}
	}
	return nil
}

// cors wraps h: with no origins it is h; otherwise an allowed origin's
// requests get Access-Control-Allow-Origin, and its preflights (OPTIONS with
// Access-Control-Request-Method) are answered 204 without reaching h. A
// preflight from another origin is answered 403 with a JSON error; its
// ordinary requests are served without CORS headers, so the browser keeps
// the answer from the page.
func cors(origins []string, h http.Handler) http.Handler {
	if len(origins) == 0 {
		return h
	}
	anyOrigin := slices.Contains(origins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		allowed := anyOrigin || slices.Contains(origins, origin)
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if preflight {
			w.Header().Add("Vary", "Access-Control-Request-Method")
			w.Header().Add("Vary", "Access-Control-Request-Headers")
			if !allowed {
				var body errorBody
				body.Error.Code = codeForbidden
				body.Error.Message = fmt.Sprintf("origin %q may not call this server (--cors-origin)", clip(origin))
				writeJSON(w, http.StatusForbidden, body)
				return
			}
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
			hd.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			hd.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		h.ServeHTTP(w, r)
	})
}
