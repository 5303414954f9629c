package agentclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

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
