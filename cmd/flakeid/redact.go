package main

import (
	"errors"
	"net/url"
	"strings"
)

// redactURL returns a coordinator or store URL fit for logs and error
// messages: the password of its user info masked (url.URL.Redacted; a Redis
// URL's redis://:password@host too), and the value of every query parameter
// whose name suggests a secret (password, pass, pwd, secret, token, key,
// auth, credentials, in any case and as part of a longer name such as
// sslpassword) masked as well. A URL that does not parse is not shown at
// all, since where its secret is cannot be told.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return redactedURL(u)
}

// redactedURL is redactURL of a parsed URL.
func redactedURL(u *url.URL) string {
	if u.RawQuery != "" {
		v := *u
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			name, _, ok := strings.Cut(p, "=")
			if dec, err := url.QueryUnescape(name); err == nil {
				name = dec
			}
			if ok && secretParam(name) {
				parts[i] = p[:strings.IndexByte(p, '=')] + "=xxxxx"
			}
		}
		v.RawQuery = strings.Join(parts, "&")
		u = &v
	}
	return u.Redacted()
}

// urlParseError is the reason of a url.Parse error without the URL, which
// may hold a password.
func urlParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// secretParam reports whether a query parameter of this name may carry a
// secret.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "pwd", "secret", "token", "key", "auth", "credential"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
