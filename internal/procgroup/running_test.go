package procgroup

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunning: a Running with no process refuses Pause and Resume; Start
// logs to a numbered file that Tail reads; AwaitReady returns once ready,
// names a process that exited, and gives up (killing it) after its wait;
// Kill may be called twice.
func TestRunning(t *testing.T) {
	var r Running
	if err := r.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause with no process: %v", err)
	}
	r.Kill() // no process: nothing to do
	dir := t.TempDir()
	pattern := filepath.Join(dir, "p.%d.log")

	exited, err := r.Start(exec.Command("sh", "-c", "echo hello; exit 3"), pattern)
	if err != nil {
		t.Fatal(err)
	}
	err = r.AwaitReady(t.Context(), exited, 5*time.Second, "sh", "serve", "nowhere", func() error { return errors.New("not yet") })
	if err == nil || !strings.Contains(err.Error(), "sh exited before serving on nowhere") || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("AwaitReady of an exited process: %v", err)
	}

	exited, err = r.Start(exec.Command("sleep", "30"), pattern)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	if err := r.AwaitReady(t.Context(), exited, 5*time.Second, "sleep", "serve", "x", func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("AwaitReady = %v after %d calls, want nil after 3", err, calls)
	}
	if err := r.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := r.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	err = r.AwaitReady(context.Background(), exited, 100*time.Millisecond, "sleep", "answer", "x", func() error { return errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "sleep did not answer on x within 100ms (never)") {
		t.Fatalf("AwaitReady past its wait: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the process still runs after AwaitReady gave up")
	}
	r.Kill()
	r.Kill()
	if got := r.Tail(100); got != "" {
		t.Errorf("the second start's log = %q, want empty", got)
	}
	if err := StartAgain(t.Context(), func(context.Context) error { calls++; return errors.New("busy") }); err == nil || calls != 3+5 {
		t.Errorf("StartAgain = %v after %d calls, want its error after 5", err, calls-3)
	}
}
