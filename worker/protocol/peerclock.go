package protocol

import (
	"time"

	"github.com/flakeid/flakeid/worker"
)

// nodeClock is what a holder of a coordinator without a clock of its own
// (etcd, Consul) writes into its slot at Acquire (Slot.ClockMs): the node's
// clock, req.Now in Unix milliseconds, and how far ahead of it the request
// reserves, req.Reserve − req.Now, which the claim keeps for its renewals
// (nodeMs). A request without Now gives now() and ahead −1.
func nodeClock(req worker.Request, now func() time.Time) (nodeMs int64, ahead time.Duration) {
	if req.Now.IsZero() {
		return now().UnixMilli(), -1
	}
	return req.Now.UnixMilli(), req.Reserve.Sub(req.Now)
}

// nodeMs is the node's clock at a renewal reserving up to reserve, for a
// claim whose Acquire reserved ahead (nodeClock's): reserve − ahead, or
// now() when ahead < 0 (the request had no Now) or reserve is zero.
func nodeMs(ahead time.Duration, reserve time.Time, now func() time.Time) int64 {
	if ahead < 0 || reserve.IsZero() {
		return now().UnixMilli()
	}
	return reserve.Add(-ahead).UnixMilli()
}

// peerTime is Claim.Clock of a coordinator without a clock of its own
// (etcd, Consul): the newest clock that the datacenter's other live holders
// wrote into their slots, advanced by the time since it was read. Its
// zero value has read no peer. It is not safe for concurrent use (a claim
// guards it with its own lock).
type peerTime struct {
	peerMs             int64     // the newest clock of another live holder; 0 when none
	peerSent, peerRecv time.Time // when the read it came from was sent and answered
	at                 time.Time // Clock's answer
	stale              time.Duration
}

// Read keeps the newest clock of the other live holders, newestMs (0 when
// there is none), from a read sent at sent and answered at recv.
func (p *peerTime) Read(newestMs int64, sent, recv time.Time) {
	p.peerMs, p.peerSent, p.peerRecv = newestMs, sent, recv
}

// Update sets Clock's answer for an operation sent and answered at sent and
// recv. fresh says that the operation read the peers' clocks itself (Read
// with the same times); keyAge is how long before such a read a live peer
// may have written its clock key: the peer's clock was then in [value,
// value + keyAge]. From an older read the answer is advanced by at least
// sent − that read's answer, and made staler by the most that may have
// passed besides.
func (p *peerTime) Update(sent, recv time.Time, fresh bool, keyAge time.Duration) {
	if p.peerMs == 0 {
		p.at, p.stale = time.Time{}, 0
		return
	}
	if fresh {
		p.at, p.stale = MsTime(p.peerMs), keyAge
		return
	}
	// Between the read being served and this operation being served, at
	// least sent − peerRecv and at most recv − peerSent passed.
	p.at = MsTime(p.peerMs).Add(sent.Sub(p.peerRecv))
	p.stale = keyAge + recv.Sub(p.peerSent) - sent.Sub(p.peerRecv)
}

// Clock is the answer of the last Update, as worker.Claim.Clock reports it:
// the peers' clock lay in [at, at+stale] when that operation was served; a
// zero at means no other holder was live.
func (p *peerTime) Clock() (at time.Time, stale time.Duration) { return p.at, p.stale }

// Latest is the latest the peers' clock can read at local instant now, as
// the last Read saw it: a live peer wrote its clock key at most keyAge
// before that read was answered, and at most now − (when the read was sent)
// has passed since. The zero time when no other holder was live.
func (p *peerTime) Latest(now time.Time, keyAge time.Duration) time.Time {
	if p.peerMs == 0 {
		return time.Time{}
	}
	return MsTime(p.peerMs).Add(keyAge + now.Sub(p.peerSent))
}
