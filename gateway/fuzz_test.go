package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// fuzzMethods are the methods FuzzHandler picks from.
var fuzzMethods = []string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodHead, "PATCH", "BREW"}

// FuzzHandler sends arbitrary requests (tool path, method, headers, body)
// through the whole handler, backed by the embedded store, and checks: no
// panic; never a 5xx (the tools and the store are healthy, so every failure
// is the client's); and every response is either a problem+json whose
// status matches its body, or a tool outcome with the execution headers.
// With derive set, the fuzzer's call carries the correctly derived key, so
// inputs get past the key check to the schema, the store and the tool.
//
//	go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 30s ./gateway/
func FuzzHandler(f *testing.F) {
	provision := newTestTool("provision")
	provision.schema = hostileSchema
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	gw := gatewaytest.FuzzGateway(f, []tools.Tool{provision, lookup})

	f.Add("provision", uint8(0), "application/json", "", "sess", "1", []byte(`{"size":2}`), true)
	f.Add("provision", uint8(0), "application/json; charset=utf-8", `"`+derivedKey(f, "sess", 2, "provision", `{"size":2}`)+`"`, "sess", "2", []byte(`{"size":2}`), false)
	f.Add("provision", uint8(0), "application/json", "", "sess", "1", []byte(`{"size":3}`), true)
	f.Add("provision", uint8(0), "application/json", "", "sess", "3", []byte(`{"size":"x"}`), true)
	f.Add("lookup", uint8(0), "application/json", "", "", "", []byte(`{"q":"x"}`), false)
	f.Add("lookup", uint8(1), "", "", "", "", []byte(nil), false)
	f.Add("pr%D0%BEvision", uint8(0), "application/json", "", "s", "1", []byte(`{}`), true)
	f.Add("provision", uint8(2), "text/plain", "k", "s:1", "-1", []byte(`{"size":NaN}`), false)
	f.Add("provision", uint8(0), "application/json", "\r\n", "s\x00", "1.5", []byte("\xef\xbb\xbf{}"), false)
	f.Add("", uint8(1), "", "", "", "", []byte(nil), false)
	f.Fuzz(func(t *testing.T, tool string, method uint8, contentType, key, session, step string, body []byte, derive bool) {
		h := http.Header{}
		for name, v := range map[string]string{"Content-Type": contentType, "Idempotency-Key": key, "Agent-Session-Id": session, "Agent-Step-Index": step} {
			if v != "" {
				h[name] = []string{v}
			}
		}
		if derive {
			if index, err := keyderive.ParseStepIndex(step); err == nil {
				if k, err := keyderive.Key(session, index, tool, body); err == nil {
					h.Set("Idempotency-Key", k)
				}
			}
		}
		req := gatewaytest.FuzzRequest(fuzzMethods[int(method)%len(fuzzMethods)], "/api/tools/v1/"+tool, h, body)
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("%d for a client's input: %s", rec.Code, rec.Body.Bytes())
		}
		if rec.Header().Get("X-Request-Id") == "" {
			t.Fatal("response without X-Request-Id")
		}
		if rec.Code == 200 && tool == "lookup" && rec.Header().Get("Content-Type") == "application/json" {
			return // a read-only tool's outcome carries no execution headers
		}
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			if rec.Code == 200 {
				return // a tool description
			}
		}
		if msg := problemOrOutcome(rec.Code, rec.Header(), rec.Body.Bytes()); msg != "" {
			t.Fatalf("%s: %d %v %s", msg, rec.Code, rec.Header(), rec.Body.Bytes())
		}
	})
}
