package idmask_test

import (
	"encoding/hex"
	"fmt"

	"github.com/flakeid/flakeid/idmask"
)

// A fixed key, for reproducible output. A real key comes from crypto/rand
// and is kept secret, like any other 128-bit key.
var exampleKey, _ = hex.DecodeString("2b7e151628aed2a6abf7158809cf4f3c")

func ExampleNew() {
	m, err := idmask.New(exampleKey, 0, idmask.Bits63)
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Bits(), m.KeyID(), m.TextLen(idmask.Base32), m.TextLen(idmask.Base62))

	_, err = idmask.New(exampleKey[:8], 0, idmask.Bits63)
	fmt.Println(err)
	_, err = idmask.New(exampleKey, 0, 64)
	fmt.Println(err)
	// Output:
	// 63 0 15 13
	// idmask: invalid key: 8 bytes, want 16 (AES-128)
	// idmask: invalid width: 64 bits; want 63 (every non-negative int64) or 53 (IDs below 2^53)
}

func ExampleMasker_Mask() {
	m, _ := idmask.New(exampleKey, 0, idmask.Bits63)
	for id := int64(1000); id < 1003; id++ {
		masked, _ := m.Mask(id)
		back, _ := m.Unmask(masked)
		fmt.Println(id, masked, back)
	}
	_, err := m.Mask(-1)
	fmt.Println(err)
	// Output:
	// 1000 7998801687739167333 1000
	// 1001 8458254160419747265 1001
	// 1002 686530158643396468 1002
	// idmask: ID out of range: -1: want 0 to 2^63−1 (9223372036854775807)
}

func ExampleMasker_MaskText() {
	m, _ := idmask.New(exampleKey, 0, idmask.Bits63)
	b32, _ := m.MaskText(1000, idmask.Base32)
	b62, _ := m.MaskText(1000, idmask.Base62)
	fmt.Println(b32, b62)

	// Reading back: base32 in any case, base62 exactly.
	id, _ := m.UnmaskText(b32)
	fmt.Println(id)
	id, _ = m.UnmaskText(b62)
	fmt.Println(id)

	// A mistyped text is rejected.
	_, err := m.UnmaskText(b32[:5] + "X" + b32[6:])
	fmt.Println(err)
	// Output:
	// 06Y0BKR5N7SWK5* 09WsazIL51wjy
	// 1000
	// 1000
	// idmask: invalid text: base32 "06Y0BXR5N7SWK5*": check character mismatch: '*' at position 15 does not match the other characters; the text was mistyped or corrupted
}

func ExampleKeyring() {
	oldKey, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	old, _ := idmask.New(oldKey, 0, idmask.Bits53)
	text, _ := old.MaskText(42, idmask.Base32) // handed out before the rotation

	cur, _ := idmask.New(exampleKey, 1, idmask.Bits53)
	ring, _ := idmask.NewKeyring(cur, old)
	newText, _ := ring.MaskText(42, idmask.Base32)
	fmt.Println(text, newText)

	for _, s := range []string{text, newText} {
		id, err := ring.UnmaskText(s)
		fmt.Println(id, err)
	}

	// A keyring without the old key does not know key id 0.
	onlyNew, _ := idmask.NewKeyring(cur)
	_, err := onlyNew.UnmaskText(text)
	fmt.Println(err)
	// Output:
	// 02Q18BFW4F7YA 14CPB0W21DMVW
	// 42 <nil>
	// 42 <nil>
	// idmask: unknown key id: base32 "02Q18BFW4F7YA" was made with key id 0; this keyring has key id 1
}

func ExampleMasker_MaskN() {
	m, _ := idmask.New(exampleKey, 0, idmask.Bits63)
	ids := []int64{1000, 1001, 1002}
	masked := make([]int64, len(ids))
	if err := m.MaskN(masked, ids); err != nil {
		panic(err)
	}
	fmt.Println(masked) // the same values as Mask, one ID at a time

	// Unmasking in place.
	if err := m.UnmaskN(masked, masked); err != nil {
		panic(err)
	}
	fmt.Println(masked)

	// One bad ID fails the whole call and names it; nothing is written.
	err := m.MaskN(masked, []int64{7, -3, 9})
	fmt.Println(masked, err)
	// Output:
	// [7998801687739167333 8458254160419747265 686530158643396468]
	// [1000 1001 1002]
	// [1000 1001 1002] idmask: ID out of range: src[1] = -3: want 0 to 2^63−1 (9223372036854775807)
}

func ExampleMasker_AppendMaskTexts() {
	m, _ := idmask.New(exampleKey, 0, idmask.Bits63)
	ids := []int64{1000, 1001, 1002}
	buf, err := m.AppendMaskTexts(nil, ids, idmask.Base32, "\n")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", buf)

	// Without a separator, text i is at offset i·TextLen.
	buf, _ = m.AppendMaskTexts(buf[:0], ids, idmask.Base62, "")
	n := m.TextLen(idmask.Base62)
	fmt.Println(string(buf[n:2*n]), len(buf))
	// Output:
	// 06Y0BKR5N7SWK5*
	// 07ARE1B1DWKXE1H
	// 00K1RBHAWRGFVM*
	// 0A4otPjG1kGHV 39
}
