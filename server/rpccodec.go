package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The Connect handlers read requests with codecs of their own that refuse
// what the JSON API refuses: an unknown field (connect-go's default JSON
// codec discards it, and binary protobuf keeps it aside unread), and a
// field given twice in JSON. They replace connect-go's codecs under the
// same names ("proto", "json" and "json; charset=utf-8"), so every protocol
// (Connect, gRPC, gRPC-Web) and content type works as before. Answers are
// written as connect-go writes them. An error of a codec's Unmarshal is
// answered by connect-go as invalid_argument, with the message naming the
// field.

// rpcCodecs are the handler options that install the strict codecs.
func rpcCodecs() connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCodec(strictProtoCodec{}),
		connect.WithCodec(strictJSONCodec{name: "json"}),
		connect.WithCodec(strictJSONCodec{name: "json; charset=utf-8"}),
	)
}

func notProto(m any) error { return fmt.Errorf("%T is not a protobuf message", m) }

// strictProtoCodec is binary protobuf that refuses unknown fields.
type strictProtoCodec struct{}

// Name implements connect.Codec.
func (strictProtoCodec) Name() string { return "proto" }

// Marshal implements connect.Codec.
func (strictProtoCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, notProto(m)
	}
	return proto.Marshal(pm)
}

// MarshalAppend appends m's encoding to dst (connect-go uses it to reuse
// buffers).
func (strictProtoCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, notProto(m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

// MarshalStable encodes m deterministically (Connect GET requests).
func (strictProtoCodec) MarshalStable(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, notProto(m)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(pm)
}

// IsBinary reports that the encoding is binary.
func (strictProtoCodec) IsBinary() bool { return true }

// Unmarshal implements connect.Codec: it refuses a message with a field
// the schema does not have, naming its number. The service's messages are
// flat, so only the top level is checked.
func (strictProtoCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return notProto(m)
	}
	if err := proto.Unmarshal(data, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	if unknown := pm.ProtoReflect().GetUnknown(); len(unknown) > 0 {
		num, _, n := protowire.ConsumeTag(unknown)
		if n < 0 {
			return fmt.Errorf("unmarshal into %T: unknown fields", m)
		}
		return fmt.Errorf("unmarshal into %T: unknown field number %d (the message has no such field)", m, num)
	}
	return nil
}

// strictJSONCodec is protobuf's JSON mapping that refuses unknown fields
// (protojson refuses a field given twice, by either of its names).
type strictJSONCodec struct{ name string }

// Name implements connect.Codec.
func (c strictJSONCodec) Name() string { return c.name }

// Marshal implements connect.Codec.
func (strictJSONCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, notProto(m)
	}
	return protojson.Marshal(pm)
}

// MarshalAppend appends m's encoding to dst.
func (strictJSONCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, notProto(m)
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
}

// MarshalStable encodes m compactly (Connect GET requests): protojson
// orders fields by number, but varies its spacing.
func (c strictJSONCodec) MarshalStable(m any) ([]byte, error) {
	b, err := c.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// IsBinary reports that the encoding is text.
func (strictJSONCodec) IsBinary() bool { return false }

// Unmarshal implements connect.Codec.
func (strictJSONCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return notProto(m)
	}
	if len(data) == 0 {
		return errors.New("empty body: want a JSON object")
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(data, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}
