package server

import (
	crand "crypto/rand"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/snowflake"
)

// uuidMaker writes Snowflake IDs as UUIDv7, TypeID and ULID texts (see
// idview.View; docs/API.md has the bit map). The bits below the
// counter come from ChaCha8 generators seeded from crypto/rand (one per
// goroutine at a time, from a pool), a CSPRNG at a few nanoseconds a UUID.
//
// On a server that masks Snowflake IDs the payload is keyed instead
// (idmask.Keyring.MaskUUID), so that the counter (datacenter, worker,
// sequence) does not show. Such UUIDs sort by their millisecond only, as
// masked IDs do not sort at all.
type uuidMaker struct {
	view   *idview.View
	prefix string // the default TypeID prefix
	rngs   sync.Pool
}

func newUUIDMaker(l snowflake.Layout, prefix string) (*uuidMaker, error) {
	v, err := idview.New(l)
	if err != nil {
		return nil, err
	}
	return &uuidMaker{view: v, prefix: prefix}, nil
}

// rng takes a generator from the pool (put it back with putRNG).
func (u *uuidMaker) rng() *rand.ChaCha8 {
	if r, ok := u.rngs.Get().(*rand.ChaCha8); ok {
		return r
	}
	var seed [32]byte
	crand.Read(seed[:]) // never fails (crypto/rand.Read panics rather)
	return rand.NewChaCha8(seed)
}

func (u *uuidMaker) putRNG(r *rand.ChaCha8) { u.rngs.Put(r) }

// uuid returns the UUID of id: plain, or keyed by mk.
func (u *uuidMaker) uuid(id int64, mk *masking, r *rand.ChaCha8) (idview.UUID, error) {
	var random [10]byte
	binary.LittleEndian.PutUint64(random[2:], r.Uint64())
	if mk == nil {
		binary.LittleEndian.PutUint16(random[:2], uint16(r.Uint64()))
		out, err := u.view.UUID(snowflake.ID(id), random)
		if err != nil {
			return out, apiErrorf(http.StatusInternalServerError, codeInternal, "UUID of ID %d: %v", id, err)
		}
		return out, nil
	}
	out, err := mk.ring.MaskUUID(snowflake.ID(id), u.view, r.Uint64())
	if err != nil {
		return out, apiErrorf(http.StatusInternalServerError, codeInternal, "ID %d cannot be masked: %v", id, err)
	}
	return out, nil
}

// appendText appends the text of id in form f (with prefix for a TypeID).
func (u *uuidMaker) appendText(dst []byte, id int64, f idview.Form, prefix string, mk *masking, r *rand.ChaCha8) ([]byte, error) {
	v, err := u.uuid(id, mk, r)
	if err != nil {
		return dst, err
	}
	return v.AppendForm(dst, f, prefix), nil
}

// appendTexts appends the texts of the IDs of runs to buf: JSON strings
// separated by commas when json is set, else one per line. It writes buf
// out to w whenever it passes flushAt.
func (u *uuidMaker) appendTexts(w io.Writer, buf []byte, runs []run, f idview.Form, prefix string, mk *masking, json bool) ([]byte, error) {
	r := u.rng()
	defer u.putRNG(r)
	for i, id := range ids(runs) {
		if json {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
		}
		var err error
		if buf, err = u.appendText(buf, id, f, prefix, mk, r); err != nil {
			return buf, err
		}
		if json {
			buf = append(buf, '"')
		} else {
			buf = append(buf, '\n')
		}
		if len(buf) > flushAt {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	return buf, nil
}

// texts appends the texts of the IDs of runs to dst (the RPCs' texts).
func (u *uuidMaker) texts(dst []string, runs []run, f idview.Form, prefix string, mk *masking) ([]string, error) {
	r := u.rng()
	defer u.putRNG(r)
	var total int64
	for _, rn := range runs {
		total += rn.count
	}
	n := 36
	if f != idview.FormUUID {
		n = 27 + len(prefix)
	}
	buf := make([]byte, 0, int(total)*n)
	for _, id := range ids(runs) {
		var err error
		if buf, err = u.appendText(buf, id, f, prefix, mk, r); err != nil {
			return dst, err
		}
	}
	all := string(buf) // one allocation for every text
	for len(all) > 0 {
		k := n
		if f == idview.FormULID || f == idview.FormTypeID && prefix == "" {
			k = 26
		}
		dst = append(dst, all[:k])
		all = all[k:]
	}
	return dst, nil
}

// uuidQuery reads format and prefix of a request for Snowflake IDs: the
// form, or 0 when format is not a UUID form, and the TypeID prefix (the
// server's default when not given). A prefix with another format, or a bad
// prefix, is refused.
func (u *uuidMaker) query(format, prefix string, prefixGiven bool) (idview.Form, string, error) {
	f := idview.FormOf(format)
	if prefixGiven && f != idview.FormTypeID {
		return 0, "", apiErrorf(http.StatusBadRequest, codeInvalid, "prefix is for format=typeid (got format %q)", clip(format))
	}
	if f != idview.FormTypeID {
		return f, "", nil
	}
	if !prefixGiven {
		return f, u.prefix, nil
	}
	if err := idview.CheckTypeIDPrefix(prefix); err != nil {
		return 0, "", apiErrorf(http.StatusBadRequest, codeInvalid, "prefix: %v", err)
	}
	return f, prefix, nil
}

// readUUID reads a UUIDv7, TypeID or ULID text as one of this server's
// Snowflake IDs. masked says whether the text is read as a masked UUID
// (keyed payload; mayUnmask must allow it) or a plain one.
func (s *Server) readUUID(text string, masked bool, mayUnmask func() error) (decodeInput, error) {
	v, form, prefix, err := idview.ParseText(text)
	if err != nil {
		return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "%v", err)
	}
	in := decodeInput{uuid: v, form: form, prefix: prefix}
	if !masked {
		id, err := s.uuids.view.ID(v)
		if err != nil {
			return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "%v", err)
		}
		in.id = id
		return in, nil
	}
	if s.mask == nil {
		return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "this server has no mask keys, so it cannot read masked UUIDs")
	}
	id, keyID, err := s.mask.ring.UnmaskUUID(v, s.uuids.view)
	if err != nil {
		return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "%v", err)
	}
	if err := mayUnmask(); err != nil {
		return decodeInput{}, err
	}
	in.id, in.keyID, in.masked = id, keyID, text
	return in, nil
}

// readUUIDAs reads a UUID-shaped text for decode, as told by as: plain,
// masked, or (auto) masked exactly when the server masks Snowflake IDs.
func (s *Server) readUUIDAs(text, as string, mayUnmask func() error) (decodeInput, error) {
	switch as {
	case decodePlain:
		return s.readUUID(text, false, mayUnmask)
	case decodeMasked:
		return s.readUUID(text, true, mayUnmask)
	case decodeAuto:
		return s.readUUID(text, s.mask.forSnowflake() != nil, mayUnmask)
	}
	return decodeInput{}, apiErrorf(http.StatusBadRequest, codeInvalid, "as %q: want plain or masked (or nothing, to tell by the text)", clip(as))
}
