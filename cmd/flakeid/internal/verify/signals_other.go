//go:build !unix

package verify

import (
	"errors"
	"os"
)

var errNoStop = errors.New("verify: pausing a process needs SIGSTOP (a Unix system)")

func stopProcess(*os.Process) error { return errNoStop }

func contProcess(*os.Process) error { return errNoStop }
