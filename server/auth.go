package server

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorize checks the bearer token for a request: snowflake asks for
// Snowflake IDs, tag (when not "") for that segment tag, admin for tag
// changes. Without configured tokens everything is allowed.
func (s *Server) authorize(h http.Header, tag string, snowflake, admin bool) error {
	if s.tokens == nil {
		return nil
	}
	tok, err := s.token(h)
	if err != nil {
		return err
	}
	return tokenAllows(tok, tag, snowflake, admin)
}

// tokenAllows checks what authorize checks, for a token already found (an
// HTTP request's bearer token, or a RESP connection's AUTH).
func tokenAllows(tok *Token, tag string, snowflake, admin bool) error {
	switch {
	case snowflake && !tok.Snowflake:
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not take Snowflake IDs", tok.Name)
	case admin && !tok.Admin:
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not change tags", tok.Name)
	case tag != "" && !tokenHasTag(tok, tag):
		return apiErrorf(http.StatusForbidden, codeForbidden, "token %q may not use tag %q", tok.Name, tag)
	}
	return nil
}

// token returns the configured token whose secret the request's bearer
// token is; call it only when tokens are configured.
func (s *Server) token(h http.Header) (*Token, error) {
	auth := h.Get("Authorization")
	secret, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || secret == "" {
		return nil, apiErrorf(http.StatusUnauthorized, codeUnauth, "missing bearer token (Authorization: Bearer <token>)")
	}
	tok := s.lookupToken(secret)
	if tok == nil {
		return nil, apiErrorf(http.StatusUnauthorized, codeUnauth, "unknown bearer token")
	}
	return tok, nil
}

// lookupToken returns the configured token whose secret is secret, or nil,
// comparing against every token in constant time.
func (s *Server) lookupToken(secret string) *Token {
	var tok *Token
	for k, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(k), []byte(secret)) == 1 {
			tok = t
		}
	}
	return tok
}

func tokenHasTag(t *Token, tag string) bool {
	for _, x := range t.Tags {
		if x == "*" || x == tag {
			return true
		}
	}
	return false
}
