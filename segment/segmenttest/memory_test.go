package segmenttest

import (
	"maps"
	"testing"

	"go.uber.org/goleak"

	"github.com/flakeid/flakeid/segment"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type memConnector struct{ m *Memory }

func (c memConnector) Connect(*testing.T) segment.Store                { return c.m }
func (c memConnector) ConnectFaulty(*testing.T) (segment.Store, Fault) { return c.m, c.m }

func (c memConnector) Backup(*testing.T) func() {
	c.m.mu.Lock()
	saved := maps.Clone(c.m.tags)
	c.m.mu.Unlock()
	return func() {
		for name, t := range saved {
			c.m.SetMaxID(name, t.MaxID)
		}
	}
}

// TestMemoryConformance runs the suite against the reference store, which
// checks the suite itself.
func TestMemoryConformance(t *testing.T) {
	Run(t, Harness{Open: func(*testing.T) Connector { return memConnector{NewMemory()} }})
}
