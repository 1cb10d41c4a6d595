package main

import (
	"os"
	"strings"
	"testing"
)

// TestReport reads a real `go test -json` stream (testdata/events.json, from
// a module with a failing test, a failing subtest, a skip, a panic, a
// time-out and a build error) and checks the live output and the account.
func TestReport(t *testing.T) {
	in, err := os.Open("testdata/events.json")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var live, account strings.Builder
	r := newReport(&live)
	if err := r.run(in); err != nil {
		t.Fatal(err)
	}
	r.writeFailures(&account)
	got := account.String()
	for _, want := range []string{
		"  FAIL tr/a TestBad (0.00s)\n      a_test.go:4: some log\n      a_test.go:4: want 1, got 2\n      second line\n",
		"  FAIL tr/a TestSub/x (0.00s)\n      a_test.go:5: sub broke\n",
		"  FAIL tr/b (the package failed while running TestOther) (0.01s)\n      panic: assignment to entry in nil map",
		"  FAIL tr/d (build failed: tr/d [tr/d.test]) (0.00s)\n      # tr/d [tr/d.test]\n      d/d_test.go:3:28: undefined: undefined\n",
		"  FAIL tr/c (the package failed while running TestHang) (3.01s)\n      panic: test timed out after 3s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the account lacks\n%s\nit is:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestSub (") {
		t.Errorf("a parent that failed only through its subtest is listed:\n%s", got)
	}
	if r.passed != 1 || r.failedN != 4 || r.skipped != 1 {
		t.Errorf("passed %d, failed %d, skipped %d; want 1, 4, 1", r.passed, r.failedN, r.skipped)
	}
	out := live.String()
	for _, want := range []string{"--- FAIL: TestBad", "FAIL\ttr/a\t", "d/d_test.go:3:28: undefined", "panic: test timed out after 3s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the live output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "=== RUN") || strings.Contains(out, "--- PASS") {
		t.Errorf("the live output has verbose lines:\n%s", out)
	}
	// The package's result line comes after the output of the test that
	// never ended.
	if i, j := strings.Index(out, "panic: test timed out"), strings.Index(out, "FAIL\ttr/c"); i < 0 || j < i {
		t.Errorf("tr/c's result line is not after its panic:\n%s", out)
	}
}

// TestReportSplitOutput: output split across events, and lines that are not
// events, come out whole and in order.
func TestReportSplitOutput(t *testing.T) {
	stream := `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: hal"}
{"Action":"output","Package":"p","Test":"TestA","Output":"f a line\n    a_test.go:10: no newline at the end"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":1.5}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.6s\n"}
{"Action":"fail","Package":"p","Elapsed":1.6}
`
	var live, account strings.Builder
	r := newReport(&live)
	if err := r.run(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r.writeFailures(&account)
	want := "  FAIL p TestA (1.50s)\n      a_test.go:9: half a line\n      a_test.go:10: no newline at the end\n"
	if account.String() != want {
		t.Errorf("account:\n%s\nwant:\n%s", account.String(), want)
	}
	wantLive := "go: downloading example.com/x v1.0.0\n    a_test.go:9: half a line\n    a_test.go:10: no newline at the end\nFAIL\tp\t1.6s\n"
	if live.String() != wantLive {
		t.Errorf("live:\n%q\nwant:\n%q", live.String(), wantLive)
	}
}
