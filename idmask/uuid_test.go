package idmask

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/snowflake"
)

// TestMaskUUIDRoundTrip checks random IDs of the default (63-bit) and
// jssafe (53-bit) layouts under random keys: the masked UUID is a UUIDv7 of
// the RFC variant (judged by google/uuid) with the ID's millisecond, it
// unmasks to the ID and key id (also after the key was rotated out of
// current), and a UUID with a payload bit changed is refused.
func TestMaskUUIDRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bits := rapid.SampledFrom([]int{Bits63, Bits53}).Draw(t, "bits")
		l := snowflake.DefaultLayout()
		if bits == Bits53 {
			l, _ = snowflake.Preset("jssafe")
		}
		v, err := idview.New(l)
		if err != nil {
			t.Fatal(err)
		}
		old, _ := New(rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "oldKey"), 4, bits)
		cur, _ := New(rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "curKey"), 9, bits)
		oldRing, _ := NewKeyring(old)
		ring, _ := NewKeyring(cur, old)
		tick := rapid.Int64Range(0, int64(1)<<l.TimeBits-1).Draw(t, "tick")
		id, err := l.Compose(snowflake.Parts{Tick: tick, Sequence: rapid.Int64Range(0, 1<<l.SequenceBits-1).Draw(t, "seq"),
			Worker: rapid.Int64Range(0, 1<<l.WorkerBits-1).Draw(t, "worker")})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			maskWith *Keyring
			keyID    uint8
		}{{ring, 9}, {oldRing, 4}} {
			u, err := tc.maskWith.MaskUUID(id, v, rapid.Uint64().Draw(t, "random"))
			if err != nil {
				t.Fatal(err)
			}
			g, err := uuid.Parse(u.String())
			if err != nil || g.Version() != 7 || g.Variant() != uuid.RFC4122 {
				t.Fatalf("MaskUUID(%d) = %s: google/uuid says version %d variant %v, %v", id, u, g.Version(), g.Variant(), err)
			}
			if u.UnixMilli() != v.UnixMilli(id) {
				t.Fatalf("MaskUUID(%d) = %s: time %d, want %d", id, u, u.UnixMilli(), v.UnixMilli(id))
			}
			back, keyID, err := ring.UnmaskUUID(u, v)
			if err != nil || back != id || keyID != tc.keyID {
				t.Fatalf("UnmaskUUID(MaskUUID(%d)) = %d key %d, %v; want key %d", id, back, keyID, err, tc.keyID)
			}
			bad := u
			bit := rapid.IntRange(70, 121).Draw(t, "bit") // inside the masked ID
			bad[bit/8] ^= 1 << (7 - bit%8)
			if got, _, err := ring.UnmaskUUID(bad, v); err == nil && got == id {
				t.Fatalf("a changed bit %d still unmasks to %d", bit, id)
			}
		}
	})
}

func TestUnmaskUUIDRefusals(t *testing.T) {
	v, _ := idview.New(snowflake.DefaultLayout())
	m, _ := New(make([]byte, KeySize), 2, Bits63)
	ring, _ := NewKeyring(m)
	other, _ := New(make([]byte, KeySize), 3, Bits63)
	otherRing, _ := NewKeyring(other)
	id := snowflake.ID(252305203246661632)
	u, _ := otherRing.MaskUUID(id, v, 0)
	if _, _, err := ring.UnmaskUUID(u, v); !errors.Is(err, ErrUnknownKeyID) {
		t.Fatalf("a UUID of key id 3: %v, want ErrUnknownKeyID", err)
	}
	plain, _ := v.UUID(id, [10]byte{})
	if _, _, err := ring.UnmaskUUID(plain, v); !errors.Is(err, ErrInvalidText) && !errors.Is(err, ErrUnknownKeyID) {
		t.Fatalf("a plain UUID: %v, want it refused", err)
	}
	v4 := uuid.New()
	if _, _, err := ring.UnmaskUUID(idview.UUID(v4), v); !errors.Is(err, ErrInvalidText) {
		t.Fatalf("a version 4 UUID: %v, want ErrInvalidText", err)
	}
	if _, err := ring.MaskUUID(-1, v, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("MaskUUID(-1): %v, want ErrOutOfRange", err)
	}
}
