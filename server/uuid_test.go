package server

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"
	"go.jetify.com/typeid"

	flakeidv1 "github.com/flakeid/flakeid/gen/flakeid/v1"
	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/internal/testenv"
	"github.com/flakeid/flakeid/snowflake"
)

// nextTexts asks the fixture for count Snowflake IDs with a query (format
// and more) and returns the JSON answer's ids.
func (f *fixture) nextTexts(t *testing.T, count int, query string, header ...string) []string {
	t.Helper()
	r := f.do(t, "GET", fmt.Sprintf("/v1/snowflake/next?count=%d&%s", count, query), "", header...)
	// A 503 is the node fenced while a renewal of the fixture's short
	// reservation is late on a loaded machine: a client retries it.
	for deadline := time.Now().Add(5 * time.Second); r.status == 503 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		r = f.do(t, "GET", fmt.Sprintf("/v1/snowflake/next?count=%d&%s", count, query), "", header...)
	}
	var body struct {
		IDs    []string `json:"ids"`
		Masked bool     `json:"masked"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &body) != nil || len(body.IDs) != count {
		t.Fatalf("next %s: %d %s", query, r.status, r.body)
	}
	return body.IDs
}

// decodeText decodes text with /v1/decode.
func (f *fixture) decodeText(t *testing.T, text string, header ...string) decodeJSON {
	t.Helper()
	r := f.do(t, "GET", "/v1/decode/"+url.PathEscape(text), "", header...)
	var d decodeJSON
	if r.status != 200 || json.Unmarshal([]byte(r.body), &d) != nil {
		t.Fatalf("decode %q: %d %s", text, r.status, r.body)
	}
	return d
}

// TestUUIDFormsHTTP asks for each UUID-shaped form over HTTP (JSON, text
// lines, Leaf's path) and judges the texts with google/uuid, oklog/ulid and
// jetify's typeid: version 7, RFC variant, the time flakeid decodes; the
// texts decode back to Snowflake IDs that are distinct and in issue order,
// and sort as text in the same order.
func TestUUIDFormsHTTP(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.TypeIDPrefix = "order" })
	var all []snowflake.ID
	check := func(texts []string, form, prefix string) {
		t.Helper()
		if !slices.IsSorted(texts) {
			t.Fatalf("%s texts do not sort in issue order: %v", form, texts)
		}
		for _, text := range texts {
			var u uuid.UUID
			switch form {
			case "uuid7":
				g, err := uuid.Parse(text)
				if err != nil || len(text) != 36 || text != strings.ToLower(text) {
					t.Fatalf("google/uuid.Parse(%q): %v", text, err)
				}
				u = g
			case "ulid":
				l, err := ulid.ParseStrict(text)
				if err != nil || text != strings.ToUpper(text) {
					t.Fatalf("ulid.ParseStrict(%q): %v", text, err)
				}
				u = uuid.UUID(l)
			case "typeid":
				tid, err := typeid.FromString(text)
				if err != nil || tid.Prefix() != prefix {
					t.Fatalf("typeid.FromString(%q) = prefix %q, %v; want prefix %q", text, tid.Prefix(), err, prefix)
				}
				u = uuid.MustParse(tid.UUID())
			}
			if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
				t.Fatalf("%s %q: version %d variant %v", form, text, u.Version(), u.Variant())
			}
			d := f.decodeText(t, text)
			sec, nsec := u.Time().UnixTime()
			if d.UnixMs != sec*1000+nsec/1e6 || d.Form != form || d.UUID != u.String() || d.Prefix != prefix {
				t.Fatalf("decode %q = %+v; google/uuid says %d ms, %s", text, d, sec*1000+nsec/1e6, u)
			}
			if len(all) > 0 && d.ID <= all[len(all)-1] {
				t.Fatalf("%s %q decodes to ID %d, not after %d", form, text, d.ID, all[len(all)-1])
			}
			all = append(all, d.ID)
		}
	}
	check(f.nextTexts(t, 40, "format=uuid7"), "uuid7", "")
	check(f.nextTexts(t, 40, "format=ulid"), "ulid", "")
	check(f.nextTexts(t, 40, "format=typeid"), "typeid", "order") // the server's default prefix
	check(f.nextTexts(t, 40, "format=typeid&prefix=user_account"), "typeid", "user_account")
	// Text lines, and Leaf's path.
	r := f.do(t, "GET", "/v1/snowflake/next?count=5&format=ulid", "", "Accept", "text/plain")
	lines := strings.Fields(r.body)
	if r.status != 200 || len(lines) != 5 {
		t.Fatalf("text lines: %d %q", r.status, r.body)
	}
	check(lines, "ulid", "")
	r = f.do(t, "GET", "/api/snowflake/get/any?format=typeid&prefix=game", "")
	if r.status != 200 || !strings.HasPrefix(r.body, "game_") {
		t.Fatalf("Leaf path typeid: %d %q", r.status, r.body)
	}
	check([]string{r.body}, "typeid", "game")
	// Refusals, each before an ID is taken, naming the problem.
	for query, mention := range map[string]string{
		"format=uuid4":                                    `format "uuid4"`,
		"format=ulid&prefix=order":                        "prefix is for format=typeid",
		"format=typeid&prefix=Order":                      "TypeID prefix",
		"format=typeid&prefix=_order":                     "underscore",
		"format=ranges&prefix=order":                      "prefix is for format=typeid",
		"format=typeid&prefix=" + strings.Repeat("a", 64): "at most 63",
	} {
		path := "/v1/snowflake/next?" + query
		wantError(t, f.wantNothingTaken(t, path, func() reply { return f.do(t, "GET", path, "") }), 400, codeInvalid, mention)
	}
	wantError(t, f.do(t, "GET", "/v1/segment/orders/next?format=uuid7", ""), 400, codeInvalid, "carry no time")
	wantError(t, f.do(t, "GET", "/v1/segment/orders/next?prefix=x", ""), 400, codeInvalid, "unknown query parameter")
	// Decoding refuses what is not one of flakeid's, naming why.
	for text, mention := range map[string]string{
		uuid.New().String():                    "version 4",
		"0195f1a2-7c00-7000-0000-000000000000": "variant bits 00",
		"0195f1a2-7c00-7000-8000-00000000000g": "not a hex digit",
		"01JPGT4Z00000000000000000U":           "not a Crockford base32 digit",
		"81JPGT4Z000000000000000000":           "more than 128 bits",
		"Order_01jpgt4z000000000000000000":     "TypeID prefix",
		"order_01JPGT4Z000000000000000000":     "uppercase",
		"order_01jpgt4z00000000000000000":      "26",
		"00000000-0000-7000-8000-000000000000": "outside layout", // 1970: before the epoch
	} {
		wantError(t, f.do(t, "GET", "/v1/decode/"+url.PathEscape(text), ""), 400, codeInvalid, mention)
	}
	// A server without a default prefix writes bare TypeIDs.
	bare := newFixture(t, nil)
	if texts := bare.nextTexts(t, 2, "format=typeid"); len(texts[0]) != 26 || strings.Contains(texts[0], "_") {
		t.Fatalf("bare TypeIDs: %v", texts)
	}
	// A bad default prefix is a config error.
	if err := (Config{TypeIDPrefix: "Orders"}).Validate(); err == nil || !strings.Contains(err.Error(), "typeid prefix") {
		t.Fatalf("Validate with a bad prefix: %v", err)
	}
}

// TestUUIDFormsMasked: on a masking server the UUIDs' payloads are keyed,
// so the counter does not show; they still carry the ID's millisecond,
// decode (with unmask rights) to the IDs, and a changed bit is refused.
func TestUUIDFormsMasked(t *testing.T) {
	key := MaskKey{ID: 5, Key: maskKeyOld}
	tokens := []Token{
		{Name: "app", Token: "app-token-0123456789", Snowflake: true},
		{Name: "support", Token: "support-token-0123456789", Unmask: true},
	}
	f := maskedFixture(t, MaskConfig{Keys: []MaskKey{key}, Snowflake: true}, func(c *Config) { c.Tokens = tokens })
	app := []string{"Authorization", "Bearer app-token-0123456789"}
	support := []string{"Authorization", "Bearer support-token-0123456789"}
	texts := f.nextTexts(t, 50, "format=uuid7", app...)
	view, _ := idview.New(f.node.Layout())
	var prev snowflake.ID
	counters := map[uint64]bool{}
	for i, text := range texts {
		u := uuid.MustParse(text)
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("masked UUID %s: version %d variant %v", text, u.Version(), u.Variant())
		}
		wantError(t, f.do(t, "GET", "/v1/decode/"+text, "", app...), 403, codeForbidden, "unmask")
		d := f.decodeText(t, text, support...)
		if d.Masked != text || d.KeyID == nil || *d.KeyID != 5 || d.Form != "uuid7" || (i > 0 && d.ID <= prev) {
			t.Fatalf("decode masked %s = %+v", text, d)
		}
		prev = d.ID
		// The time shows; the counter does not: the plain view of the same
		// UUID does not decode to the ID.
		if sec, nsec := u.Time().UnixTime(); sec*1000+nsec/1e6 != view.UnixMilli(d.ID) {
			t.Fatalf("masked UUID %s: time %d, ID's %d", text, sec*1000+nsec/1e6, view.UnixMilli(d.ID))
		}
		if plain, err := view.ID(idview.UUID(u)); err == nil && plain == d.ID {
			t.Fatalf("masked UUID %s reads as its ID without the key", text)
		}
		hi, lo := idview.UUID(u).Payload()
		counters[uint64(hi&0x1f)<<42|lo>>22] = true
		// A changed bit of the keyed payload is refused.
		bad := idview.UUID(u)
		bad[12] ^= 0x10
		wantError(t, f.do(t, "GET", "/v1/decode/"+bad.String(), "", support...), 400, codeInvalid, "is not a masked UUID of layout")
	}
	if len(counters) != len(texts) {
		t.Fatalf("%d distinct payload tops for %d UUIDs", len(counters), len(texts))
	}
	// ?as=plain reads the plain view (no rights needed): not the ID.
	if r := f.do(t, "GET", "/v1/decode/"+texts[0]+"?as=plain", "", app...); r.status == 200 && strings.Contains(r.body, `"id":"`+prev.String()+`"`) {
		t.Fatalf("as=plain: %s", r.body)
	}
	// Leaf's path and TypeIDs are keyed the same way.
	r := f.do(t, "GET", "/api/snowflake/get/x?format=typeid&prefix=order", "", app...)
	if d := f.decodeText(t, r.body, support...); d.Prefix != "order" || d.Masked != r.body {
		t.Fatalf("masked TypeID %q = %+v", r.body, d)
	}
}

// TestBoundsHTTP checks /v1/snowflake/bounds on the IDs the server issued:
// an issued ID lies in the bounds exactly when its time lies in the window,
// for windows cut at every issued ID's time and a millisecond either side.
func TestBoundsHTTP(t *testing.T) {
	f := newFixture(t, nil)
	var issued []snowflake.ID
	for range 20 {
		for _, s := range f.nextTexts(t, 3, "format=ids") {
			id, _ := snowflake.Parse(s)
			issued = append(issued, id)
		}
		time.Sleep(2 * time.Millisecond)
	}
	bounds := func(from, to string) boundsJSON {
		t.Helper()
		q := url.Values{}
		if from != "" {
			q.Set("from", from)
		}
		if to != "" {
			q.Set("to", to)
		}
		r := f.do(t, "GET", "/v1/snowflake/bounds?"+q.Encode(), "")
		var b boundsJSON
		if r.status != 200 || json.Unmarshal([]byte(r.body), &b) != nil || strings.Contains(r.body, "note") {
			t.Fatalf("bounds %s: %d %s", q.Encode(), r.status, r.body)
		}
		if !strings.Contains(r.body, `"min":"`) {
			t.Fatalf("bounds are not strings: %s", r.body)
		}
		return b
	}
	for _, id := range issued {
		p, _ := f.node.Decode(id)
		for _, d := range []time.Duration{-time.Millisecond, 0, time.Millisecond} {
			from := p.Time.Add(d)
			to := from.Add(3 * time.Millisecond)
			b := bounds(from.Format(time.RFC3339Nano), fmt.Sprint(to.UnixMilli()))
			for _, other := range issued {
				q, _ := f.node.Decode(other)
				in := other >= b.Min && other <= b.Max
				if want := !q.Time.Before(from) && q.Time.Before(to); in != want {
					t.Fatalf("window [%v, %v) = [%d, %d]: ID %d (time %v) in bounds %v, want %v", from, to, b.Min, b.Max, other, q.Time, in, want)
				}
			}
		}
	}
	// Defaults and relative times.
	all := bounds("", "")
	if all.Min != 0 || all.Max != 1<<63-1 {
		t.Fatalf("whole layout: %+v", all)
	}
	// A '+' left unescaped in the query (an offset, a zone) still reads as '+'.
	if r := f.do(t, "GET", "/v1/snowflake/bounds?from=2026-03-01T08:00:00+08:00&to=+1h", ""); r.status != 200 || !strings.Contains(r.body, `"from":"2026-03-01T00:00:00Z"`) {
		t.Fatalf("unescaped '+': %d %s", r.status, r.body)
	}
	recent := bounds("-1h", "now")
	if issued[0] < recent.Min || issued[len(issued)-1] > recent.Max {
		t.Fatalf("the last hour %+v does not hold the IDs just issued", recent)
	}
	for query, mention := range map[string]string{
		"from=yesterday":                `from: snowflake: invalid time: "yesterday"`,
		"to=1h":                         "to: snowflake: invalid time",
		"from=2026-03-02&to=2026-03-01": "before it starts",
		"to=2001-01-01":                 "before the layout's epoch",
		"from=2100-01-01":               "past the end",
		"count=3":                       "unknown query parameter",
	} {
		wantError(t, f.do(t, "GET", "/v1/snowflake/bounds?"+query, ""), 400, codeInvalid, mention)
	}
	// A masking server says the bounds are internal IDs.
	m := maskedFixture(t, MaskConfig{Keys: []MaskKey{{ID: 0, Key: maskKeyOld}}, Snowflake: true})
	if r := m.do(t, "GET", "/v1/snowflake/bounds?from=-1h", ""); r.status != 200 || !strings.Contains(r.body, "internal IDs") {
		t.Fatalf("masked bounds: %d %s", r.status, r.body)
	}
}

// TestUUIDFormsRPCAndRESP: the forms and bounds over Connect, gRPC and
// gRPC-Web, and RESP's ID.NEXT … FORMAT, ID.DECODE and ID.BOUNDS.
func TestUUIDFormsRPCAndRESP(t *testing.T) {
	e := newRPCEnv(t, func(c *Config) { c.TypeIDPrefix = "msg" })
	for _, p := range rpcProtocols() {
		t.Run(p.name, func(t *testing.T) {
			c := e.idClient(p)
			ctx := t.Context()
			res, err := c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Count: 20, Format: "typeid"}))
			if err != nil {
				t.Fatal(err)
			}
			texts := res.Msg.GetTexts()
			if len(texts) != 20 || len(res.Msg.GetRanges()) != 0 || !slices.IsSorted(texts) {
				t.Fatalf("NextSnowflake typeid: %v (ranges %v)", texts, res.Msg.GetRanges())
			}
			for _, text := range texts {
				tid, err := typeid.FromString(text)
				if err != nil || tid.Prefix() != "msg" {
					t.Fatalf("typeid.FromString(%q): %v", text, err)
				}
				d, err := c.Decode(ctx, connect.NewRequest(&flakeidv1.DecodeRequest{Id: text}))
				if err != nil || d.Msg.GetForm() != "typeid" || d.Msg.GetPrefix() != "msg" || d.Msg.GetUuid() != tid.UUID() {
					t.Fatalf("Decode(%q) = %v, %v", text, d, err)
				}
			}
			_, err = c.NextSnowflake(ctx, connect.NewRequest(&flakeidv1.NextSnowflakeRequest{Format: "uuid4"}))
			wantCode(t, err, connect.CodeInvalidArgument, `format "uuid4"`)
			b, err := c.Bounds(ctx, connect.NewRequest(&flakeidv1.BoundsRequest{From: "-1m", To: "+1m"}))
			if err != nil || b.Msg.GetMin() >= b.Msg.GetMax() {
				t.Fatalf("Bounds: %v, %v", b, err)
			}
			_, err = c.Bounds(ctx, connect.NewRequest(&flakeidv1.BoundsRequest{From: "+1m", To: "-1m"}))
			wantCode(t, err, connect.CodeInvalidArgument, "before it starts")
		})
	}
	// The stream sends texts too.
	stream, err := e.idClient(rpcProtocols()[0]).StreamSnowflake(t.Context(), connect.NewRequest(&flakeidv1.StreamSnowflakeRequest{Count: 10, Batch: 4, Format: "ulid"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for stream.Receive() {
		got = append(got, stream.Msg().GetTexts()...)
	}
	if stream.Err() != nil || len(got) != 10 || !slices.IsSorted(got) {
		t.Fatalf("stream of ULIDs: %v, %v", got, stream.Err())
	}
	for _, text := range got {
		if _, err := ulid.ParseStrict(text); err != nil {
			t.Fatalf("streamed ULID %q: %v", text, err)
		}
	}
}

// TestUUIDFormsRESP: ID.NEXT snowflake … FORMAT, ID.DECODE of the forms,
// ID.BOUNDS.
func TestUUIDFormsRESP(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	v := c.do(t, "ID.NEXT", "snowflake", "5", "FORMAT", "typeid", "PREFIX", "game")
	if v.kind != '*' || len(v.elems) != 5 {
		t.Fatalf("ID.NEXT … FORMAT typeid: %v", v)
	}
	var texts []string
	for _, x := range v.elems {
		if _, err := typeid.FromString(x.str); err != nil || !strings.HasPrefix(x.str, "game_") {
			t.Fatalf("RESP TypeID %q: %v", x.str, err)
		}
		texts = append(texts, x.str)
	}
	if !slices.IsSorted(texts) {
		t.Fatalf("RESP TypeIDs out of order: %v", texts)
	}
	v = c.do(t, "ID.NEXT", "snowflake", "FORMAT", "uuid7")
	if v.kind != '*' || len(v.elems) != 1 || uuid.MustParse(v.elems[0].str).Version() != 7 {
		t.Fatalf("ID.NEXT snowflake FORMAT uuid7: %v", v)
	}
	d := c.do(t, "ID.DECODE", texts[0])
	fields := map[string]string{}
	for i := 0; i+1 < len(d.elems); i += 2 {
		fields[d.elems[i].str] = d.elems[i+1].str
	}
	if fields["form"] != "typeid" || fields["prefix"] != "game" || fields["uuid"] == "" || fields["id"] == "" {
		t.Fatalf("ID.DECODE %s: %v", texts[0], fields)
	}
	b := c.do(t, "ID.BOUNDS", "FROM", "-1h", "TO", "now")
	if b.kind != '*' || len(b.elems) != 10 || b.elems[0].str != "min" {
		t.Fatalf("ID.BOUNDS: %v", b)
	}
	wantErr(t, "ID.BOUNDS FROM x", c.do(t, "ID.BOUNDS", "FROM", "x"), "ERR", "invalid time")
	wantErr(t, "ID.NEXT snowflake FORMAT ulid PREFIX a", c.do(t, "ID.NEXT", "snowflake", "FORMAT", "ulid", "PREFIX", "a"), "ERR", "prefix is for format=typeid")
}

// TestUUIDsOrderInPostgres stores one node's UUIDs in a PostgreSQL uuid
// column, in a shuffled order, and reads them back ORDER BY the column: the
// order the node issued them in.
func TestUUIDsOrderInPostgres(t *testing.T) {
	dsn := testenv.Postgres().Require(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table := fmt.Sprintf("flakeid_uuid_order_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (id uuid PRIMARY KEY, issued int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	f := newFixture(t, nil)
	var texts []string
	for range 10 {
		texts = append(texts, f.nextTexts(t, 50, "format=uuid7")...)
		time.Sleep(time.Millisecond)
	}
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	for i := len(order) - 1; i > 0; i-- { // a fixed shuffle: every seventh first
		j := (i * 7) % (i + 1)
		order[i], order[j] = order[j], order[i]
	}
	for _, i := range order {
		if _, err := db.ExecContext(t.Context(), "INSERT INTO "+table+" (id, issued) VALUES ($1, $2)", texts[i], i); err != nil {
			t.Fatalf("insert %s: %v", texts[i], err)
		}
	}
	rows, err := db.QueryContext(t.Context(), "SELECT id::text, issued FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var issued int
		if err := rows.Scan(&id, &issued); err != nil {
			t.Fatal(err)
		}
		if issued != n || id != texts[n] {
			t.Fatalf("row %d of ORDER BY id: %s (issued %d), want %s", n, id, issued, texts[n])
		}
		n++
	}
	if rows.Err() != nil || n != len(texts) {
		t.Fatalf("%d rows, %v", n, rows.Err())
	}
}
