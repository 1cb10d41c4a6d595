//go:build !unix

package procgroup

import "os"

// Kill kills p.
func Kill(p *os.Process) { _ = p.Kill() }

// Stop needs SIGSTOP, which this system lacks.
func Stop(*os.Process) error { return ErrNoStop }

// Continue needs SIGCONT, which this system lacks.
func Continue(*os.Process) error { return ErrNoStop }
