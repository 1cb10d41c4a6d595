package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flakeid/flakeid/internal/testenv"
)

// The documentation's client snippets (docs/OPERATIONS.md, "From your
// language") are run here as written, each with the client library a user
// installs, against a live server with a tokens file and a masked tag. A
// snippet is the fenced block after a line `<!-- snippet: NAME -->`; the test
// only replaces the documentation's host and port with the server's, puts the
// token in front of it and prints its variables after it.

// snippetDoc is the page whose snippets are run.
const snippetDoc = "../../docs/OPERATIONS.md"

// npmClients are the npm packages each JavaScript snippet runs with, as
// scripts/clients.sh installs them (keep the two in step).
var npmClients = map[string][]string{
	"ioredis":    {"ioredis@5.8.2"},
	"node-redis": {"redis@5.10.0", "redis@6.3.1"},
}

// docSnippets returns the page's snippets by name.
func docSnippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(snippetDoc)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- snippet: ([a-z-]+) -->\n```[a-z]+\n(.*?)```\n")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if _, dup := out[m[1]]; dup {
			t.Fatalf("%s: snippet %q twice", snippetDoc, m[1])
		}
		out[m[1]] = m[2]
	}
	return out
}

// TestDocSnippetsAllRun fails when a snippet of the page has no runner here,
// or a runner's snippet is gone from the page.
func TestDocSnippetsAllRun(t *testing.T) {
	got := docSnippets(t)
	want := []string{"python", "node-redis", "ioredis", "php", "go"}
	for _, name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s has no snippet %q", snippetDoc, name)
		}
		delete(got, name)
	}
	for name := range got {
		t.Errorf("%s: snippet %q is run by no test", snippetDoc, name)
	}
}

// snippetServer is a server for the snippets: tokens, auto-created tags and
// the masked tag invoices.
type snippetServer struct {
	host, port string
}

func startSnippetServer(t *testing.T) snippetServer {
	t.Helper()
	bin := proofBin.get(t)
	_, _, addr := startRESP(t, bin, "--auto-create-tags", "--tokens-file", respTokens(t),
		"--mask-tags", "invoices", "--mask-key", maskTestKey, "--mask-key-id", "2")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return snippetServer{host, port}
}

// place puts the server's address where the snippet has the documentation's.
func (s snippetServer) place(t *testing.T, snippet string) string {
	t.Helper()
	if !strings.Contains(snippet, "10.0.0.11") || !strings.Contains(snippet, "6380") {
		t.Fatalf("the snippet names no 10.0.0.11 and 6380:\n%s", snippet)
	}
	return strings.ReplaceAll(strings.ReplaceAll(snippet, "10.0.0.11", s.host), "6380", s.port)
}

// runSnippet runs name with args in dir and decodes the one JSON object it
// prints last; it returns the object and what the program wrote to stderr.
func runSnippet(t *testing.T, dir string, env []string, name string, args ...string) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 6*respTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	d := json.NewDecoder(strings.NewReader(lines[len(lines)-1]))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil {
		t.Fatalf("%s printed %q: %v\nstderr: %s", name, stdout.String(), err, stderr.String())
	}
	return out, stderr.String()
}

// snippetInts checks that v holds n decimal integers (JSON numbers or
// strings, as the client gave them) and returns them.
func snippetInts(t *testing.T, what string, v any, n int) []int64 {
	t.Helper()
	var elems []any
	switch v := v.(type) {
	case []any:
		elems = v
	default:
		elems = []any{v}
	}
	if len(elems) != n {
		t.Fatalf("%s: %d values (%v), want %d", what, len(elems), v, n)
	}
	out := make([]int64, len(elems))
	for i, e := range elems {
		var s string
		switch e := e.(type) {
		case json.Number:
			s = e.String()
		case string:
			s = e
		default:
			t.Fatalf("%s: element %d is %#v, want an integer", what, i, e)
		}
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: element %d: %v", what, i, err)
		}
		out[i] = x
	}
	return out
}

// checkSnippetIDs checks what every snippet takes: an order ID, the next 100
// of the tag in order, and a Snowflake ID (all of them with every digit: the
// Snowflake ID decodes to now, and no two IDs are equal).
func checkSnippetIDs(t *testing.T, lang string, order, ids, snowflake any) {
	t.Helper()
	o := snippetInts(t, lang+": the order ID", order, 1)[0]
	list := snippetInts(t, lang+": ID.NEXT orders 100", ids, 100)
	prev := o
	for i, id := range list {
		if id <= prev {
			t.Fatalf("%s: ID.NEXT orders 100: element %d is %d after %d", lang, i, id, prev)
		}
		prev = id
	}
	sf := snippetInts(t, lang+": the Snowflake ID", snowflake, 1)[0]
	if sf < 1<<53 {
		t.Fatalf("%s: the Snowflake ID %d is below 2^53: the test proves nothing about lost digits", lang, sf)
	}
}

// checkDistinct checks that v holds n distinct decimal strings of Snowflake
// IDs above 2^53 (what a client that rounds to float64 cannot give).
func checkDistinct(t *testing.T, what string, v any, n int) {
	t.Helper()
	ids := snippetInts(t, what, v, n)
	seen := map[int64]bool{}
	for _, id := range ids {
		if id < 1<<53 {
			t.Fatalf("%s: %d is below 2^53", what, id)
		}
		if seen[id] {
			t.Fatalf("%s: %d twice: digits lost", what, id)
		}
		seen[id] = true
	}
}

func TestDocSnippetPython(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const py = "/usr/bin/python3"
	needRESPClient(t, py, "python3-redis", "-c", "import redis")
	t.Parallel()
	s := startSnippetServer(t)
	code := "TOKEN = " + strconv.Quote(respTokAll) + "\n" + s.place(t, docSnippets(t)["python"]) + `
import json
print(json.dumps({"order_id": order_id, "ids": ids, "texts": [x.decode() for x in texts],
                  "snowflake_id": str(snowflake_id), "error": error}))
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "snippet.py"), []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := runSnippet(t, dir, nil, py, "snippet.py")
	checkSnippetIDs(t, "python", out["order_id"], out["ids"], out["snowflake_id"])
	checkMaskedTexts(t, "python", out["texts"])
	if e, _ := out["error"].(string); !strings.Contains(e, "invalid tag") {
		t.Errorf("python: the error of a bad tag is %q, want it to say invalid tag", e)
	}
}

// checkMaskedTexts checks three masked texts: not integers, all different.
func checkMaskedTexts(t *testing.T, lang string, v any) {
	t.Helper()
	texts, ok := v.([]any)
	if !ok || len(texts) != 3 {
		t.Fatalf("%s: ID.NEXT invoices 3 gave %#v, want 3 texts", lang, v)
	}
	seen := map[string]bool{}
	for _, x := range texts {
		s, _ := x.(string)
		if _, err := strconv.ParseInt(s, 10, 64); s == "" || err == nil || seen[s] {
			t.Fatalf("%s: ID.NEXT invoices 3 gave %v, want 3 different masked texts", lang, texts)
		}
		seen[s] = true
	}
}

// nodeDir is a directory for a JavaScript snippet whose node_modules is that
// of the npm package pkg in scripts/clients.sh's cache.
func nodeDir(t *testing.T, pkg string) string {
	t.Helper()
	cache := toolCache(t, "FLAKEID_TEST_NPM_DIR", "npm")
	mods := filepath.Join(cache, pkg, "node_modules")
	name := pkg[:strings.LastIndex(pkg, "@")]
	if _, err := os.Stat(filepath.Join(mods, name, "package.json")); err != nil {
		msg := pkg + " is not installed in " + cache + ": run ./scripts/clients.sh (./scripts/services.sh does)"
		if testenv.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDocSnippetNodeRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	needRESPClient(t, "node", "nodejs", "--version")
	t.Parallel()
	s := startSnippetServer(t)
	snippet := s.place(t, docSnippets(t)["node-redis"])
	for _, pkg := range npmClients["node-redis"] {
		t.Run(pkg, func(t *testing.T) {
			dir := nodeDir(t, pkg)
			// After the snippet: 1000 INCR snowflake at once (node-redis
			// pipelines them) on the snippet's client (RESP2) and on a
			// RESP3 copy of it.
			code := "const TOKEN = " + strconv.Quote(respTokAll) + ";\n" + snippet + `
const many = await Promise.all(Array.from({ length: 1000 }, () => client.incr("snowflake")));
const resp3 = await client.duplicate({ RESP: 3 }).connect();
const many3 = await Promise.all(Array.from({ length: 1000 }, () => resp3.incr("snowflake")));
const next3 = await resp3.sendCommand(["ID.NEXT", "snowflake", "5"]);
console.log(JSON.stringify({ orderId, ids, snowflakeId, batch, many, many3, next3 }));
process.exit(0);
`
			if err := os.WriteFile(filepath.Join(dir, "snippet.mjs"), []byte(code), 0o600); err != nil {
				t.Fatal(err)
			}
			out, _ := runSnippet(t, dir, nil, "node", "snippet.mjs")
			for _, k := range []string{"orderId", "snowflakeId"} {
				if _, ok := out[k].(string); !ok {
					t.Errorf("node-redis: %s is %#v, want a string (the type mapping)", k, out[k])
				}
			}
			checkSnippetIDs(t, pkg, out["orderId"], out["ids"], out["snowflakeId"])
			if b := snippetInts(t, pkg+": the batch", out["batch"], 2); b[1] != b[0]+1 {
				t.Errorf("%s: the batch %v, want two consecutive order IDs", pkg, b)
			}
			checkDistinct(t, pkg+": 1000 INCR snowflake (RESP2)", out["many"], 1000)
			checkDistinct(t, pkg+": 1000 INCR snowflake (RESP3)", out["many3"], 1000)
			checkDistinct(t, pkg+": ID.NEXT snowflake 5 (RESP3)", out["next3"], 5)
		})
	}
}

func TestDocSnippetIORedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	needRESPClient(t, "node", "nodejs", "--version")
	t.Parallel()
	s := startSnippetServer(t)
	pkg := npmClients["ioredis"][0]
	dir := nodeDir(t, pkg)
	code := "const TOKEN = " + strconv.Quote(respTokAll) + ";\n" + s.place(t, docSnippets(t)["ioredis"]) + `
const p = redis.pipeline();
for (let i = 0; i < 1000; i++) p.incr("snowflake");
const many = (await p.exec()).map(([err, v]) => err ? String(err) : v);
console.log(JSON.stringify({ orderId, ids, snowflakeId, many }));
redis.disconnect();
`
	if err := os.WriteFile(filepath.Join(dir, "snippet.mjs"), []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := runSnippet(t, dir, nil, "node", "snippet.mjs")
	checkSnippetIDs(t, pkg, out["orderId"], out["ids"], out["snowflakeId"])
	checkDistinct(t, pkg+": a pipeline of 1000 INCR snowflake", out["many"], 1000)
}

func TestDocSnippetPHP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	needRESPClient(t, "php", "php-cli php-redis", "-r", "new Redis();")
	t.Parallel()
	s := startSnippetServer(t)
	snippet := s.place(t, docSnippets(t)["php"])
	head, body, ok := strings.Cut(snippet, "\n")
	if head != "<?php" || !ok {
		t.Fatalf("the PHP snippet begins with %q, want <?php", head)
	}
	run := func(token string) (map[string]any, string) {
		code := head + "\ndefine('TOKEN', " + strconv.Quote(token) + ");\n" + body + `
echo json_encode(['orderId' => $orderId, 'ids' => $ids, 'snowflakeId' => $snowflakeId]), "\n";
`
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "snippet.php"), []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
		return runSnippet(t, dir, nil, "php", "snippet.php")
	}
	out, stderr := run(respTokAll)
	if stderr != "" {
		t.Errorf("php: stderr %q", stderr)
	}
	checkSnippetIDs(t, "php", out["orderId"], out["ids"], out["snowflakeId"])

	// An error reply other than ERR (NOPERM: the token may not use tag
	// orders) is an exception the snippet catches; a wrong token too.
	for token, want := range map[string]string{respTokOther: "flakeid: NOPERM", "wrong-token": "flakeid: WRONGPASS"} {
		out, stderr = run(token)
		if !strings.Contains(stderr, want) || out["orderId"] != false {
			t.Errorf("php with token %q: printed %v, stderr %q; want orderId false and %q", token, out, stderr, want)
		}
	}
}

func TestDocSnippetGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary and builds a program")
	}
	t.Parallel()
	s := startSnippetServer(t)
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github.com/redis/go-redis/v9 (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no github.com/redis/go-redis/v9")
	}
	sum, err := os.ReadFile("../../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	code := `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

func main() {
	ctx := context.Background()
	token := os.Getenv("TOKEN")
` + s.place(t, docSnippets(t)["go"]) + `
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"orderID": orderID, "ids": ids, "texts": texts, "snowflakeID": snowflakeID})
}
`
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module snippet\n\ngo 1.26\n\nrequire github.com/redis/go-redis/v9 " + string(m[1]) + "\n",
		"go.sum":  string(sum),
		"main.go": code,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := runSnippet(t, dir, []string{"TOKEN=" + respTokAll, "GOFLAGS=-mod=mod"}, "go", "run", ".")
	checkSnippetIDs(t, "go", out["orderID"], out["ids"], out["snowflakeID"])
	checkMaskedTexts(t, "go", out["texts"])
}

// toolCache is the directory of a tool the scripts install outside the
// repository: $env, or ~/.cache/flakeid/name.
func toolCache(t *testing.T, env, name string) string {
	t.Helper()
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".cache", "flakeid", name)
}
