package snowflake

import (
	"math"
	"testing"
	"time"
)

// TestNextNMaxIntHighTick asks NextN for math.MaxInt IDs while the state
// word's top bit is set (a 41/22 layout in the second half of its time field,
// so the tick fills bits 23–63), where first position + n − 1 does not fit in
// 64 bits: the batch must still run to the end of the tick and no further, and
// the IDs after it must come later.
func TestNextNMaxIntHighTick(t *testing.T) {
	l := Layout{TimeBits: 41, SequenceBits: 22, Epoch: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := mustNew(t, Settings{Layout: l})
	id := mustNext(t, g)
	if st := g.state.Load(); st>>63 == 0 {
		t.Fatalf("state %#x after the first ID: the top bit is not set, the test needs a later tick", st)
	}
	b, err := g.NextN(math.MaxInt)
	if err != nil {
		t.Fatalf("NextN(MaxInt): %v", err)
	}
	if b.First <= id || b.Count < 1 || b.Count > 1<<l.SequenceBits {
		t.Fatalf("NextN(MaxInt) after ID %d = %+v", id, b)
	}
	p, err := g.Layout().Decode(b.Last())
	if err != nil || p.Sequence != 1<<l.SequenceBits-1 {
		t.Fatalf("NextN(MaxInt) = %+v ends at %+v, %v; want the tick's last sequence", b, p, err)
	}
	if next := mustNext(t, g); next <= b.Last() {
		t.Fatalf("NextID = %d after a batch ending at %d", next, b.Last())
	}
	if got, want := g.Stats().Issued, uint64(b.Count)+2; got != want {
		t.Fatalf("Stats().Issued = %d, want %d", got, want)
	}
}
