package server

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/gen/flakeid/v1/flakeidv1connect"
	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/snowflake"
)

const (
	maskKeyOld = "000102030405060708090a0b0c0d0e0f"
	maskKeyNew = "f0e0d0c0b0a090807060504030201000"
)

// ring is the keyring a client holding the server's keys would build: the
// test's own reading of the server's masked IDs.
func ring(t *testing.T, bits int, keys ...MaskKey) *idmask.Keyring {
	t.Helper()
	var ms []*idmask.Masker
	for _, k := range keys {
		b, err := hex.DecodeString(k.Key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := idmask.New(b, k.ID, bits)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	r, err := idmask.NewKeyring(ms[0], ms[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func maskedFixture(t *testing.T, mc MaskConfig, mutate ...func(*Config)) *fixture {
	return newFixture(t, func(c *Config) {
		c.Mask = mc
		for _, m := range mutate {
			m(c)
		}
	})
}

func TestMaskedSnowflake(t *testing.T) {
	key := MaskKey{ID: 3, Key: maskKeyOld}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Snowflake: true})
	kr := ring(t, idmask.Bits63, key)
	st := f.node.Status()

	r := f.do(t, "GET", "/v1/snowflake/next?count=5", "")
	var body struct {
		Masked bool
		IDs    []string
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil || !body.Masked || len(body.IDs) != 5 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var prev int64
	for _, text := range body.IDs {
		if len(text) != 15 || text[0] != '3' {
			t.Fatalf("masked ID %q: want 15 base32 characters starting with key id 3", text)
		}
		id, err := kr.UnmaskText(text)
		if err != nil {
			t.Fatalf("unmask %q: %v", text, err)
		}
		if id <= prev {
			t.Fatalf("masked IDs %v unmask to non-increasing IDs", body.IDs)
		}
		prev = id
		if p, _ := f.node.Decode(snowflake.ID(id)); p.Worker != st.WorkerID {
			t.Fatalf("%q unmasks to an ID of worker %d, the node holds %d", text, p.Worker, st.WorkerID)
		}
	}

	// Leaf's path and text/plain answer masked texts too.
	if r := f.do(t, "GET", "/api/snowflake/get/x", ""); r.status != 200 || len(r.body) != 15 {
		t.Fatalf("Leaf path: %d %q", r.status, r.body)
	} else if id, err := kr.UnmaskText(r.body); err != nil || id <= prev {
		t.Fatalf("Leaf path %q: unmasks to %d, %v (after %d)", r.body, id, err, prev)
	}
	r = f.do(t, "GET", "/v1/snowflake/next?count=3", "", "Accept", "text/plain")
	lines := strings.Fields(r.body)
	if r.status != 200 || len(lines) != 3 {
		t.Fatalf("text/plain: %d %q", r.status, r.body)
	}
	for _, l := range lines {
		if _, err := kr.UnmaskText(l); err != nil {
			t.Fatalf("text/plain line %q: %v", l, err)
		}
	}
	// Masked IDs do not form runs.
	wantError(t, f.do(t, "GET", "/v1/snowflake/next?count=3&format=ranges", ""), 400, codeInvalid, "masked")
	// Segment IDs are not masked by this config.
	r = f.do(t, "GET", "/v1/segment/orders/next?count=2", "")
	if r.status != 200 || strings.Contains(r.body, "masked") {
		t.Fatalf("segment IDs should stay plain: %d %s", r.status, r.body)
	}
}

func TestMaskedTags(t *testing.T) {
	key := MaskKey{ID: 0, Key: maskKeyOld}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Tags: []string{"orders"}, Form: "base62"})
	kr := ring(t, idmask.Bits63, key)
	r := f.do(t, "GET", "/v1/segment/orders/next?count=4", "")
	var body struct {
		Tag    string
		Masked bool
		IDs    []string
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil || !body.Masked || body.Tag != "orders" || len(body.IDs) != 4 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var ids []int64
	for _, text := range body.IDs {
		if len(text) != 13 {
			t.Fatalf("base62 masked ID %q: want 13 characters", text)
		}
		id, err := kr.UnmaskTextAs(text, idmask.Base62)
		if err != nil {
			t.Fatalf("unmask %q: %v", text, err)
		}
		ids = append(ids, id)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			t.Fatalf("masked segment IDs unmask to %v, want consecutive", ids)
		}
	}
	if r := f.do(t, "GET", "/api/segment/get/orders", ""); r.status != 200 {
		t.Fatalf("Leaf segment path: %d %q", r.status, r.body)
	} else if id, err := kr.UnmaskText(r.body); err != nil || id != ids[3]+1 {
		t.Fatalf("Leaf segment path %q unmasks to %d, %v; want %d", r.body, id, err, ids[3]+1)
	}
	// Snowflake IDs stay plain decimal.
	r = f.do(t, "GET", "/v1/snowflake/next", "")
	if r.status != 200 || strings.Contains(r.body, "masked") {
		t.Fatalf("Snowflake IDs should stay plain: %d %s", r.status, r.body)
	}
}

func TestMaskedDecode(t *testing.T) {
	oldKey, newKey := MaskKey{ID: 0, Key: maskKeyOld}, MaskKey{ID: 1, Key: maskKeyNew}
	// Texts handed out under the old key...
	oldText := func() string {
		f := maskedFixture(t, MaskConfig{Keys: []MaskKey{oldKey}, Snowflake: true})
		return f.do(t, "GET", "/api/snowflake/get/x", "").body
	}()
	// ...still decode after rotating to the new key.
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{newKey, oldKey}, Snowflake: true})
	newText := f.do(t, "GET", "/api/snowflake/get/x", "").body
	if newText[0] != '1' || oldText[0] != '0' {
		t.Fatalf("key-id characters: new %q, old %q", newText, oldText)
	}
	kr := ring(t, idmask.Bits63, newKey, oldKey)
	for _, text := range []string{oldText, newText, strings.ToLower(newText)} {
		want, err := kr.UnmaskText(text)
		if err != nil {
			t.Fatal(err)
		}
		r := f.do(t, "GET", "/v1/decode/"+text, "")
		var d decodeJSON
		if r.status != 200 || json.Unmarshal([]byte(r.body), &d) != nil {
			t.Fatalf("decode %q: %d %s", text, r.status, r.body)
		}
		parts, _ := f.node.Decode(snowflake.ID(want))
		if int64(d.ID) != want || d.Masked != text || d.KeyID == nil || *d.KeyID != text[0]-'0' || d.Worker != parts.Worker || d.Sequence != parts.Sequence {
			t.Fatalf("decode %q = %+v; want id %d key %c worker %d", text, d, want, text[0], parts.Worker)
		}
		// Leaf's decode path reads masked IDs too.
		r = f.do(t, "GET", "/decodeSnowflakeId?snowflakeId="+text, "")
		if r.status != 200 || !strings.Contains(r.body, `"snowflakeId":"`+snowflake.ID(want).String()+`"`) {
			t.Fatalf("Leaf decode %q: %d %s", text, r.status, r.body)
		}
	}
	// Plain IDs still decode; ?as= forces a reading.
	id, _ := f.node.NextID()
	if r := f.do(t, "GET", "/v1/decode/"+id.String(), ""); r.status != 200 || strings.Contains(r.body, "masked") {
		t.Fatalf("plain decode: %d %s", r.status, r.body)
	}
	wantError(t, f.do(t, "GET", "/v1/decode/"+id.String()+"?as=masked", ""), 400, codeInvalid, "masked ID")
	wantError(t, f.do(t, "GET", "/v1/decode/"+newText+"?as=plain", ""), 400, codeInvalid, "")
	wantError(t, f.do(t, "GET", "/v1/decode/"+newText+"?as=both", ""), 400, codeInvalid, `as "both"`)
	// A corrupted masked text is reported as such, not decoded as something else.
	bad := []byte(newText)
	bad[5] = map[bool]byte{true: 'B', false: 'A'}[bad[5] == 'A']
	wantError(t, f.do(t, "GET", "/v1/decode/"+string(bad)+"?as=masked", ""), 400, codeInvalid, "check")
	// A text of a key the server does not have names the key id.
	other := maskedFixture(t, MaskConfig{Keys: []MaskKey{{ID: 7, Key: maskKeyNew}}, Snowflake: true})
	wantError(t, f.do(t, "GET", "/v1/decode/"+other.do(t, "GET", "/api/snowflake/get/x", "").body+"?as=masked", ""), 400, codeInvalid, "key id 7")
	// A server without keys says so.
	plainSrv := newFixture(t, nil)
	wantError(t, plainSrv.do(t, "GET", "/v1/decode/"+newText+"?as=masked", ""), 400, codeInvalid, "no mask keys")
}

// TestMaskedDecodeAmbiguous: a plain base32 Snowflake ID that also unmasks
// (its first character is the key id and its last a valid check character)
// reads both ways, so auto mode refuses it, naming both readings and ?as=;
// ?as=plain and ?as=masked each read it their way. On every API that
// decodes: /v1/decode, Leaf's /decodeSnowflakeId.
func TestMaskedDecodeAmbiguous(t *testing.T) {
	// The key id is the value of the first base32 digit of today's IDs, so
	// that their base32 texts start with the ring's key-id character.
	probe := newFixture(t, nil)
	first, _ := probe.node.NextID()
	keyID := uint8(strings.IndexByte("0123456789ABCDEFGHJKMNPQRSTVWXYZ", first.Base32()[0]))
	key := MaskKey{ID: keyID, Key: maskKeyOld}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Form: "base62", Snowflake: true})
	kr := ring(t, idmask.Bits63, key)
	for range 10_000 {
		id, err := f.node.NextID()
		if err != nil {
			t.Fatal(err)
		}
		text := id.Base32()
		if text[0] != first.Base32()[0] {
			continue
		}
		unmasked, err := kr.UnmaskText(text)
		if err != nil {
			continue
		}
		for _, path := range []string{"/v1/decode/" + text, "/decodeSnowflakeId?snowflakeId=" + text} {
			wantError(t, f.do(t, "GET", path, ""), 400, codeInvalid,
				fmt.Sprintf("%q reads both as a masked ID (key id %d) and as a plain ID (%d); say which with ?as=masked or ?as=plain", text, keyID, id))
		}
		var d decodeJSON
		r := f.do(t, "GET", "/v1/decode/"+text+"?as=plain", "")
		if r.status != 200 || json.Unmarshal([]byte(r.body), &d) != nil || d.ID != id || d.Masked != "" {
			t.Fatalf("?as=plain %q: %d %s", text, r.status, r.body)
		}
		d = decodeJSON{}
		r = f.do(t, "GET", "/v1/decode/"+text+"?as=masked", "")
		if r.status != 200 || json.Unmarshal([]byte(r.body), &d) != nil || int64(d.ID) != unmasked || d.Masked != text || d.KeyID == nil || *d.KeyID != keyID {
			t.Fatalf("?as=masked %q: %d %s (want %d)", text, r.status, r.body, unmasked)
		}
		r = f.do(t, "GET", "/decodeSnowflakeId?snowflakeId="+text+"&as=plain", "")
		if r.status != 200 || !strings.Contains(r.body, `"snowflakeId":"`+id.String()+`"`) {
			t.Fatalf("Leaf's decode with as=plain %q: %d %s", text, r.status, r.body)
		}
		return
	}
	t.Fatal("no base32 ID that also unmasks in 10,000 (expected about 1 in 62)")
}

// TestMaskedDecodeEveryForm: in auto mode a masked text a server hands out
// decodes to its ID in each form and width, unless it is also a valid plain
// ID — most base62 texts and most 53-bit texts are valid plain base32 or
// base58 — which is refused as ambiguous; ?as=masked reads every one.
func TestMaskedDecodeEveryForm(t *testing.T) {
	for _, tc := range []struct {
		form string
		bits int
	}{{"base32", idmask.Bits63}, {"base62", idmask.Bits63}, {"base32", idmask.Bits53}, {"base62", idmask.Bits53}} {
		for _, keyID := range []uint8{0, 2} {
			mk, err := newMasking(MaskConfig{Keys: []MaskKey{{ID: keyID, Key: maskKeyNew}}, Form: tc.form, Snowflake: true}, tc.bits)
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{mask: mk}
			form, _ := idmask.ParseForm(tc.form)
			alsoPlain := 0
			const n = 2000
			for i := range int64(n) {
				id := int64(1)<<(tc.bits-2) + i*4099
				text, err := mk.ring.MaskText(id, form)
				if err != nil {
					t.Fatal(err)
				}
				in, err := s.readID(text, decodeAuto, s.unmaskCheck(nil))
				if p, perr := snowflake.ParseAny(text); perr == nil {
					alsoPlain++
					want := fmt.Sprintf("%q reads both as a masked ID (key id %d) and as a plain ID (%d); say which with ?as=masked or ?as=plain", text, keyID, p)
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("%s/%d: auto read of %q, also plain: %+v, %v; want ambiguous", tc.form, tc.bits, text, in, err)
					}
				} else if err != nil || int64(in.id) != id || in.masked != text || in.keyID != keyID {
					t.Fatalf("%s/%d: auto read of %q (masked %d) = %+v, %v", tc.form, tc.bits, text, id, in, err)
				}
				if in, err := s.readID(text, decodeMasked, s.unmaskCheck(nil)); err != nil || int64(in.id) != id || in.masked != text || in.keyID != keyID {
					t.Fatalf("%s/%d: ?as=masked read of %q (masked %d) = %+v, %v", tc.form, tc.bits, text, id, in, err)
				}
			}
			t.Logf("%s, %d bits, key id %d: %d of %d masked texts are also valid plain IDs (ambiguous)", tc.form, tc.bits, keyID, alsoPlain, n)
			if tc.form == "base32" && tc.bits == idmask.Bits63 && alsoPlain != 0 {
				t.Errorf("the default form: %d masked texts also read as plain; want none", alsoPlain)
			}
		}
	}
}

// TestMaskedDecodeDecimal: decimal text is read as plain; one that also
// unmasks (an all-digit base62 masked text) is refused as ambiguous, and
// ?as= settles it. Text that is neither is refused naming both readings.
func TestMaskedDecodeDecimal(t *testing.T) {
	mk, err := newMasking(MaskConfig{Keys: []MaskKey{{ID: 3, Key: maskKeyOld}}, Form: "base62", Snowflake: true}, idmask.Bits63)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{mask: mk}
	m := mk.ring.Current()
	// A masked value whose base62 text is all digits: its digits are all
	// below 10, and the check character happens to be a digit too.
	var text string
	var internal int64
	for v := int64(1); text == ""; v++ {
		masked := int64(0)
		for x, pow := v, int64(1); x > 0; x, pow = x/10, pow*62 {
			masked += x % 10 * pow
		}
		id, err := m.Unmask(masked)
		if err != nil {
			t.Fatal(err)
		}
		if tx, _ := m.MaskText(id, idmask.Base62); isDecimal(tx) {
			text, internal = tx, id
		}
	}
	if _, err := s.readID(text, decodeAuto, s.unmaskCheck(nil)); err == nil || !strings.Contains(err.Error(), "?as=masked or ?as=plain") {
		t.Fatalf("auto read of the all-digit masked text %q: %v; want ambiguous", text, err)
	}
	if in, err := s.readID(text, decodeMasked, s.unmaskCheck(nil)); err != nil || int64(in.id) != internal {
		t.Fatalf("masked read of %q = %+v, %v; want %d", text, in, err, internal)
	}
	if in, err := s.readID(text, decodePlain, s.unmaskCheck(nil)); err != nil || in.id.String() != strings.TrimLeft(text, "0") || in.masked != "" {
		t.Fatalf("plain read of %q = %+v, %v", text, in, err)
	}
	if in, err := s.readID("1234567", decodeAuto, s.unmaskCheck(nil)); err != nil || in.id != 1234567 || in.masked != "" {
		t.Fatalf("auto read of 1234567 = %+v, %v", in, err)
	}
	if _, err := s.readID("3zz!", decodeAuto, s.unmaskCheck(nil)); err == nil || !strings.Contains(err.Error(), "neither a plain ID") || !strings.Contains(err.Error(), "nor a masked ID") {
		t.Fatalf("auto read of garbage: %v; want both readings named", err)
	}
}

func TestMaskedDecodeAuth(t *testing.T) {
	key := MaskKey{ID: 0, Key: maskKeyOld}
	tokens := []Token{
		{Name: "app", Token: "app-token-0123456789", Snowflake: true},
		{Name: "support", Token: "support-token-0123456789", Unmask: true},
	}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Snowflake: true}, func(c *Config) { c.Tokens = tokens })
	text := f.do(t, "GET", "/api/snowflake/get/x", "", "Authorization", "Bearer app-token-0123456789").body
	wantError(t, f.do(t, "GET", "/v1/decode/"+text, ""), 401, codeUnauth, "bearer")
	wantError(t, f.do(t, "GET", "/v1/decode/"+text, "", "Authorization", "Bearer app-token-0123456789"), 403, codeForbidden, "unmask")
	if r := f.do(t, "GET", "/v1/decode/"+text, "", "Authorization", "Bearer support-token-0123456789"); r.status != 200 {
		t.Fatalf("unmask token: %d %s", r.status, r.body)
	}
	// Plain decoding stays open.
	id, _ := f.node.NextID()
	if r := f.do(t, "GET", "/v1/decode/"+id.String(), ""); r.status != 200 {
		t.Fatalf("plain decode without a token: %d %s", r.status, r.body)
	}
}

func TestMaskedRPC(t *testing.T) {
	key := MaskKey{ID: 2, Key: maskKeyNew}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Snowflake: true, Tags: []string{"*"}})
	kr := ring(t, idmask.Bits63, key)
	c := flakeidv1connect.NewIDServiceClient(f.http.Client(), f.http.URL)
	ctx := t.Context()

	res, err := c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: 7}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Ranges) != 0 || len(res.Msg.MaskedIds) != 7 {
		t.Fatalf("NextSnowflake: %d ranges, %d masked IDs; want 0 and 7", len(res.Msg.Ranges), len(res.Msg.MaskedIds))
	}
	for _, text := range res.Msg.MaskedIds {
		if _, err := kr.UnmaskText(text); err != nil {
			t.Fatalf("NextSnowflake masked ID %q: %v", text, err)
		}
	}
	seg, err := c.NextSegment(ctx, connect.NewRequest(&flakeidv1.NextSegmentRequest{Tag: "orders", Count: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if len(seg.Msg.Ranges) != 0 || len(seg.Msg.MaskedIds) != 3 {
		t.Fatalf("NextSegment: %d ranges, %d masked IDs", len(seg.Msg.Ranges), len(seg.Msg.MaskedIds))
	}
	stream, err := c.StreamSnowflake(ctx, connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: 10, Batch: 4}))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for stream.Receive() {
		got += len(stream.Msg().MaskedIds)
		if len(stream.Msg().Ranges) != 0 {
			t.Fatal("stream message with ranges under masking")
		}
	}
	if err := stream.Err(); err != nil || got != 10 {
		t.Fatalf("stream: %d masked IDs, %v; want 10", got, err)
	}
	text := res.Msg.MaskedIds[0]
	want, _ := kr.UnmaskText(text)
	d, err := c.Decode(ctx, connect.NewRequest(&flakeidv1.DecodeRequest{Id: text}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Msg.GetId() != want || d.Msg.Masked != text || d.Msg.KeyId == nil || *d.Msg.KeyId != 2 {
		t.Fatalf("Decode %q = %v; want id %d, key id 2", text, d.Msg, want)
	}
	_, err = c.Decode(ctx, connect.NewRequest(&flakeidv1.DecodeRequest{Id: text, As: "plain"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("Decode as plain of a masked text: %v, want invalid argument", err)
	}
}

func TestMaskConfigValidate(t *testing.T) {
	good := MaskKey{ID: 0, Key: maskKeyOld}
	secret := "zz0102030405060708090a0b0c0d0e0f" // not hex; must not be echoed
	for _, tc := range []struct {
		name    string
		mc      MaskConfig
		mention string
	}{
		{"no keys", MaskConfig{Snowflake: true}, "no mask keys"},
		{"no keys for tags", MaskConfig{Tags: []string{"orders"}}, "no mask keys"},
		{"short key", MaskConfig{Keys: []MaskKey{{ID: 0, Key: "abcd"}}}, "4 characters long"},
		{"not hex", MaskConfig{Keys: []MaskKey{{ID: 0, Key: secret}}}, "not a hex digit"},
		{"key id", MaskConfig{Keys: []MaskKey{{ID: 32, Key: maskKeyOld}}}, "key id 32"},
		{"same id", MaskConfig{Keys: []MaskKey{good, {ID: 0, Key: maskKeyNew}}}, "listed twice"},
		{"form", MaskConfig{Keys: []MaskKey{good}, Form: "base64"}, `mask form "base64"`},
		{"tag", MaskConfig{Keys: []MaskKey{good}, Tags: []string{"bad tag!"}}, "mask tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Mask = tc.mc
			err := c.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("Validate = %v; want ErrInvalidConfig mentioning %q", err, tc.mention)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), maskKeyNew) {
				t.Fatalf("the error quotes a key: %v", err)
			}
		})
	}
	c := DefaultConfig()
	c.Mask = MaskConfig{Keys: []MaskKey{good}} // keys alone: decode only
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMaskBits(t *testing.T) {
	for _, tc := range []struct {
		preset string
		want   int
	}{{"default", 63}, {"twitter", 63}, {"sonyflake", 63}, {"jssafe", 53}} {
		l, err := snowflake.Preset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		if got := maskBits(l); got != tc.want {
			t.Errorf("maskBits(%s) = %d, want %d", tc.preset, got, tc.want)
		}
	}
}

func TestMaskStatus(t *testing.T) {
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{{ID: 4, Key: maskKeyNew}}, Tags: []string{"orders"}})
	r := f.do(t, "GET", "/v1/status", "")
	var st struct{ Mask *maskStatusJSON }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &st) != nil || st.Mask == nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if st.Mask.KeyID != 4 || st.Mask.Form != "base32" || st.Mask.Snowflake || len(st.Mask.Tags) != 1 || st.Mask.TextLen != 15 {
		t.Fatalf("mask status %+v", *st.Mask)
	}
	if strings.Contains(r.body, maskKeyNew) {
		t.Fatal("status shows the key")
	}
	if r := newFixture(t, nil).do(t, "GET", "/v1/status", ""); strings.Contains(r.body, `"mask"`) {
		t.Fatalf("status of a server without masking: %s", r.body)
	}
}

// TestMaskOutOfSpace: under the 53-bit width an ID of 2^53 or more cannot be
// masked; the answer is an error naming it, and nothing of the body is
// written first (a batch that crosses the limit is refused whole).
func TestMaskOutOfSpace(t *testing.T) {
	f := newFixture(t, nil)
	mk, err := newMasking(MaskConfig{Keys: []MaskKey{{ID: 0, Key: maskKeyOld}}, Tags: []string{"*"}}, idmask.Bits53)
	if err != nil {
		t.Fatal(err)
	}
	const limit = int64(1) << 53
	for _, runs := range [][]run{
		{{first: limit - 2, count: 5, stride: 1}},
		{{first: 1, count: 3, stride: 1}, {first: limit, count: 1, stride: 1}},
	} {
		w := &discardWriter{h: map[string][]string{}}
		req := httptestRequest("/v1/segment/big/next?count=5")
		err := f.srv.writeIDs(w, req, "big", runs, mk)
		if err == nil || !strings.Contains(err.Error(), "cannot be masked") || w.n != 0 {
			t.Fatalf("runs %v: error %v after %d bytes; want a masking error before any byte", runs, err, w.n)
		}
	}
	w := &discardWriter{h: map[string][]string{}}
	if err := f.srv.writeIDs(w, httptestRequest("/x"), "big", []run{{first: limit - 3, count: 3, stride: 1}}, mk); err != nil || w.n == 0 {
		t.Fatalf("IDs just below 2^53: %v (%d bytes)", err, w.n)
	}
}

// TestMaskedLargeBatch: answers larger than a masking chunk (256 IDs) and
// than the write buffer (30 KiB) hold every ID once, in order, in JSON and
// in text.
func TestMaskedLargeBatch(t *testing.T) {
	key := MaskKey{ID: 9, Key: maskKeyOld}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Tags: []string{"orders"}})
	kr := ring(t, idmask.Bits63, key)
	check := func(texts []string) {
		t.Helper()
		if len(texts) != 3001 {
			t.Fatalf("%d masked IDs, want 3001", len(texts))
		}
		var prev int64 = -1
		for i, text := range texts {
			id, err := kr.UnmaskText(text)
			if err != nil {
				t.Fatalf("text %d %q: %v", i, text, err)
			}
			if prev >= 0 && id != prev+1 {
				t.Fatalf("text %d unmasks to %d after %d", i, id, prev)
			}
			prev = id
		}
	}
	r := f.do(t, "GET", "/v1/segment/orders/next?count=3001", "")
	var body struct{ IDs []string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil {
		t.Fatalf("JSON: %d %.200s", r.status, r.body)
	}
	check(body.IDs)
	r = f.do(t, "GET", "/v1/segment/orders/next?count=3001", "", "Accept", "text/plain")
	if r.status != 200 || !strings.HasSuffix(r.body, "\n") {
		t.Fatalf("text: %d %.200s", r.status, r.body)
	}
	check(strings.Split(strings.TrimSuffix(r.body, "\n"), "\n"))
}

// isDecimal reports whether s is all digits.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// TestMaskedTextsInURLs: base32 texts end in one of Crockford's check
// symbols * ~ $ = U for about one in seven IDs (docs/OPERATIONS.md says to
// quote them in a shell and percent-encode them in a query string); every
// such text decodes from a URL path written as it is and percent-encoded,
// and from Leaf's query string percent-encoded.
func TestMaskedTextsInURLs(t *testing.T) {
	t.Parallel()
	key := MaskKey{ID: 1, Key: maskKeyNew}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Snowflake: true})
	kr := ring(t, idmask.Bits63, key)
	seen := map[byte]string{}
	for id := int64(1); len(seen) < 5 && id < 100_000; id++ {
		text, err := kr.MaskText(id, idmask.Base32)
		if err != nil {
			t.Fatal(err)
		}
		if c := text[len(text)-1]; strings.IndexByte("*~$=U", c) >= 0 && seen[c] == "" {
			seen[c] = text
		}
	}
	if len(seen) != 5 {
		t.Fatalf("check symbols seen: %v, want all of * ~ $ = U", seen)
	}
	for _, text := range seen {
		want, err := kr.UnmaskText(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/v1/decode/" + text, "/v1/decode/" + url.PathEscape(text),
			"/v1/decode/" + url.QueryEscape(text), "/decodeSnowflakeId?snowflakeId=" + url.QueryEscape(text)} {
			r := f.do(t, "GET", path, "")
			if r.status != 200 || !strings.Contains(r.body, fmt.Sprintf(`"id":"%d"`, want)) && !strings.Contains(r.body, fmt.Sprintf(`"snowflakeId":"%d"`, want)) {
				t.Errorf("GET %s: %d %s, want id %d", path, r.status, r.body, want)
			}
		}
	}
}
