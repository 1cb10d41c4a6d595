package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// completionCmd is `flakeid completion bash|zsh|fish`: the shell code that
// makes the shell ask flakeid for completions. The shell runs the binary
// with COMP_LINE set; run answers it (kongplete) before parsing anything.
type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"The shell: ${enum}."`
}

// Run prints the code for c.Shell, naming this binary by its absolute path.
func (c *completionCmd) Run(out *streams) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary's path: %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return fmt.Errorf("finding this binary's path: %w", err)
	}
	q := shellQuote(bin)
	var code string
	switch c.Shell {
	case "bash":
		code = "# flakeid completion for bash: source <(flakeid completion bash), or add that line to ~/.bashrc\n" +
			"complete -C " + q + " flakeid\n"
	case "zsh":
		code = "# flakeid completion for zsh: source <(flakeid completion zsh), or add that line to ~/.zshrc\n" +
			"autoload -U +X bashcompinit && bashcompinit\n" +
			"complete -C " + q + " flakeid\n"
	case "fish":
		code = "# flakeid completion for fish: flakeid completion fish | source, or save it as ~/.config/fish/completions/flakeid.fish\n" +
			"function __flakeid_complete\n" +
			"    set -lx COMP_LINE (commandline -cp)\n" +
			"    test -z (commandline -ct); and set COMP_LINE \"$COMP_LINE \"\n" +
			"    " + q + "\n" +
			"end\n" +
			"complete -f -c flakeid -a '(__flakeid_complete)'\n"
	}
	_, err = fmt.Fprint(out.stdout, code)
	return err
}

// shellQuote quotes s for bash, zsh and fish alike (single quotes).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
