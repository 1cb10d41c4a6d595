package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/flakeid/flakeid/internal/suggest"
)

// A shape says what a JSON value in a file the user gives may look like, so
// that checkJSON can refuse what would otherwise be ignored silently: a key
// nothing reads (a typo such as "coordinater"), the same key twice, data
// after the value. A nil *shape allows any value.
//
// Only keys are checked: a value of the wrong type is left to the decoder
// that reads the file afterwards, whose messages already name the field.
type shape struct {
	// keys, when not nil, makes the value an object whose keys must be
	// among these; each maps to the shape of its value.
	keys map[string]*shape
	// aliases are other spellings of keys that are read as well (kong's
	// camelCase names), each mapped to the key it stands for. They are
	// accepted but never suggested.
	aliases map[string]string
	// listed are the keys an unknown-key message lists when no key is near
	// enough to suggest one (default: every key), and listNote qualifies
	// them (" of flakeid serve").
	listed   []string
	listNote string

	// elem, when not nil, makes the value an array whose every element
	// has this shape.
	elem *shape

	// scalar, when not "", is the kind of JSON value it must be, as kindOf
	// names it: "a number", "a boolean".
	scalar string
}

// checkJSON checks that data holds exactly one JSON value (nothing but space
// after it) of shape s, with no key twice in an object. Its errors say where
// (line and column for syntax, the key's path for keys) and, for an unknown
// key, which valid key was most likely meant.
func checkJSON(data []byte, s *shape) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return syntaxError(data, err)
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		line, col := position(data, len(data)-len(rest))
		return fmt.Errorf("line %d, column %d: data after the JSON value (one value per file)", line, col)
	}
	return checkValue(raw, s, jsonPath{})
}

// syntaxError describes a decoding error of data with its line and column.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("empty file: want a JSON value")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON value ends too soon (unexpected end of file)")
	case errors.As(err, &se):
		// Offset counts the bytes read, the offending one included.
		line, col := position(data, int(se.Offset)-1)
		return fmt.Errorf("line %d, column %d: %w", line, col, err)
	}
	return err
}

// position is the line and column (in bytes), both from 1, of the byte at
// index i of data.
func position(data []byte, i int) (line, col int) {
	i = min(max(i, 0), len(data))
	before := data[:i]
	line = bytes.Count(before, []byte("\n")) + 1
	col = i - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// jsonPath is where a value lies in the file: the keys and array positions
// leading to it.
type jsonPath []pathSeg

// pathSeg is one step of a jsonPath: a key, or an array position (from 0).
type pathSeg struct {
	key   string
	index int
	isKey bool
}

// withKey returns p followed by key, without sharing p's array.
func (p jsonPath) withKey(key string) jsonPath {
	return append(p[:len(p):len(p)], pathSeg{key: key, isKey: true})
}

// withIndex returns p followed by array position i, without sharing p's
// array.
func (p jsonPath) withIndex(i int) jsonPath {
	return append(p[:len(p):len(p)], pathSeg{index: i})
}

// split returns where the innermost array element on p lies, as a message
// says it (`entry 2`, `"tags" entry 2`; "" when p is in no array), and the
// keys after it.
func (p jsonPath) split() (where string, keys []string) {
	last := -1
	for i, seg := range p {
		if !seg.isKey {
			last = i
		}
	}
	var w []string
	for _, seg := range p[:last+1] {
		if seg.isKey {
			w = append(w, strconv.Quote(seg.key))
		} else {
			w = append(w, fmt.Sprintf("entry %d", seg.index+1))
		}
	}
	for _, seg := range p[last+1:] {
		keys = append(keys, seg.key)
	}
	return strings.Join(w, " "), keys
}

// name is the dotted path of key in the object at p, from the innermost
// array element on p ("mask.bits").
func (p jsonPath) name(key string) string {
	_, keys := p.split()
	return strings.Join(append(keys, key), ".")
}

// errorf is an error about the object or value at p: prefixed with the
// array element it is in, if any.
func (p jsonPath) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if where, _ := p.split(); where != "" {
		msg = where + ": " + msg
	}
	return errors.New(msg)
}

// wrongKind is the error for the value at p that should be want (an object,
// an array) but is raw.
func (p jsonPath) wrongKind(want string, raw json.RawMessage) error {
	if _, keys := p.split(); len(keys) > 0 {
		return p.errorf("key %q: want %s, not %s", strings.Join(keys, "."), want, kindOf(raw))
	}
	return p.errorf("want %s, not %s", want, kindOf(raw))
}

// checkValue checks the value raw at path p against s.
func checkValue(raw json.RawMessage, s *shape, p jsonPath) error {
	if s == nil {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil // a null is a zero value to every decoder
	}
	switch {
	case s.scalar != "":
		if kindOf(raw) != s.scalar {
			return p.wrongKind(s.scalar, raw)
		}
	case s.keys != nil:
		if raw[0] != '{' {
			return p.wrongKind(`a JSON object {"key": value, …}`, raw)
		}
		return checkObject(raw, s, p)
	case s.elem != nil:
		if raw[0] != '[' {
			return p.wrongKind("a JSON array […]", raw)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			return err
		}
		for i := 0; dec.More(); i++ {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			if err := checkValue(v, s.elem, p.withIndex(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// kindOf names the kind of JSON value raw (not null, not empty) is.
func kindOf(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// checkObject checks the object raw at p against s.keys: every key known
// (or an alias of one), none given twice, every value of its key's shape.
func checkObject(raw json.RawMessage, s *shape, p jsonPath) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	seen := map[string]string{} // key → how it was spelt
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		canon := key
		if a, ok := s.aliases[key]; ok {
			canon = a
		}
		sub, ok := s.keys[canon]
		if !ok {
			return unknownKey(key, v, s, p)
		}
		if prev, dup := seen[canon]; dup {
			if prev == key {
				return p.errorf("key %q is given twice", p.name(key))
			}
			return p.errorf("keys %q and %q are both given, and both set %q", p.name(prev), p.name(key), p.name(canon))
		}
		seen[canon] = key
		if err := checkValue(v, sub, p.withKey(key)); err != nil {
			return err
		}
	}
	return nil
}

// maxNestedHint is how many levels of nested objects unknownKey follows to
// find the flat key they stand for.
const maxNestedHint = 8

// unknownKey is the error for key, not among s's keys, with the value v, in
// the object at p. It suggests the nearest key; when v is an object it also
// tries the key path flattened ({"mask": {"bits": 53}} → "mask_bits"),
// because the flag names are flat.
func unknownKey(key string, v json.RawMessage, s *shape, p jsonPath) error {
	candidates := slices.Sorted(maps.Keys(s.keys))
	// Nested objects: follow the first key inward as far as objects go (a
	// few levels: each costs a pass over the rest of the value).
	path, flat, cur := []string{key}, key, bytes.TrimSpace(v)
	for len(path) <= maxNestedHint && len(cur) > 0 && cur[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(cur))
		if _, err := dec.Token(); err != nil || !dec.More() {
			break
		}
		tok, err := dec.Token()
		inner, _ := tok.(string)
		var next json.RawMessage
		if err != nil || dec.Decode(&next) != nil {
			break
		}
		path, flat, cur = append(path, inner), flat+"_"+inner, bytes.TrimSpace(next)
	}
	if len(path) > 1 {
		if best, ok := suggest.Nearest(flat, candidates); ok {
			return p.errorf("unknown key %q; did you mean %q? (nested objects are not read: the keys are flat)",
				p.name(strings.Join(path, ".")), p.name(best))
		}
	}
	if best, ok := suggest.Nearest(key, candidates); ok {
		return p.errorf("unknown key %q; did you mean %q?", p.name(key), p.name(best))
	}
	listed := s.listed
	if listed == nil {
		listed = candidates
	}
	return p.errorf("unknown key %q; the valid keys%s are: %s", p.name(key), s.listNote, strings.Join(listed, ", "))
}

// shapeOf is the shape of the JSON encoding/json decodes into a value of
// type t: the objects of structs (keys from the json tags, matched exactly,
// not ignoring case as encoding/json would), arrays of slices; anything for
// maps, interfaces and types that decode themselves.
func shapeOf(t reflect.Type) *shape {
	return shapeOfSeen(t, map[reflect.Type]*shape{})
}

// shapeOfSeen is shapeOf with the struct shapes made so far, so that a
// recursive type ends.
func shapeOfSeen(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(reflect.TypeFor[json.Unmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		if e := shapeOfSeen(t.Elem(), seen); e != nil {
			return &shape{elem: e}
		}
		// An array of anything: still an array, checked by its decoder.
		return nil
	case reflect.Struct:
		if s, ok := seen[t]; ok {
			return s
		}
		s := &shape{keys: map[string]*shape{}}
		seen[t] = s
		addFields(s, t, seen)
		return s
	}
	return nil
}

// addFields adds the JSON keys of struct type t's fields to s, those of
// untagged embedded structs included.
func addFields(s *shape, t reflect.Type, seen map[reflect.Type]*shape) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.keys[name] = shapeOfSeen(f.Type, seen)
	}
}

// strictUnmarshal decodes the JSON data into v (a pointer) after checkJSON
// has checked it against v's type: no unknown or doubled key anywhere, no
// data after the value.
func strictUnmarshal(data []byte, v any) error {
	if err := checkJSON(data, shapeOf(reflect.TypeOf(v))); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
