package main

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"
)

// helpCmd is `flakeid help [command…]`: the --help of that command.
type helpCmd struct {
	Command []string `arg:"" optional:"" help:"The command, as typed after flakeid (workers ls); none: flakeid's own help."`
}

// Run prints the command's help the way its --help does (kong exits after
// printing it); a command that does not exist is a usage error naming it.
func (h *helpCmd) Run(kctx *kong.Context) error {
	if len(h.Command) > 0 && strings.HasPrefix(h.Command[0], "-") {
		return fmt.Errorf("help takes a command, not the flag %q: flakeid help serve", h.Command[0])
	}
	_, err := kctx.Kong.Parse(append(append([]string(nil), h.Command...), "--help"))
	if err != nil {
		return fmt.Errorf("no command %q: %v (flakeid --help lists the commands)", strings.Join(h.Command, " "), err)
	}
	return nil
}
