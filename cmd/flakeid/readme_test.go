package main

// The README's walkthrough, run as a newcomer runs it: every ```sh block of
// README.md that follows a line `<!-- walkthrough -->`, line by line, in
// order, against a fresh data directory.
//
// The lines a walkthrough block may hold (anything else fails the test, so
// that a new kind of step gets taught here rather than silently skipped):
//
//   - `go run ./cmd/flakeid ARGS`: the binary built from this package, run
//     with ARGS. `serve` starts in the background (on a free port instead of
//     127.0.0.1:8080) and runs until the end of the walkthrough; every other
//     command must exit 0.
//   - `curl [-s] [-S] [-X METHOD] [-H 'Name: value']… [-d BODY] URL`: the same
//     HTTP request to the server started before; it must answer 2xx.
//   - `./scripts/test.sh`: the test suite, which runs this test; skipped.
//
// Each line is split into words as a POSIX shell splits them ('…', "…",
// backslashes); 127.0.0.1:8080 in any word becomes the started server's
// address. A comment (`# …`) is prose, unless it holds "→": then the text
// after the arrow is the line's exact output, with every run of white space
// (newlines included) read as one space: `# → 1 2 3 4 5` is five lines 1 to 5.
//
// Every process gets a fresh HOME and XDG_STATE_HOME and no FLAKEID_
// variable, so the commands use the default data directory the README
// names, inside the test's temporary directory.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// walkthroughMarker is the line that makes the next ```sh block of the
// README part of the walkthrough.
const walkthroughMarker = "<!-- walkthrough -->"

// readmeStep is one line of the walkthrough.
type readmeStep struct {
	line  int      // 1-based line number in the README
	text  string   // the line as written
	words []string // the command, split as a shell splits it
	want  *string  // the exact output after "# →", or nil
}

// walkthrough extracts the steps of the walkthrough blocks of a README.
func walkthrough(readme string) ([]readmeStep, error) {
	lines := strings.Split(readme, "\n")
	var steps []readmeStep
	blocks := 0
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != walkthroughMarker {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j >= len(lines) || strings.TrimSpace(lines[j]) != "```sh" {
			return nil, fmt.Errorf("line %d: %s is not followed by a ```sh block", i+1, walkthroughMarker)
		}
		blocks++
		closed := false
		for j++; j < len(lines); j++ {
			text := lines[j]
			if strings.TrimSpace(text) == "```" {
				closed = true
				break
			}
			words, comment, err := shellWords(text)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v: %s", j+1, err, text)
			}
			if len(words) == 0 {
				continue
			}
			st := readmeStep{line: j + 1, text: strings.TrimSpace(text), words: words}
			if _, after, ok := strings.Cut(comment, "→"); ok {
				want := strings.TrimSpace(after)
				st.want = &want
			}
			steps = append(steps, st)
		}
		if !closed {
			return nil, fmt.Errorf("line %d: the walkthrough block never ends", i+1)
		}
		i = j
	}
	if blocks == 0 {
		return nil, fmt.Errorf("no %s block", walkthroughMarker)
	}
	return steps, nil
}

// shellWords splits a line into words as a POSIX shell does for the simple
// commands of a README ('…', "…" with \" \\ \$ \` escapes, a backslash
// outside quotes), and returns the comment (the text after a # that starts
// a word) apart.
func shellWords(line string) (words []string, comment string, err error) {
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, strings.TrimSpace(line[i+1:]), nil
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, "", errors.New("unterminated '")
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += 1 + end
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, "", errors.New(`unterminated "`)
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(line) {
				return nil, "", errors.New("a line continued with \\ (write each step on one line)")
			}
			i++
			cur.WriteByte(line[i])
			inWord = true
		case strings.IndexByte("|&;<>()$`*?[", c) >= 0:
			return nil, "", fmt.Errorf("%q: pipes, redirections, variables and globs are not run by the README test", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, "", nil
}

// checkOutput compares a step's output with its expected output, every run
// of white space read as one space.
func checkOutput(want, got string) error {
	w, g := strings.Join(strings.Fields(want), " "), strings.Join(strings.Fields(got), " ")
	if w != g {
		return fmt.Errorf("output %q, want %q", g, w)
	}
	return nil
}

// curlRequest turns the words of a curl line into an HTTP request.
func curlRequest(ctx context.Context, words []string) (*http.Request, error) {
	method, target, body := "", "", ""
	header := http.Header{}
	hasBody := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		next := func() (string, error) {
			if i+1 >= len(words) {
				return "", fmt.Errorf("%s needs a value", w)
			}
			i++
			return words[i], nil
		}
		var err error
		switch {
		case w == "-s" || w == "-S" || w == "-sS" || w == "-Ss" || w == "--silent" || w == "--show-error":
		case w == "-X" || w == "--request":
			method, err = next()
		case strings.HasPrefix(w, "-X"):
			method = w[2:]
		case w == "-H" || w == "--header":
			var h string
			if h, err = next(); err == nil {
				name, value, ok := strings.Cut(h, ":")
				if !ok {
					return nil, fmt.Errorf("header %q has no colon", h)
				}
				header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
		case w == "-d" || w == "--data" || w == "--data-raw":
			body, err = next()
			hasBody = true
		case strings.HasPrefix(w, "-"):
			return nil, fmt.Errorf("curl option %s is not known to the README test: teach curlRequest", w)
		default:
			if target != "" {
				return nil, fmt.Errorf("two URLs, %q and %q", target, w)
			}
			target = w
		}
		if err != nil {
			return nil, err
		}
	}
	if target == "" {
		return nil, errors.New("no URL")
	}
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	if method == "" {
		method = http.MethodGet
		if hasBody {
			method = http.MethodPost
		}
	}
	if hasBody && header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d sends it
	}
	req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if !hasBody {
		req.Body, req.ContentLength = nil, 0
	}
	req.Header = header
	return req, nil
}

// TestReadmeWalkthroughParsing: the extraction finds the marked blocks only,
// splits lines as a shell does, and a step whose output differs from its
// "# →" comment is an error.
func TestReadmeWalkthroughParsing(t *testing.T) {
	t.Parallel()
	readme := "# x\n```sh\ngo run ./cmd/flakeid layout # → not checked\n```\n" +
		walkthroughMarker + "\n\n```sh\n" +
		"go run ./cmd/flakeid next --tag 'a b' -n 5   # five → 1 2 3 4 5\n" +
		"\n" +
		`curl -XPOST 127.0.0.1:8080/v1/x -H 'Content-Type: application/json' -d "{\"tag\":\"#1\"}"` + "\n" +
		"```\n"
	steps, err := walkthrough(readme)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Fatalf("%d steps, want 2: %+v", len(steps), steps)
	}
	if got := strings.Join(steps[0].words, "|"); got != "go|run|./cmd/flakeid|next|--tag|a b|-n|5" {
		t.Errorf("words %s", got)
	}
	if steps[0].want == nil || *steps[0].want != "1 2 3 4 5" || steps[0].line != 8 {
		t.Errorf("step 0: %+v", steps[0])
	}
	if err := checkOutput(*steps[0].want, "1\n2\n3\n4\n5\n"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"1\n2\n3\n4\n6\n", "1 2 3 4", "12345"} {
		if checkOutput(*steps[0].want, bad) == nil {
			t.Errorf("output %q passed for %q", bad, *steps[0].want)
		}
	}
	req, err := curlRequest(t.Context(), steps[1].words)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.URL.String() != "http://127.0.0.1:8080/v1/x" ||
		req.Header.Get("Content-Type") != "application/json" || string(b) != `{"tag":"#1"}` || steps[1].want != nil {
		t.Errorf("curl request %s %s %v %s", req.Method, req.URL, req.Header, b)
	}
	for _, bad := range []string{
		walkthroughMarker + "\ntext\n",
		walkthroughMarker + "\n```sh\ngo run ./cmd/flakeid next\n",
		"no blocks",
		walkthroughMarker + "\n```sh\necho 'unterminated\n```\n",
		walkthroughMarker + "\n```sh\ngo run ./cmd/flakeid next | head\n```\n",
	} {
		if _, err := walkthrough(bad); err == nil {
			t.Errorf("walkthrough(%q) found no fault", bad)
		}
	}
	if _, err := curlRequest(t.Context(), []string{"curl", "-k", "x"}); err == nil {
		t.Error("an unknown curl option passed")
	}
}

// TestReadmeWalkthrough runs the README's walkthrough in order on a fresh
// machine, as far as a test can make one: a fresh HOME and XDG_STATE_HOME,
// no FLAKEID_ variable, the binary built from this package.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := walkthrough(string(b))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	bin := proofBin.get(t)
	root := t.TempDir()
	home, state := filepath.Join(root, "home"), filepath.Join(root, "state")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, envPrefix) && k != "HOME" && k != "XDG_STATE_HOME" {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "XDG_STATE_HOME="+state)
	dataDir := filepath.Join(state, "flakeid") // dataFlags.dir's default

	var server *exec.Cmd
	var serverLog bytes.Buffer
	var serverMu sync.Mutex
	serverDone := make(chan struct{})
	addr := ""
	defer func() {
		if server != nil {
			server.Process.Signal(syscall.SIGKILL) // after a clean stop, a no-op
			<-serverDone
		}
	}()
	for _, st := range steps {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("README.md line %d: %s\n%s", st.line, st.text, fmt.Sprintf(format, args...))
		}
		words := append([]string(nil), st.words...)
		for i, w := range words {
			if strings.Contains(w, "127.0.0.1:8080") {
				if addr == "" {
					fail("names 127.0.0.1:8080 before the walkthrough starts the server")
				}
				words[i] = strings.ReplaceAll(w, "127.0.0.1:8080", addr)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		var out string
		switch {
		case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/flakeid":
			args := words[3:]
			if len(args) > 0 && args[0] == "serve" {
				if server != nil {
					fail("a second serve")
				}
				if st.want != nil {
					fail("serve runs in the background: it has no output to check")
				}
				server = exec.Command(bin, append(args, "--listen", "127.0.0.1:0")...)
				server.Env = env
				server.Stderr = &syncWriter{mu: &serverMu, w: &serverLog}
				if err := server.Start(); err != nil {
					fail("%v", err)
				}
				go func() { server.Wait(); close(serverDone) }()
				re := regexp.MustCompile(`msg="flakeid: serving" addr=(\S+)`)
				waitFor(t, "the walkthrough's server to listen", 30*time.Second, func() bool {
					serverMu.Lock()
					defer serverMu.Unlock()
					select {
					case <-serverDone:
						fail("serve exited:\n%s", serverLog.String())
					default:
					}
					if m := re.FindStringSubmatch(serverLog.String()); m != nil {
						addr = m[1]
						return true
					}
					return false
				})
				cancel()
				continue
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				fail("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			out = stdout.String()
		case len(words) >= 1 && words[0] == "curl":
			req, err := curlRequest(ctx, words)
			if err != nil {
				fail("%v", err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				fail("%v", err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode/100 != 2 {
				fail("%s: %v\n%s", resp.Status, err, body)
			}
			out = string(body)
		case len(words) == 1 && words[0] == "./scripts/test.sh":
			// The test suite itself, which runs this test: not run again here.
			cancel()
			continue
		default:
			fail("neither `go run ./cmd/flakeid …` nor `curl …` (nor ./scripts/test.sh): teach readme_test.go to run it")
		}
		cancel()
		if st.want != nil {
			if err := checkOutput(*st.want, out); err != nil {
				fail("%v", err)
			}
		}
		t.Logf("README.md line %d: %s\n%s", st.line, st.text, out)
	}
	if server == nil {
		t.Fatal("the walkthrough never starts serve")
	}
	// The README says where the state lives, and serve's first line says it.
	serverMu.Lock()
	log := serverLog.String()
	serverMu.Unlock()
	if !strings.Contains(log, "data_dir="+dataDir) {
		t.Errorf("serve does not log data_dir=%s:\n%s", dataDir, log)
	}
	for _, f := range []string{"workers.db", "segments.db"} {
		if _, err := os.Stat(filepath.Join(dataDir, f)); err != nil {
			t.Errorf("the walkthrough's state is not where the README says: %v", err)
		}
	}
	if !strings.Contains(string(b), "~/.local/state/flakeid") || !strings.Contains(string(b), "$XDG_STATE_HOME/flakeid") {
		t.Error("README.md does not say where the default data directory is")
	}
	server.Process.Signal(syscall.SIGTERM)
	select {
	case <-serverDone:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM")
	}
	if c := server.ProcessState.ExitCode(); c != 0 {
		t.Errorf("serve exited %d after SIGTERM:\n%s", c, log)
	}
}
