package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// countingStore counts every call into the store, so a test can prove that
// a request never reached it (no Claim, no Get, nothing).
type countingStore struct {
	idempotency.Store
	calls  atomic.Int64
	claims atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	s.calls.Add(1)
	s.claims.Add(1)
	return s.Store.Claim(ctx, req)
}

func (s *countingStore) Renew(ctx context.Context, l idempotency.Lease, ttl time.Duration) error {
	s.calls.Add(1)
	return s.Store.Renew(ctx, l, ttl)
}

func (s *countingStore) Complete(ctx context.Context, l idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	s.calls.Add(1)
	return s.Store.Complete(ctx, l, resp, ttl)
}

func (s *countingStore) Release(ctx context.Context, l idempotency.Lease) error {
	s.calls.Add(1)
	return s.Store.Release(ctx, l)
}

func (s *countingStore) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, scope)
}

func (s *countingStore) Delete(ctx context.Context, scope idempotency.Scope) error {
	s.calls.Add(1)
	return s.Store.Delete(ctx, scope)
}

func (s *countingStore) Ping(ctx context.Context) error {
	s.calls.Add(1)
	return s.Store.Ping(ctx)
}

// countingReader counts the bytes the gateway pulled from a request body.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// repeatReader yields the byte b forever.
type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

const hostileSchema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`

// hostileCase is one malformed request and the contract's answer to it.
type hostileCase struct {
	name   string
	path   string // the {tool} segment as sent (may be percent-encoded); default "provision"
	method string
	body   string
	// stream sends the body with unknown length (chunked), from reader when set.
	stream bool
	reader io.Reader
	edit   func(h http.Header) // changes to a well-formed call's headers
	status int
	code   string
}

func setHeader(name, value string) func(http.Header) {
	return func(h http.Header) { h.Set(name, value) }
}

func addHeader(name, value string) func(http.Header) {
	return func(h http.Header) { h.Add(name, value) }
}

func delHeader(name string) func(http.Header) {
	return func(h http.Header) { h.Del(name) }
}

// hostileCases builds the table; good is a well-formed call's body and
// keyFor derives the key of arguments for session "s", step 1, "provision".
func hostileCases(good string, keyFor func(args string) string) []hostileCase {
	key := keyFor(good)
	deepArrays := `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`
	deepObjects := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	tenMiBString := `{"size":1,"s":"` + strings.Repeat("x", 10<<20) + `"}`
	return []hostileCase{
		// Bodies that are not JSON, or not I-JSON.
		{name: "truncated object", body: `{"size":`, status: 400, code: wire.CodeInvalidJSON},
		{name: "truncated string", body: `{"size":1,"n":"abc`, status: 400, code: wire.CodeInvalidJSON},
		{name: "empty body", body: ``, status: 400, code: wire.CodeInvalidJSON},
		{name: "whitespace only", body: " \r\n\t ", status: 400, code: wire.CodeInvalidJSON},
		{name: "invalid UTF-8 byte", body: "{\"size\":1,\"n\":\"\xff\"}", status: 400, code: wire.CodeInvalidJSON},
		{name: "overlong UTF-8 slash", body: "{\"size\":1,\"n\":\"\xc0\xaf\"}", status: 400, code: wire.CodeInvalidJSON},
		{name: "UTF-8 encoded surrogate", body: "{\"size\":1,\"n\":\"\xed\xa0\x80\"}", status: 400, code: wire.CodeInvalidJSON},
		{name: "UTF-8 BOM", body: "\xef\xbb\xbf{\"size\":1}", status: 400, code: wire.CodeInvalidJSON},
		{name: "UTF-16 body", body: "\xfe\xff\x00{\x00}", status: 400, code: wire.CodeInvalidJSON},
		{name: "NaN literal", body: `{"size":NaN}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "Infinity literal", body: `{"size":Infinity}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "negative Infinity literal", body: `{"size":-Infinity}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "number beyond double range", body: `{"size":1e400}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "hex number", body: `{"size":0x10}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "leading zero number", body: `{"size":012}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "single quotes", body: `{'size':1}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "trailing comma", body: `{"size":1,}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "comment", body: `{"size":1 /* one */}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "two top-level values", body: `{"size":1}{"size":2}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "duplicate member", body: `{"size":1,"size":2}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "duplicate member through an escape", body: `{"size":1,"\u0073ize":2}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "lone surrogate escape", body: `{"size":1,"n":"\udc00"}`, status: 400, code: wire.CodeInvalidJSON},
		{name: "raw control character in string", body: "{\"size\":1,\"n\":\"a\x00b\"}", status: 400, code: wire.CodeInvalidJSON},
		{name: "10000-deep arrays", body: deepArrays, status: 400, code: wire.CodeInvalidJSON},
		{name: "10000-deep objects", body: deepObjects, status: 400, code: wire.CodeInvalidJSON},
		{name: "10 MiB string, length declared", body: tenMiBString, status: 413, code: wire.CodePayloadTooLarge},
		{name: "10 MiB string, chunked", stream: true, body: tenMiBString, status: 413, code: wire.CodePayloadTooLarge},
		{name: "endless chunked body", stream: true, reader: io.MultiReader(strings.NewReader(`{"s":"`), repeatReader('x')), status: 413, code: wire.CodePayloadTooLarge},
		{name: "top-level array", body: `[{"size":1}]`, edit: setHeader("Idempotency-Key", keyFor(`[{"size":1}]`)), status: 400, code: wire.CodeInvalidArguments},
		{name: "top-level string", body: `"size"`, edit: setHeader("Idempotency-Key", keyFor(`"size"`)), status: 400, code: wire.CodeInvalidArguments},
		{name: "top-level null", body: `null`, edit: setHeader("Idempotency-Key", keyFor(`null`)), status: 400, code: wire.CodeInvalidArguments},

		// Content types.
		{name: "no content type", body: good, edit: delHeader("Content-Type"), status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "text/plain", body: good, edit: setHeader("Content-Type", "text/plain"), status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "json look-alike media type", body: good, edit: setHeader("Content-Type", "application/json-patch+json"), status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "malformed media type", body: good, edit: setHeader("Content-Type", "application/json; charset"), status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "two content types", body: good, edit: addHeader("Content-Type", "text/plain"), status: 415, code: wire.CodeUnsupportedMediaType},

		// Key headers.
		{name: "key missing", body: good, edit: delHeader("Idempotency-Key"), status: 400, code: wire.CodeIdempotencyKeyMissing},
		{name: "key empty", body: good, edit: setHeader("Idempotency-Key", ""), status: 400, code: wire.CodeIdempotencyKeyMissing},
		{name: "two Idempotency-Key headers", body: good, edit: addHeader("Idempotency-Key", key), status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "an empty and a real Idempotency-Key", body: good, edit: func(h http.Header) { h["Idempotency-Key"] = []string{"", key} }, status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "key in upper case", body: good, edit: setHeader("Idempotency-Key", strings.ToUpper(key)), status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "key one char short", body: good, edit: setHeader("Idempotency-Key", key[:63]), status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "key with CRLF and a smuggled header", body: good, edit: setHeader("Idempotency-Key", key+"\r\nX-Evil: 1"), status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "key with a bad sf-string escape", body: good, edit: setHeader("Idempotency-Key", `"`+key[:62]+`\n"`), status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "key with an unterminated quote", body: good, edit: setHeader("Idempotency-Key", `"`+key), status: 400, code: wire.CodeIdempotencyKeyMalformed},
		{name: "session with a colon", body: good, edit: setHeader("Agent-Session-Id", "s:1"), status: 400, code: wire.CodeAgentSessionMalformed},
		{name: "session with a space", body: good, edit: setHeader("Agent-Session-Id", "s 1"), status: 400, code: wire.CodeAgentSessionMalformed},
		{name: "session with non-ASCII", body: good, edit: setHeader("Agent-Session-Id", "sé"), status: 400, code: wire.CodeAgentSessionMalformed},
		{name: "session with CRLF", body: good, edit: setHeader("Agent-Session-Id", "s\r\nX-Evil: 1"), status: 400, code: wire.CodeAgentSessionMalformed},
		{name: "session of 257 chars", body: good, edit: setHeader("Agent-Session-Id", strings.Repeat("s", 257)), status: 400, code: wire.CodeAgentSessionMalformed},
		{name: "two sessions", body: good, edit: addHeader("Agent-Session-Id", "s"), status: 400, code: wire.CodeAgentSessionMalformed},
		{name: "step missing", body: good, edit: delHeader("Agent-Step-Index"), status: 400, code: wire.CodeAgentStepMissing},
		{name: "negative step", body: good, edit: setHeader("Agent-Step-Index", "-1"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "float step", body: good, edit: setHeader("Agent-Step-Index", "1.5"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "exponent step", body: good, edit: setHeader("Agent-Step-Index", "1e3"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "signed step", body: good, edit: setHeader("Agent-Step-Index", "+1"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "hex step", body: good, edit: setHeader("Agent-Step-Index", "0x1"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "huge step", body: good, edit: setHeader("Agent-Step-Index", "99999999999999999999999999999999"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "step 2^53", body: good, edit: setHeader("Agent-Step-Index", "9007199254740992"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "fullwidth digit step", body: good, edit: setHeader("Agent-Step-Index", "１"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "two steps", body: good, edit: addHeader("Agent-Step-Index", "1"), status: 400, code: wire.CodeAgentStepMalformed},
		{name: "key of another step", body: good, edit: setHeader("Agent-Step-Index", "2"), status: 422, code: wire.CodeIdempotencyKeyMismatch},
		{name: "key of other arguments", body: `{"size":3}`, status: 422, code: wire.CodeIdempotencyKeyMismatch},
		{name: "schema: string for integer", body: `{"size":"1"}`, edit: setHeader("Idempotency-Key", keyFor(`{"size":"1"}`)), status: 400, code: wire.CodeInvalidArguments},
		{name: "schema: below minimum", body: `{"size":0}`, edit: setHeader("Idempotency-Key", keyFor(`{"size":0}`)), status: 400, code: wire.CodeInvalidArguments},

		// Tool names: only the exact configured name is a tool.
		{name: "Cyrillic look-alike tool", path: "pr%D0%BEvision", body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "fullwidth tool name", path: "%EF%BD%90rovision", body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "zero-width joiner in tool name", path: "provi%E2%80%8Dsion", body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "tool name with a newline", path: "provision%0A", body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "tool name with an encoded slash", path: "provision%2F..%2Fadmin", body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "tool name in upper case", path: "PROVISION", body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "65-character tool name", path: strings.Repeat("p", 65), body: good, status: 404, code: wire.CodeToolNotFound},
		{name: "PUT", method: http.MethodPut, body: good, status: 405, code: wire.CodeMethodNotAllowed},
	}
}

// TestHostileRequestsAreRefusedAndStoreNothing sends malformed requests
// through the whole handler and checks each gets its contract status and
// code as a small problem+json, and that none of them reached the store or
// the tool.
func TestHostileRequestsAreRefusedAndStoreNothing(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = hostileSchema
	store := &countingStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(store))
	good := `{"size":2}`
	key := derivedKey(t, "s", 1, "provision", good)

	// Any JSON value has a derived key (keyderive.Key takes objects only):
	// a non-object body with the right key is refused by the schema step.
	keyFor := func(args string) string {
		canonical, err := keyderive.Canonicalize([]byte(args))
		if err != nil {
			t.Fatalf("canonicalize %s: %v", args, err)
		}
		k, err := keyderive.KeyFromCanonical("s", 1, "provision", canonical)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	cases := hostileCases(good, keyFor)
	if len(cases) < 40 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "/api/tools/v1/provision"
			if tc.path != "" {
				path = "/api/tools/v1/" + tc.path
			}
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			var body io.Reader = strings.NewReader(tc.body)
			if tc.reader != nil {
				body = tc.reader
			}
			counted := &countingReader{r: body}
			if tc.stream {
				body = struct{ io.Reader }{counted} // hides the length: chunked
			} else {
				body = counted
			}
			req := httptest.NewRequest(method, path, body)
			if !tc.stream {
				req.ContentLength = int64(len(tc.body))
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("Agent-Session-Id", "s")
			req.Header.Set("Agent-Step-Index", "1")
			if tc.edit != nil {
				tc.edit(req.Header)
			}
			rec := httptest.NewRecorder()
			h.gw.ServeHTTP(rec, req)

			r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			p := wantProblem(t, r, tc.status, tc.code)
			if p["title"] == "" || p["type"] == "" {
				t.Fatalf("problem without title or type: %s", r.body)
			}
			if r.header.Get("Idempotent-Replayed") != "" || r.header.Get("Tool-Execution-Id") != "" {
				t.Fatal("a refused request must not look executed")
			}
			// The answer never reflects the input back in bulk.
			if len(r.body) > 2048 {
				t.Fatalf("problem of %d bytes", len(r.body))
			}
			// An oversized body is refused once the limit is crossed, not
			// read to its end.
			if tc.status == 413 && counted.n.Load() > callpath.DefaultMaxBodyBytes+64<<10 {
				t.Fatalf("read %d bytes of an oversized body", counted.n.Load())
			}
		})
	}
	if n := store.calls.Load(); n != 0 {
		t.Fatalf("hostile requests made %d store calls (claims: %d)", n, store.claims.Load())
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	assertBoundedToolLabels(t, h, "provision")

	// The store was usable all along: the good call runs once.
	r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: good})
	if r.status != 200 || store.claims.Load() != 1 || tool.total.Load() != 1 {
		t.Fatalf("good call after hostile ones: %d %s, claims %d", r.status, r.body, store.claims.Load())
	}
}

// assertBoundedToolLabels checks every tool label of the request metrics is
// a configured tool or "unknown", and every outcome label a known word.
func assertBoundedToolLabels(t *testing.T, h *harness, configured ...string) {
	t.Helper()
	allowedTools := map[string]bool{"unknown": true}
	for _, c := range configured {
		allowedTools[c] = true
	}
	allowedOutcomes := map[string]bool{}
	for _, o := range []string{"executed", "replayed", "in_progress", "key_reused", "key_mismatch", "step_conflict",
		"outcome_unknown", "invalid", "unauthorized", "not_found", "tool_error", "store_error", "other",
		// gateway_tool_executions_total's: what became of a run.
		"completed", "unknown", "released", "no_record"} {
		allowedOutcomes[o] = true
	}
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "tool":
					seen++
					if !allowedTools[l.GetValue()] {
						t.Errorf("metric %s has tool label %q", f.GetName(), l.GetValue())
					}
				case "outcome":
					if !allowedOutcomes[l.GetValue()] {
						t.Errorf("metric %s has outcome label %q", f.GetName(), l.GetValue())
					}
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no tool labels at all: the metrics were not gathered")
	}
}

// problemOrOutcome checks a response is either a well-formed problem+json
// whose status matches, or a tool outcome carrying the execution headers.
func problemOrOutcome(status int, header http.Header, body []byte) string {
	if header.Get("Content-Type") == "application/problem+json" {
		var p struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
			Title  string `json:"title"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return "problem body is not JSON: " + err.Error()
		}
		if p.Status != status || p.Code == "" || p.Title == "" {
			return "problem body does not match its status or lacks code/title"
		}
		return ""
	}
	if header.Get("Idempotent-Replayed") == "" || header.Get("Tool-Execution-Id") == "" {
		return "neither a problem nor a tool outcome"
	}
	if !bytes.HasPrefix(body, []byte("{")) {
		return "tool outcome body is not the tool's JSON"
	}
	return ""
}

// rawExchange writes raw bytes to the server and reads one response. It
// lets a test send what net/http's client refuses to (CR/LF or NUL inside
// header values, folded lines, conflicting lengths) and stall mid-body.
func rawExchange(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A response must come without the client sending anything more: a
	// deadline turns a server waiting for the rest of a body into a failure.
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestRawWireHostileRequests sends byte-level malformed requests over a
// socket. Those net/http itself rejects get its plain 400 before the gateway
// sees them (code ""); the rest get the gateway's problem. Either way the
// tool never runs and the store is never called.
func TestRawWireHostileRequests(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = hostileSchema
	store := &countingStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(store))
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	good := `{"size":2}`
	key := derivedKey(t, "s", 1, "provision", good)

	request := func(extraHeaders, body string) string {
		return "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			"Agent-Session-Id: s\r\nAgent-Step-Index: 1\r\n" + extraHeaders +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	withKey := "Idempotency-Key: " + key + "\r\n"

	cases := []struct {
		name   string
		raw    string
		status int
		code   string // "" when net/http refuses the request itself
	}{
		{"CR inside a header value", request("Idempotency-Key: "+key+"\rX-Evil: 1\r\n", good), 400, ""},
		{"NUL inside a header value", request("Idempotency-Key: "+key+"\x00\r\n", good), 400, ""},
		// net/http unfolds the line into "<key> continued", which is no key.
		{"obsolete line folding", request("Idempotency-Key: "+key+"\r\n continued\r\n", good), 400, wire.CodeIdempotencyKeyMalformed},
		{"space in a header name", request("Idempotency Key: "+key+"\r\n", good), 400, ""},
		{"header without colon", request(withKey+"X-Broken\r\n", good), 400, ""},
		{"two different Content-Length", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Content-Length: 10\r\nContent-Length: 11\r\n\r\n" + good, 400, ""},
		{"negative Content-Length", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Content-Length: -1\r\n\r\n" + good, 400, ""},
		{"raw non-ASCII look-alike in the path", "POST /api/tools/v1/prоvision HTTP/1.1\r\nHost: gw\r\n\r\n", 404, wire.CodeToolNotFound},
		{"bare LF smuggles a second key", request("Idempotency-Key: "+key+"\nIdempotency-Key: "+key+"\r\n", good), 400, wire.CodeIdempotencyKeyMalformed},
		{"two key headers in different case", request("idempotency-key: "+key+"\r\nIDEMPOTENCY-KEY: "+key+"\r\n", good), 400, wire.CodeIdempotencyKeyMalformed},
		{"10 MiB declared, 1 KiB sent", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Agent-Session-Id: s\r\nAgent-Step-Index: 1\r\nContent-Length: 10485760\r\n\r\n{\"s\":\"" + strings.Repeat("x", 1024), 413, wire.CodePayloadTooLarge},
		{"chunked body over the cap, then silence", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Agent-Session-Id: s\r\nAgent-Step-Index: 1\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n", callpath.DefaultMaxBodyBytes+16) + strings.Repeat("x", callpath.DefaultMaxBodyBytes+16) + "\r\n", 413, wire.CodePayloadTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawExchange(t, addr, tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.code == "" {
				if resp.Header.Get("X-Request-Id") != "" {
					t.Fatalf("expected net/http to refuse this before the gateway; got %s", body)
				}
				return
			}
			wantProblem(t, response{status: resp.StatusCode, header: resp.Header, body: body}, tc.status, tc.code)
		})
	}
	if n := store.calls.Load(); n != 0 {
		t.Fatalf("raw hostile requests made %d store calls", n)
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}
