// Package procgroup stops, continues and kills a test server's process
// group (a private ZooKeeper or Consul agent that a verifier or a test
// pauses): the server and whatever it started, as one.
package procgroup

import "errors"

// ErrNoStop is Stop's and Continue's on a system without SIGSTOP.
var ErrNoStop = errors.New("procgroup: pausing a process needs SIGSTOP (a Unix system)")
