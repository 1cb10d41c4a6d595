package snowflake

import (
	"fmt"
	"math/big"
	"time"
)

// Above returns l with the latest epoch, no later than l's own (normalized),
// under which every ID a generator issues from now on is greater than
// floor: the highest ID an earlier system issued, so that primary keys keep
// sorting after a move. The epoch is moved back only when l's own would put
// today's IDs at or below floor, and then to a whole millisecond.
//
// It fails with ErrTimeExhausted when floor leaves no room: when even the
// largest tick of l's time field is at or below floor, or when the epoch
// would have to move before 1970. Check the result's Capacity for how long
// it lasts. l must normalize, and be in OrderNodeSequence (ErrInvalidLayout).
func (l Layout) Above(floor ID, now time.Time) (Layout, error) {
	n, err := l.Normalize()
	if err != nil {
		return Layout{}, err
	}
	if n.Order != OrderNodeSequence {
		return Layout{}, fmt.Errorf("%w: layout %s: flakeid generates with the sequence lowest", ErrInvalidLayout, n)
	}
	below := uint(n.DatacenterBits + n.WorkerBits + n.SequenceBits)
	need := int64(0) // the first tick whose every ID is above floor
	if floor >= 0 {
		need = int64(floor)>>below + 1
	}
	if maxTick := int64(1)<<n.TimeBits - 1; need > maxTick {
		return Layout{}, fmt.Errorf("%w: ID %d is at or above the last tick of layout %s (the largest ID it composes is %d): no ID of it is above",
			ErrTimeExhausted, floor, n, maxTick<<below|(int64(1)<<below-1))
	}
	tick, err := n.tickAt(now)
	if err != nil {
		return Layout{}, err
	}
	if tick >= need {
		return n, nil
	}
	// now − need × unit, rounded down to a millisecond: the tick at now is
	// then at least need.
	back := new(big.Int).Mul(big.NewInt(need), big.NewInt(int64(n.TimeUnit)))
	ns := new(big.Int).Sub(big.NewInt(now.UnixNano()), back)
	ms := new(big.Int).Div(ns, big.NewInt(int64(time.Millisecond)))
	if ms.Sign() < 0 || !ms.IsInt64() {
		return Layout{}, fmt.Errorf("%w: for ID %d to be below today's IDs of layout %s, its epoch would have to move before 1970",
			ErrTimeExhausted, floor, n)
	}
	n.Epoch = time.UnixMilli(ms.Int64()).UTC()
	return n, nil
}
