package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpCommand: flakeid help <command…> prints what <command…> --help
// prints, for every command; flakeid help alone, flakeid --help; an unknown
// command or a flag is an error naming it.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for path := range leafCommands(t) {
		words := strings.Fields(strings.TrimPrefix(path, "flakeid "))
		want := runCLI(t, append(words, "--help")...)
		got := runCLI(t, append([]string{"help"}, words...)...)
		if got.code != exitOK || got.stdout != want.stdout || want.stdout == "" {
			t.Errorf("flakeid help %s: exit %d, %d bytes; %s --help: %d bytes", strings.Join(words, " "), got.code, len(got.stdout), path, len(want.stdout))
		}
	}
	if got, want := runCLI(t, "help"), runCLI(t, "--help"); got.stdout != want.stdout {
		t.Errorf("flakeid help differs from flakeid --help")
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "workers", "nope"}, {"help", "--json"}} {
		r := runCLI(t, args...)
		if r.code == exitOK || !strings.Contains(r.stderr, args[len(args)-1]) {
			t.Errorf("flakeid %s: exit %d, stderr %q; want an error naming %q", strings.Join(args, " "), r.code, r.stderr, args[len(args)-1])
		}
	}
}

// TestCompletion: the shell code of flakeid completion registers the
// binary with bash (checked in bash itself), and the binary answers a
// shell's COMP_LINE with the commands, subcommands and flags that fit.
func TestCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	bin := proofBin.get(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(bin, "completion", sh).Output()
		if err != nil || !strings.Contains(string(out), shellQuote(bin)) {
			t.Errorf("flakeid completion %s: %v\n%s", sh, err, out)
		}
	}
	if r := runCLI(t, "completion", "tcsh"); r.code == exitOK || !strings.Contains(r.stderr, "tcsh") {
		t.Errorf("flakeid completion tcsh: exit %d %q", r.code, r.stderr)
	}
	script := filepath.Join(t.TempDir(), "c.bash")
	out, err := exec.Command(bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, out, 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := exec.Command("bash", "--norc", "-c", "source "+script+" && complete -p flakeid").CombinedOutput()
	if err != nil || !strings.Contains(string(reg), "complete -C "+shellQuote(bin)+" flakeid") && !strings.Contains(string(reg), "complete -C "+bin+" flakeid") {
		t.Errorf("bash after sourcing the code: %v %s", err, reg)
	}
	for line, want := range map[string][]string{
		"flakeid se":                  {"serve"},
		"flakeid workers ":            {"ls", "claims", "unclaim", "lower-mark", "schema"},
		"flakeid serve --resp-":       {"--resp-listen", "--resp-max-conns"},
		"flakeid serve --cors":        {"--cors-origin"},
		"flakeid completion ":         {"bash", "zsh", "fish"},
		"flakeid next --format base3": {"base32"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), respTimeout)
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), "COMP_LINE="+line)
		got, err := cmd.Output()
		cancel()
		if err != nil {
			t.Errorf("COMP_LINE=%q: %v", line, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains("\n"+string(got), "\n"+w+"\n") {
				t.Errorf("COMP_LINE=%q: %q, want %s among them", line, got, w)
			}
		}
	}
}
