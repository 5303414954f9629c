package agentclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/wire"
)

// callError makes one call against a server answering status and body as
// problem+json, and returns the *Error.
func callError(t *testing.T, status int, body string) *Error {
	t.Helper()
	_, server := newScriptedServer(t, scriptedResponse{status: status, contentType: wire.MediaTypeProblem, body: body})
	_, err := New(server.URL).Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
	var problem *Error
	if !errors.As(err, &problem) {
		t.Fatalf("error = %v, want *Error", err)
	}
	return problem
}

// TestStepConflictMessageSaysItOnce: the gateway's title and detail of
// step_conflict say the same thing in other words; the message used to
// carry both.
func TestStepConflictMessageSaysItOnce(t *testing.T) {
	problem := callError(t, http.StatusUnprocessableEntity, `{"type":"urn:toolgateway:problem:step_conflict",`+
		`"title":"This agent step already made another call","status":422,`+
		`"detail":"this session step already made another call; give each tool call its own step index",`+
		`"code":"step_conflict","retryable":false,"tool":"provision-infra","execution_id":"01J8ZK4Q7XKZ3V9W6T2R5M0EXE"}`)
	want := "agentclient: 422 step_conflict: this session step already made another call; give each tool call its own step index" +
		" (earlier call: tool provision-infra, execution 01J8ZK4Q7XKZ3V9W6T2R5M0EXE)"
	if got := problem.Error(); got != want {
		t.Errorf("Error() = %q\nwant      %q", got, want)
	}
}

func TestErrorMessages(t *testing.T) {
	cases := []struct {
		name string
		err  Error
		want string
	}{
		{"title only", Error{Status: 401, Code: wire.CodeUnauthorized, Title: "Missing or invalid bearer token"},
			"agentclient: 401 unauthorized: Missing or invalid bearer token"},
		{"not a problem", Error{Status: 502, Title: "Bad Gateway"}, "agentclient: 502: Bad Gateway"},
		{"violations", Error{Status: 400, Code: wire.CodeInvalidArguments, Title: "t", Detail: "2 schema violation(s); see errors",
			Errors: []wire.Violation{{Location: "", Message: "missing properties: 'cpus'"}, {Location: "/region", Message: "value must be one of ..."}}},
			"agentclient: 400 invalid_arguments: 2 schema violation(s); see errors (/: missing properties: 'cpus'; /region: value must be one of ...)"},
		{"mismatch", Error{Status: 422, Code: wire.CodeIdempotencyKeyMismatch, Title: "t", Detail: "d",
			ExpectedKey: "6bb51eb681a9297eb10b33022b18e8165e8c18ebae68dd035b360cda305f1482", CanonicalArguments: "{}"},
			"agentclient: 422 idempotency_key_mismatch: d (expected key 6bb51eb6…)"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: Error() = %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestKeyMismatchCarriesTheGatewaysView: a 422 idempotency_key_mismatch
// names the key the gateway derived and the canonical text it derived it
// from; the error exposes both, and its message holds a key prefix only.
func TestKeyMismatchCarriesTheGatewaysView(t *testing.T) {
	const expected = "0f8c2b3c7e1d4a5b6c7d8e9f00112233445566778899aabbccddeeff00112233"
	problem := callError(t, http.StatusUnprocessableEntity, `{"type":"urn:toolgateway:problem:idempotency_key_mismatch",`+
		`"title":"Idempotency-Key does not match the derived key","status":422,`+
		`"detail":"the key must be SHA-256(session:step:tool:JCS(arguments))","code":"idempotency_key_mismatch","retryable":false,`+
		`"expected_key":"`+expected+`","canonical_arguments":"{\"price\":1,\"name\":\"caf\u00e9\"}"}`)
	if problem.Code != wire.CodeIdempotencyKeyMismatch || problem.ExpectedKey != expected ||
		problem.CanonicalArguments != `{"price":1,"name":"café"}` {
		t.Errorf("error = %+v", problem)
	}
	if msg := problem.Error(); strings.Contains(msg, expected) || !strings.Contains(msg, expected[:8]) {
		t.Errorf("Error() = %q: want the key's prefix, never the whole key", msg)
	}
}
