package server

import (
	_ "embed" // the OpenAPI document
	"net/http"
)

// openapiDocument is the OpenAPI 3.1 description of the HTTP/JSON API
// (docs/openapi.json is a copy), served at GET /openapi.json. The tests
// check every answer of the handler tests against it (openapi_test.go).
//
//go:embed openapi/openapi.json
var openapiDocument []byte

// serveOpenAPI answers GET /openapi.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openapiDocument)
}
