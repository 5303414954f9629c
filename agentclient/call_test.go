package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// scriptedServer answers attempt i with responses[i] (the last one repeats)
// and records what every attempt sent.
type scriptedServer struct {
	t         *testing.T
	mu        sync.Mutex
	responses []scriptedResponse
	requests  []recordedRequest
}

type scriptedResponse struct {
	status      int
	contentType string
	headers     map[string]string
	body        string
	// dropConnection closes the connection without an answer.
	dropConnection bool
}

type recordedRequest struct {
	path   string
	header http.Header
	body   string
}

func newScriptedServer(t *testing.T, responses ...scriptedResponse) (*scriptedServer, *httptest.Server) {
	s := &scriptedServer{t: t, responses: responses}
	server := httptest.NewServer(s)
	t.Cleanup(server.Close)
	return s, server
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, recordedRequest{path: r.URL.Path, header: r.Header.Clone(), body: string(body)})
	response := s.responses[min(len(s.requests), len(s.responses))-1]
	s.mu.Unlock()
	if response.dropConnection {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			s.t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
		return
	}
	for name, value := range response.headers {
		w.Header().Set(name, value)
	}
	if response.contentType != "" {
		w.Header().Set("Content-Type", response.contentType)
	}
	w.WriteHeader(response.status)
	io.WriteString(w, response.body)
}

func (s *scriptedServer) attempts() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedRequest(nil), s.requests...)
}

func problem(status int, code string, headers map[string]string) scriptedResponse {
	return scriptedResponse{
		status:      status,
		contentType: "application/problem+json",
		headers:     headers,
		body:        `{"type":"https://toolgateway.dev/problems/` + code + `","title":"t-` + code + `","status":` + itoa(status) + `,"detail":"d-` + code + `","code":"` + code + `","retryable":` + map[bool]string{true: "true", false: "false"}[code == wire.CodeRequestInProgress] + `}`,
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

var okResponse = scriptedResponse{
	status:      http.StatusOK,
	contentType: "application/json",
	headers:     map[string]string{"Idempotent-Replayed": "false", "Tool-Execution-Id": "01J8ZK4Q7XKZ3V9W6T2R5M0EXE", "X-Request-Id": "01J8ZK4Q7XKZ3V9W6T2R5M0REQ"},
	body:        `{"ok":true}`,
}

// recordSleeps replaces the client's sleep and clock so that tests see the
// delays without waiting them: a sleep moves the client's clock forward.
func recordSleeps(c *Client) *[]time.Duration {
	var mu sync.Mutex
	sleeps := &[]time.Duration{}
	clock := time.Now()
	c.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*sleeps = append(*sleeps, d)
		clock = clock.Add(d)
		mu.Unlock()
		return ctx.Err()
	}
	return sleeps
}

func TestCallSendsCanonicalBytesAndKeyHeaders(t *testing.T) {
	recorder, server := newScriptedServer(t, okResponse)
	client := New(server.URL+"/", WithToken("secret-token"), WithPreferWait(1500*time.Millisecond))
	args := json.RawMessage(`{ "size": "m5.large", "count": 3.0, "tags": {"b": 1, "a": 2} }`)

	result, err := client.Session("run-1").Call(context.Background(), 4, "provision-infra", args)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	wantKey, err := keyderive.Key("run-1", 4, "provision-infra", args)
	if err != nil {
		t.Fatal(err)
	}
	attempts := recorder.attempts()
	if len(attempts) != 1 {
		t.Fatalf("attempts = %d, want 1", len(attempts))
	}
	sent := attempts[0]
	checks := map[string]string{
		"path":             sent.path,
		"body":             sent.body,
		"Content-Type":     sent.header.Get("Content-Type"),
		"Idempotency-Key":  sent.header.Get("Idempotency-Key"),
		"Agent-Session-Id": sent.header.Get("Agent-Session-Id"),
		"Agent-Step-Index": sent.header.Get("Agent-Step-Index"),
		"Authorization":    sent.header.Get("Authorization"),
		"Prefer":           sent.header.Get("Prefer"),
	}
	wants := map[string]string{
		"path":             "/api/tools/v1/provision-infra",
		"body":             `{"count":3,"size":"m5.large","tags":{"a":2,"b":1}}`,
		"Content-Type":     "application/json",
		"Idempotency-Key":  wantKey,
		"Agent-Session-Id": "run-1",
		"Agent-Step-Index": "4",
		"Authorization":    "Bearer secret-token",
		"Prefer":           "wait=2",
	}
	for name, want := range wants {
		if checks[name] != want {
			t.Errorf("%s = %q, want %q", name, checks[name], want)
		}
	}
	if result.Status != http.StatusOK || string(result.Body) != `{"ok":true}` || result.Replayed ||
		result.ExecutionID != "01J8ZK4Q7XKZ3V9W6T2R5M0EXE" || result.Key != wantKey ||
		result.RequestID != "01J8ZK4Q7XKZ3V9W6T2R5M0REQ" || result.Attempts != 1 {
		t.Errorf("result = %+v", result)
	}
	var decoded struct{ OK bool }
	if err := result.Decode(&decoded); err != nil || !decoded.OK {
		t.Errorf("Decode = %+v, %v", decoded, err)
	}
}

func TestCallArgumentFormsGiveTheSameRequest(t *testing.T) {
	recorder, server := newScriptedServer(t, okResponse)
	session := New(server.URL).Session("run-1")
	type provision struct {
		Size  string `json:"size"`
		Count int    `json:"count"`
	}
	forms := []any{
		provision{Size: "<large>", Count: 2},
		map[string]any{"count": 2, "size": "<large>"},
		json.RawMessage(`{"size":"\u003clarge\u003e","count":2e0}`),
		[]byte(`{"count":2,"size":"<large>"}`),
	}
	for _, args := range forms {
		if _, err := session.Call(context.Background(), 1, "t", args); err != nil {
			t.Fatalf("Call(%#v): %v", args, err)
		}
	}
	attempts := recorder.attempts()
	for _, a := range attempts[1:] {
		if a.body != attempts[0].body || a.header.Get("Idempotency-Key") != attempts[0].header.Get("Idempotency-Key") {
			t.Errorf("request %q / %s differs from %q / %s", a.body, a.header.Get("Idempotency-Key"), attempts[0].body, attempts[0].header.Get("Idempotency-Key"))
		}
	}
	if attempts[0].body != `{"count":2,"size":"<large>"}` {
		t.Errorf("body = %s", attempts[0].body)
	}
}

func TestCallRetriesTransientAnswersWithTheSameKey(t *testing.T) {
	recorder, server := newScriptedServer(t,
		scriptedResponse{dropConnection: true},
		problem(http.StatusServiceUnavailable, "store_unavailable", nil),
		scriptedResponse{status: http.StatusBadGateway, contentType: "text/plain", body: "bad gateway"},
		problem(http.StatusGatewayTimeout, "tool_timeout", nil),
		problem(http.StatusConflict, wire.CodeRequestInProgress, nil),
		okResponse,
	)
	client := New(server.URL, WithRetry(10*time.Millisecond, 40*time.Millisecond))
	sleeps := recordSleeps(client)

	result, err := client.Session("run-1").Call(context.Background(), 9, "provision-infra", map[string]int{"n": 1})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	attempts := recorder.attempts()
	if len(attempts) != 6 || result.Attempts != 6 {
		t.Fatalf("attempts = %d (result says %d), want 6", len(attempts), result.Attempts)
	}
	for i, a := range attempts {
		if a.header.Get("Idempotency-Key") != result.Key || a.body != `{"n":1}` || a.header.Get("Agent-Step-Index") != "9" {
			t.Errorf("attempt %d sent key %s body %s step %s; want key %s", i, a.header.Get("Idempotency-Key"), a.body, a.header.Get("Agent-Step-Index"), result.Key)
		}
	}
	// Equal jitter: retry n waits within [ceiling/2, ceiling], ceiling = min(10ms·2^n, 40ms).
	ceilings := []time.Duration{10, 20, 40, 40, 40}
	if len(*sleeps) != len(ceilings) {
		t.Fatalf("sleeps = %v, want %d of them", *sleeps, len(ceilings))
	}
	for i, d := range *sleeps {
		ceiling := ceilings[i] * time.Millisecond
		if d < ceiling/2 || d > ceiling {
			t.Errorf("sleep %d = %v, want within [%v, %v]", i, d, ceiling/2, ceiling)
		}
	}
}

func TestCallHonoursRetryAfter(t *testing.T) {
	recorder, server := newScriptedServer(t,
		problem(http.StatusConflict, wire.CodeRequestInProgress, map[string]string{"Retry-After": "3"}),
		problem(http.StatusServiceUnavailable, "store_unavailable", map[string]string{"Retry-After": "1"}),
		okResponse,
	)
	client := New(server.URL, WithRetry(time.Millisecond, 2*time.Millisecond))
	sleeps := recordSleeps(client)
	if _, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{}); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if got := len(recorder.attempts()); got != 3 {
		t.Fatalf("attempts = %d, want 3", got)
	}
	want := []time.Duration{3 * time.Second, time.Second}
	if len(*sleeps) != 2 || (*sleeps)[0] != want[0] || (*sleeps)[1] != want[1] {
		t.Errorf("sleeps = %v, want %v", *sleeps, want)
	}
}

func TestCallWaitsRetryAfterForReal(t *testing.T) {
	_, server := newScriptedServer(t,
		problem(http.StatusConflict, wire.CodeRequestInProgress, map[string]string{"Retry-After": "1"}),
		okResponse,
	)
	start := time.Now()
	result, err := New(server.URL, WithRetry(time.Millisecond, time.Millisecond)).Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if elapsed := time.Since(start); elapsed < time.Second || result.Attempts != 2 {
		t.Errorf("retried after %v with %d attempts; want ≥ 1s (Retry-After) and 2", elapsed, result.Attempts)
	}
}

func TestCallDoesNotRetryFinalAnswers(t *testing.T) {
	cases := []struct {
		name     string
		response scriptedResponse
		status   int
		code     string
	}{
		{"400 invalid_json", problem(http.StatusBadRequest, wire.CodeInvalidJSON, nil), 400, wire.CodeInvalidJSON},
		{"401 unauthorized", problem(http.StatusUnauthorized, "unauthorized", nil), 401, "unauthorized"},
		{"404 tool_not_found", problem(http.StatusNotFound, "tool_not_found", nil), 404, "tool_not_found"},
		{"409 outcome_unknown", problem(http.StatusConflict, wire.CodeOutcomeUnknown, nil), 409, wire.CodeOutcomeUnknown},
		{"422 key reused", problem(http.StatusUnprocessableEntity, wire.CodeIdempotencyKeyReused, nil), 422, wire.CodeIdempotencyKeyReused},
		{"422 step_conflict", problem(http.StatusUnprocessableEntity, wire.CodeStepConflict, nil), 422, wire.CodeStepConflict},
		{"500 tool_failed", problem(http.StatusInternalServerError, "tool_failed", nil), 500, "tool_failed"},
		{"500 plain upstream", scriptedResponse{status: 500, contentType: "text/plain", body: "boom"}, 500, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recorder, server := newScriptedServer(t, tc.response, okResponse)
			client := New(server.URL, WithRetry(time.Millisecond, time.Millisecond))
			sleeps := recordSleeps(client)
			result, err := client.Session("run-1").Call(context.Background(), 2, "t", map[string]int{"a": 1})
			var problem *Error
			if !errors.As(err, &problem) {
				t.Fatalf("Call = %+v, %v; want *Error", result, err)
			}
			if problem.Status != tc.status || problem.Code != tc.code || string(problem.Raw) != tc.response.body {
				t.Errorf("error = %+v; want status %d code %q and the raw body", problem, tc.status, tc.code)
			}
			if got := len(recorder.attempts()); got != 1 || len(*sleeps) != 0 {
				t.Errorf("attempts = %d, sleeps = %v; want 1 attempt, no sleep", got, *sleeps)
			}
		})
	}
}

func TestCallReturnsToolOutcomes(t *testing.T) {
	// A tool's own 4xx (not a problem document) is its recorded outcome.
	_, server := newScriptedServer(t, scriptedResponse{
		status: http.StatusNotFound, contentType: "application/json",
		headers: map[string]string{"Idempotent-Replayed": "true", "Tool-Execution-Id": "01EXE"},
		body:    `{"error":"no such zone"}`,
	})
	result, err := New(server.URL).Session("run-1").Call(context.Background(), 2, "t", map[string]int{})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if result.Status != 404 || !result.Replayed || result.ExecutionID != "01EXE" || string(result.Body) != `{"error":"no such zone"}` {
		t.Errorf("result = %+v", result)
	}
}

func TestErrorDecodesProblemDocument(t *testing.T) {
	body := `{"type":"https://toolgateway.dev/problems/invalid_arguments","title":"Invalid arguments","status":400,` +
		`"detail":"1 error","code":"invalid_arguments","retryable":false,"errors":[{"location":"/size","message":"must be a string"}]}`
	_, server := newScriptedServer(t, scriptedResponse{status: 400, contentType: "application/problem+json; charset=utf-8", body: body,
		headers: map[string]string{"X-Request-Id": "01REQ"}})
	_, err := New(server.URL).Session("run-1").Call(context.Background(), 0, "t", map[string]int{"size": 3})
	var problem *Error
	if !errors.As(err, &problem) {
		t.Fatalf("error = %v, want *Error", err)
	}
	want := Error{Status: 400, Type: "https://toolgateway.dev/problems/invalid_arguments", Code: wire.CodeInvalidArguments,
		Title: "Invalid arguments", Detail: "1 error", RequestID: "01REQ"}
	if problem.Status != want.Status || problem.Type != want.Type || problem.Code != want.Code || problem.Title != want.Title ||
		problem.Detail != want.Detail || problem.Retryable || problem.RequestID != want.RequestID || string(problem.Raw) != body {
		t.Errorf("error = %+v\nwant %+v", problem, want)
	}
	if len(problem.Errors) != 1 || problem.Errors[0] != (wire.Violation{Location: "/size", Message: "must be a string"}) {
		t.Errorf("errors = %+v", problem.Errors)
	}
	if got := problem.Error(); got != "agentclient: 400 invalid_arguments: 1 error (/size: must be a string)" {
		t.Errorf("Error() = %q", got)
	}

	stepConflict := `{"title":"Step conflict","status":422,"code":"step_conflict","retryable":false,"tool":"provision-infra","execution_id":"01EARLIER"}`
	_, server = newScriptedServer(t, scriptedResponse{status: 422, contentType: "application/problem+json", body: stepConflict})
	_, err = New(server.URL).Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
	if !errors.As(err, &problem) || problem.Tool != "provision-infra" || problem.ExecutionID != "01EARLIER" {
		t.Errorf("step_conflict error = %+v", problem)
	}
}

func TestCallStopsWhenContextEnds(t *testing.T) {
	recorder, server := newScriptedServer(t, problem(http.StatusServiceUnavailable, "store_unavailable", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := New(server.URL, WithRetry(10*time.Millisecond, 40*time.Millisecond)).Session("run-1").Call(ctx, 0, "t", map[string]int{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
	var problem *Error
	if !errors.As(err, &problem) || problem.Code != "store_unavailable" {
		t.Errorf("error %v does not carry the last response", err)
	}
	if got := len(recorder.attempts()); got < 2 {
		t.Errorf("attempts = %d, want several before the deadline", got)
	}
}

func TestCallGivesUpWhenRetryAfterOutlastsDeadline(t *testing.T) {
	recorder, server := newScriptedServer(t, problem(http.StatusConflict, wire.CodeRequestInProgress, map[string]string{"Retry-After": "30"}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := New(server.URL)
	sleeps := recordSleeps(client)
	_, err := client.Session("run-1").Call(ctx, 0, "t", map[string]int{})
	if !errors.Is(err, context.DeadlineExceeded) || len(*sleeps) != 0 || len(recorder.attempts()) != 1 {
		t.Errorf("error = %v, sleeps = %v, attempts = %d; want an immediate deadline error after 1 attempt", err, *sleeps, len(recorder.attempts()))
	}
	var problem *Error
	if !errors.As(err, &problem) || problem.RetryAfter != 30*time.Second {
		t.Errorf("error %v does not carry the 409 with its Retry-After", err)
	}
}

func TestCallCancelledWhileWaiting(t *testing.T) {
	_, server := newScriptedServer(t, problem(http.StatusServiceUnavailable, "store_unavailable", nil))
	ctx, cancel := context.WithCancel(context.Background())
	client := New(server.URL, WithRetry(time.Hour, time.Hour), WithRetryBudget(0))
	done := make(chan error, 1)
	go func() {
		_, err := client.Session("run-1").Call(ctx, 0, "t", map[string]int{})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Call kept waiting after its context was cancelled")
	}
}

func TestCallRespectsMaxAttempts(t *testing.T) {
	recorder, server := newScriptedServer(t, problem(http.StatusBadGateway, "upstream_unreachable", nil))
	client := New(server.URL, WithMaxAttempts(3))
	recordSleeps(client)
	_, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
	var problem *Error
	if !errors.As(err, &problem) || problem.Status != 502 {
		t.Errorf("error = %v, want the 502", err)
	}
	if got := len(recorder.attempts()); got != 3 {
		t.Errorf("attempts = %d, want 3", got)
	}
}

func TestCallRejectsInvalidInputsWithoutSending(t *testing.T) {
	recorder, server := newScriptedServer(t, okResponse)
	client := New(server.URL)
	cases := []struct {
		name    string
		session string
		step    uint64
		tool    string
		args    any
		want    error
	}{
		{"session with colon", "a:b", 0, "t", map[string]int{}, keyderive.ErrInvalidSession},
		{"step too large", "s", keyderive.MaxStepIndex + 1, "t", map[string]int{}, keyderive.ErrInvalidStep},
		{"tool name", "s", 0, "Bad/Tool", map[string]int{}, keyderive.ErrInvalidTool},
		{"not an object", "s", 0, "t", []int{1}, keyderive.ErrNotObject},
		{"nil arguments", "s", 0, "t", nil, keyderive.ErrNotObject},
		{"duplicate names", "s", 0, "t", json.RawMessage(`{"a":1,"a":2}`), keyderive.ErrDuplicateName},
		{"lone surrogate", "s", 0, "t", []byte(`{"a":"\udc00"}`), keyderive.ErrInvalidJSON},
	}
	for _, tc := range cases {
		if _, err := client.Session(tc.session).Call(context.Background(), tc.step, tc.tool, tc.args); !errors.Is(err, tc.want) {
			t.Errorf("%s: error = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := len(recorder.attempts()); got != 0 {
		t.Errorf("%d requests were sent for invalid inputs", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	if got := parseRetryAfter("2"); got != 2*time.Second {
		t.Errorf("2 → %v", got)
	}
	for _, value := range []string{"", "-1", "soon", "1.5"} {
		if got := parseRetryAfter(value); got != 0 {
			t.Errorf("%q → %v, want 0", value, got)
		}
	}
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	if got := parseRetryAfter(date); got < 80*time.Second || got > 90*time.Second {
		t.Errorf("HTTP date → %v, want about 90s", got)
	}
}

// callReturns runs fn and fails the test if it has not returned after
// limit: a Call that never ends must fail the test, not hang it.
func callReturns(t *testing.T, limit time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("the call had not returned after %v", limit)
		return nil
	}
}

// downAddr returns an http:// URL of a loopback port nothing listens on, so
// every connection is refused: a gateway that is down.
func downAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestMalformedBaseURLFailsAtOnce(t *testing.T) {
	recorder, server := newScriptedServer(t, okResponse)
	hostPort := strings.TrimPrefix(server.URL, "http://")
	for _, baseURL := range []string{
		hostPort, // "127.0.0.1:port": no scheme, the mistake of the issue
		"localhost:8080",
		"gateway.internal",
		"",
		"http://",
		"ftp://" + hostPort,
		"http://" + hostPort + "/?x=1",
		"http://[::1",
	} {
		client := New(baseURL)
		recordSleeps(client)
		err := callReturns(t, 10*time.Second, func() error {
			_, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
			return err
		})
		if !errors.Is(err, ErrInvalidBaseURL) {
			t.Errorf("New(%q): Call error = %v, want ErrInvalidBaseURL", baseURL, err)
		}
	}
	if got := len(recorder.attempts()); got != 0 {
		t.Errorf("%d requests were sent", got)
	}
	// The well-formed URL of the same server works.
	if _, err := New(server.URL).Session("run-1").Call(context.Background(), 0, "t", map[string]int{}); err != nil {
		t.Fatalf("New(%q): %v", server.URL, err)
	}
}

func TestTokenThatCannotBeSentFailsAtOnce(t *testing.T) {
	recorder, server := newScriptedServer(t, okResponse)
	client := New(server.URL, WithToken("secret\r\nX-Injected: 1"))
	err := callReturns(t, 10*time.Second, func() error {
		_, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
		return err
	})
	if !errors.Is(err, ErrInvalidToken) || strings.Contains(err.Error(), "secret") {
		t.Errorf("error = %v, want ErrInvalidToken without the token in it", err)
	}
	if got := len(recorder.attempts()); got != 0 {
		t.Errorf("%d requests were sent", got)
	}
}

// TestCallToAGatewayThatIsDownEnds: a context without deadline, a gateway
// that refuses every connection, default options: the call ends once the
// default retry budget is spent (the clock is the test's, so no waiting).
func TestCallToAGatewayThatIsDownEnds(t *testing.T) {
	client := New(downAddr(t))
	sleeps := recordSleeps(client)
	err := callReturns(t, 30*time.Second, func() error {
		_, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
		return err
	})
	var total time.Duration
	for _, d := range *sleeps {
		total += d
	}
	if err == nil || !strings.Contains(err.Error(), "retry budget") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error = %v, want the budget error carrying the connection error", err)
	}
	if len(*sleeps) < 3 || total > DefaultRetryBudget {
		t.Errorf("retried %d times, waiting %v in all; want several retries within %v", len(*sleeps), total, DefaultRetryBudget)
	}
}

// TestCallToAGatewayThatIsDownEndsForReal is the same on the real clock
// with a short budget.
func TestCallToAGatewayThatIsDownEndsForReal(t *testing.T) {
	client := New(downAddr(t), WithRetryBudget(500*time.Millisecond), WithRetry(50*time.Millisecond, 100*time.Millisecond))
	err := callReturns(t, 30*time.Second, func() error {
		_, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "retry budget 500ms") {
		t.Fatalf("error = %v, want the budget error", err)
	}
}

// TestDeadlineReplacesTheDefaultBudget: a caller that gives the context a
// deadline chose its bound; the default budget does not cut it short.
func TestDeadlineReplacesTheDefaultBudget(t *testing.T) {
	recorder, server := newScriptedServer(t, problem(http.StatusServiceUnavailable, "store_unavailable", nil))
	client := New(server.URL, WithMaxAttempts(20))
	sleeps := recordSleeps(client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err := client.Session("run-1").Call(ctx, 0, "t", map[string]int{})
	var got *Error
	if !errors.As(err, &got) || got.Status != 503 {
		t.Fatalf("error = %v, want the 503", err)
	}
	var total time.Duration
	for _, d := range *sleeps {
		total += d
	}
	if got := len(recorder.attempts()); got != 20 || total <= DefaultRetryBudget {
		t.Errorf("attempts = %d waiting %v; want 20 attempts, past the default budget", got, total)
	}

	// An explicit budget applies whatever the context.
	recorder, server = newScriptedServer(t, problem(http.StatusServiceUnavailable, "store_unavailable", map[string]string{"Retry-After": "1"}))
	client = New(server.URL, WithRetryBudget(3500*time.Millisecond))
	recordSleeps(client)
	_, err = client.Session("run-1").Call(ctx, 0, "t", map[string]int{})
	if err == nil || !strings.Contains(err.Error(), "retry budget 3.5s") || len(recorder.attempts()) != 4 {
		t.Errorf("error = %v after %d attempts; want the budget error after 4 (at 0, 1, 2, 3 s)", err, len(recorder.attempts()))
	}
}

func TestCallSendsPreferWaitByDefault(t *testing.T) {
	withDeadline := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}
	cases := []struct {
		name string
		ctx  context.Context
		opts []Option
		want string
	}{
		{"default", context.Background(), nil, "wait=10"},
		{"bounded by the deadline", withDeadline(3500 * time.Millisecond), nil, "wait=3"},
		{"deadline far away", withDeadline(time.Hour), nil, "wait=10"},
		{"bounded by the budget", context.Background(), []Option{WithRetryBudget(4500 * time.Millisecond)}, "wait=4"},
		{"configured", withDeadline(time.Hour), []Option{WithPreferWait(90 * time.Second)}, "wait=60"},
		{"rounded up", context.Background(), []Option{WithPreferWait(1200 * time.Millisecond)}, "wait=2"},
		{"disabled", context.Background(), []Option{WithPreferWait(0)}, ""},
		{"deadline under a second", withDeadline(900 * time.Millisecond), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recorder, server := newScriptedServer(t, okResponse)
			if _, err := New(server.URL, tc.opts...).Session("run-1").Call(tc.ctx, 0, "t", map[string]int{}); err != nil {
				t.Fatal(err)
			}
			attempts := recorder.attempts()
			if got := attempts[0].header.Get("Prefer"); got != tc.want || (tc.want == "" && len(attempts[0].header.Values("Prefer")) != 0) {
				t.Errorf("Prefer = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDuplicateGetsTheOutcomeWhenItExists: a fake gateway that, like the
// real one, holds a request carrying Prefer: wait until the call in flight
// finishes, and otherwise answers 409 with Retry-After: 5. The SDK's
// duplicate gets the outcome in one attempt, without sleeping.
func TestDuplicateGetsTheOutcomeWhenItExists(t *testing.T) {
	finished := make(chan struct{})
	var preferHeader atomic.Value
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		preferSeen := r.Header.Get("Prefer")
		preferHeader.Store(preferSeen)
		if !strings.HasPrefix(preferSeen, "wait=") {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"status":409,"code":"request_in_progress","retryable":true}`))
			return
		}
		<-finished // the original call completes while this request waits
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Preference-Applied", preferSeen)
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Tool-Execution-Id", "01ORIGINAL")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(server.Close)
	client := New(server.URL, WithMaxAttempts(3)) // no endless loop on the fake clock if Prefer is missing
	sleeps := recordSleeps(client)
	time.AfterFunc(50*time.Millisecond, func() { close(finished) })
	result, err := client.Session("run-1").Call(context.Background(), 0, "t", map[string]int{})
	if err != nil {
		t.Fatal(err)
	}
	preferSeen, _ := preferHeader.Load().(string)
	if preferSeen != "wait=10" || result.Attempts != 1 || len(*sleeps) != 0 || !result.Replayed || result.ExecutionID != "01ORIGINAL" {
		t.Errorf("Prefer %q, result %+v, sleeps %v; want the replay in one attempt", preferSeen, result, *sleeps)
	}
}
