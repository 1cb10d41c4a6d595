package idmask

import (
	"fmt"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/snowflake"
)

// Bits of a masked UUID's payload (rand_a and rand_b of a UUIDv7, 74
// bits): the key id, the masked ID, and random bits.
const (
	uuidKeyBits    = 5
	uuidIDBits     = 63
	uuidRandomBits = idview.PayloadBits - uuidKeyBits - uuidIDBits
)

// MaskUUID returns the masked UUIDv7 of id, an ID of v's layout: its time
// (v.UnixMilli) in the clear, so that the UUIDs still sort by millisecond,
// and a keyed payload in place of the plain view's counter, so that the
// datacenter, worker and sequence do not show. The payload is, from its top
// bit, the current key's id (5 bits), the ID masked with that key (63 bits;
// see Mask) and 6 bits of random. Two IDs never give the same UUID. It
// fails with ErrOutOfRange for an ID the keyring cannot mask or that does
// not fit the layout.
func (k *Keyring) MaskUUID(id snowflake.ID, v *idview.View, random uint64) (idview.UUID, error) {
	if _, err := v.Layout().Decode(id); err != nil {
		return idview.UUID{}, fmt.Errorf("%w: %v", ErrOutOfRange, err)
	}
	masked, err := k.current.Mask(int64(id))
	if err != nil {
		return idview.UUID{}, err
	}
	lo := uint64(masked)<<uuidRandomBits | random&(1<<uuidRandomBits-1)
	hi := uint16(k.current.keyID)<<uuidKeyBits | uint16(uint64(masked)>>(64-uuidRandomBits))
	return idview.NewUUIDv7(v.UnixMilli(id), hi, lo), nil
}

// UnmaskUUID returns the ID of v's layout that a masked UUID holds, and the
// id of the key it was masked with. It fails with ErrInvalidText when u is
// not a UUIDv7 of the RFC variant, or is not one MaskUUID made: the ID it
// unmasks to does not fit the layout or has another time than the UUID (a
// changed or foreign UUID passes that check about once in the number of
// milliseconds the layout spans); and with ErrUnknownKeyID for a key the
// ring does not have.
func (k *Keyring) UnmaskUUID(u idview.UUID, v *idview.View) (id snowflake.ID, keyID uint8, err error) {
	if err := u.CheckV7(); err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrInvalidText, err)
	}
	hi, lo := u.Payload()
	keyID = uint8(hi >> uuidKeyBits)
	m := k.byID[keyID]
	if m == nil {
		return 0, keyID, fmt.Errorf("%w: masked UUID %s was made with key id %d; this keyring has key id%s",
			ErrUnknownKeyID, u, keyID, k.keyIDs())
	}
	masked := int64(uint64(hi&(1<<uuidKeyBits-1))<<(64-uuidRandomBits) | lo>>uuidRandomBits)
	plain, err := m.Unmask(masked)
	if err != nil {
		return 0, keyID, fmt.Errorf("%w: masked UUID %s: %v", ErrInvalidText, u, err)
	}
	id = snowflake.ID(plain)
	if _, err := v.Layout().Decode(id); err != nil || v.UnixMilli(id) != u.UnixMilli() {
		return 0, keyID, fmt.Errorf("%w: %s is not a masked UUID of layout %s under key id %d: its time is not the time of the ID it unmasks to",
			ErrInvalidText, u, v.Layout(), keyID)
	}
	return id, keyID, nil
}
