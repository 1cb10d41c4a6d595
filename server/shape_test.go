package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// snakeCase turns protojson's lowerCamelCase field names into the JSON API's.
func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// postJSON posts body to url and decodes the JSON object answered.
func postJSON(t *testing.T, c *http.Client, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decodeObject(t, resp.Body)
}

func decodeObject(t *testing.T, r io.Reader) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecodeShapeEverywhere: the Connect answer of Decode has every field
// the JSON API's /v1/decode has, zeros included, with the same values, for
// IDs whose parts are zero or not.
func TestDecodeShapeEverywhere(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, nil)
	liveID, err := e.node.NextID()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{0, 1, 5, 1 << 22, 1<<22 | 1<<12 | 7, int64(liveID), 1<<63 - 1} {
		sid := strconv.FormatInt(id, 10)
		resp, err := e.client.Get(e.url + "/v1/decode/" + sid)
		if err != nil {
			t.Fatal(err)
		}
		httpAns := decodeObject(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/v1/decode/%s: %d %v", sid, resp.StatusCode, httpAns)
		}
		code, rpcAns := postJSON(t, e.client, e.url+"/flakeid.v1.IDService/Decode", `{"id":"`+sid+`"}`)
		if code != 200 {
			t.Fatalf("Decode %s: %d %v", sid, code, rpcAns)
		}
		got := map[string]string{}
		for k, v := range rpcAns {
			got[snakeCase(k)] = strings.Trim(strings.TrimSpace(jsonText(v)), `"`)
		}
		for k, v := range httpAns {
			w := strings.Trim(jsonText(v), `"`)
			if g, ok := got[k]; !ok {
				t.Errorf("Decode %s: no %q (the JSON API has %s)", sid, k, w)
			} else if g != w {
				t.Errorf("Decode %s: %s = %s, the JSON API says %s", sid, k, g, w)
			}
			delete(got, k)
		}
		for k, v := range got {
			t.Errorf("Decode %s: %s = %s, which the JSON API does not have", sid, k, v)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestErrorTextNotEscaped: the JSON API's error texts carry <, > and &
// as they are.
func TestErrorTextNotEscaped(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, nil)
	resp, err := e.client.Get(e.url + "/decodeSnowflakeId")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "snowflakeId=<id>") || strings.Contains(string(b), `\u003c`) {
		t.Fatalf("GET /decodeSnowflakeId: %d %s, want 400 with snowflakeId=<id> as it is", resp.StatusCode, b)
	}
}
