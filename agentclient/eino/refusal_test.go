package eino_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/agentclient/eino"
	"github.com/toolgateway/toolgateway/wire"
)

// refusal makes one call of provision at step 3 against a server answering
// status and body, and returns what RefusalText makes of the error.
func refusal(t *testing.T, status int, body string) (string, bool) {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", wire.MediaTypeProblem)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer server.Close()
	_, err := agentclient.New(server.URL, agentclient.WithMaxAttempts(1)).Session("s").Call(t.Context(), 3, "provision", map[string]any{"name": "db"})
	if err == nil {
		t.Fatalf("%d %s: no error", status, body)
	}
	return eino.RefusalText("provision", 3, err)
}

func TestRefusalTextOfAStepConflictIsTheAdaptersSharedText(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{
			`{"status":422,"code":"step_conflict","title":"step conflict","detail":"for developers","retryable":false,"tool":"provision","execution_id":"01J0EXEC"}`,
			"step_conflict: this call of provision was NOT run. Step 3 of this conversation already ran a call of provision (execution 01J0EXEC) with other arguments: " +
				"an earlier attempt at this turn (before a restart, or in another branch of this conversation). Its effect has happened; its result is not available here. " +
				"If this call is still needed, make it again: it will run as a new call.",
		},
		{
			`{"status":422,"code":"step_conflict","title":"step conflict","retryable":false}`,
			"step_conflict: this call of provision was NOT run. Step 3 of this conversation already ran another call with other arguments: " +
				"an earlier attempt at this turn (before a restart, or in another branch of this conversation). Its effect has happened; its result is not available here. " +
				"If this call is still needed, make it again: it will run as a new call.",
		},
	} {
		if got, ok := refusal(t, http.StatusUnprocessableEntity, c.body); !ok || got != c.want {
			t.Errorf("step_conflict %s:\n got %q (%v)\nwant %q", c.body, got, ok, c.want)
		}
	}
}

func TestRefusalTextOfTheOtherRefusalsTheModelCanActOn(t *testing.T) {
	for _, c := range []struct {
		status     int
		body, want string
	}{
		{400, `{"status":400,"code":"invalid_arguments","title":"invalid arguments","detail":"the arguments do not match the tool's input schema","retryable":false,"errors":[{"location":"/name","message":"expected string, got number <5>"}]}`,
			`The gateway refused this call of provision (400 invalid_arguments): the arguments do not match the tool's input schema [{"location":"/name","message":"expected string, got number <5>"}]`},
		{422, `{"status":422,"code":"idempotency_key_reused","title":"key reused","detail":"the key was used with other arguments","retryable":false}`,
			`The gateway refused this call of provision (422 idempotency_key_reused): the key was used with other arguments`},
		{409, `{"status":409,"code":"outcome_unknown","title":"outcome unknown","retryable":false}`,
			`The gateway refused this call of provision (409 outcome_unknown): outcome unknown`},
		{413, `{"status":413,"code":"payload_too_large","title":"too large","detail":"the arguments are over 1 MiB","retryable":false}`,
			`The gateway refused this call of provision (413 payload_too_large): the arguments are over 1 MiB`},
		{502, `{"status":502,"code":"upstream_response_too_large","title":"too large","detail":"the result is over the cap","retryable":false}`,
			`The gateway refused this call of provision (502 upstream_response_too_large): the result is over the cap`},
	} {
		if got, ok := refusal(t, c.status, c.body); !ok || got != c.want {
			t.Errorf("%d:\n got %q (%v)\nwant %q", c.status, got, ok, c.want)
		}
	}
}

func TestRefusalTextLeavesOtherErrorsToTheApplication(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{401, `{"status":401,"code":"unauthorized","title":"unauthorized","retryable":false}`},
		{404, `{"status":404,"code":"tool_not_found","title":"no such tool","retryable":false}`},
		{422, `{"status":422,"code":"idempotency_key_mismatch","title":"mismatch","retryable":false}`},
		{504, `{"status":504,"code":"tool_timeout","title":"timeout","retryable":true}`},
		{409, `{"status":409,"code":"outcome_unknown","title":"marked retryable: not final","retryable":true}`},
	} {
		if got, ok := refusal(t, c.status, c.body); ok {
			t.Errorf("%d %s became the model's text %q, want an error of the tool", c.status, c.body, got)
		}
	}
	if _, ok := eino.RefusalText("provision", 3, http.ErrHandlerTimeout); ok {
		t.Error("a transport error became the model's text, want an error of the tool")
	}
}
