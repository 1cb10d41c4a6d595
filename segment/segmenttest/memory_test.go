package segmenttest

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/flakeid/flakeid/segment"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type memConnector struct{ m *Memory }

func (c memConnector) Connect(*testing.T) segment.Store                { return c.m }
func (c memConnector) ConnectFaulty(*testing.T) (segment.Store, Fault) { return c.m, c.m }

// TestMemoryConformance runs the suite against the reference store, which
// checks the suite itself.
func TestMemoryConformance(t *testing.T) {
	Run(t, Harness{Open: func(*testing.T) Connector { return memConnector{NewMemory()} }})
}
