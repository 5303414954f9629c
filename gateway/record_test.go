package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/internal/dropupstream"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/wire"
)

// Uncertain outcomes (the contract's "uncertain" row): a lease_expiry:
// unknown tool whose timeout, drain cancellation or lost upstream
// connection leaves open whether it acted must leave its record UNKNOWN —
// its answer not retryable, every retry 409 outcome_unknown, the upstream
// run once — while a rerun tool is released and runs again on retry.
// Executions are counted at the upstream.

// slowUpstream is an HTTP upstream that holds every request until the
// test releases it, whether or not the caller is still there, and counts
// the requests per Idempotency-Key (the tenant-scoped key the gateway
// sends). Held rather than slept: the call outlives a timeout or a drain
// however long the machine takes to get there.
type slowUpstream struct {
	srv      *httptest.Server
	held     chan struct{}
	released sync.Once

	mu   sync.Mutex
	runs map[string]int
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	u := &slowUpstream{held: make(chan struct{}), runs: map[string]int{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.runs[r.Header.Get(wire.HeaderIdempotencyKey)]++
		u.mu.Unlock()
		<-u.held // the side effect takes its time, caller or not
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"charged":true}`))
	}))
	t.Cleanup(u.finish)
	return u
}

// release lets every held and later request answer; it is safe to call
// twice.
func (u *slowUpstream) release() {
	u.released.Do(func() { close(u.held) })
}

// finish releases the requests and closes the upstream once they all
// answered (httptest.Server.Close waits for them): every side effect has
// taken place. It is safe to call twice.
func (u *slowUpstream) finish() {
	u.release()
	u.srv.Close()
}

// ran is how many times the upstream received the call (session, step,
// tool, args) of the anonymous tenant.
func (u *slowUpstream) ran(t *testing.T, session string, step uint64, tool, args string) int {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[keyderive.ScopedKey(callpath.AnonymousTenant, tool, derivedKey(t, session, step, tool, args))]
}

// httpTool is an HTTP upstream tool on url.
func httpTool(t *testing.T, name, url string, client *http.Client) tools.Tool {
	t.Helper()
	tool, err := httptool.New(httptool.Config{Name: name, URL: url, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// wantUnknownRecord asserts the admin API lists the call's record UNKNOWN.
func wantUnknownRecord(t *testing.T, h *harness, session string, step uint64, tool, args string) {
	t.Helper()
	key := derivedKey(t, session, step, tool, args)
	// Every page: on Redis a page is a SCAN step over the whole keyspace,
	// which may hold none of this test's keys and still have a cursor.
	for query := "?state=UNKNOWN&tool=" + tool; ; {
		page := listRecords(t, h, query)
		for _, rec := range page.Records {
			if rec.Key == key {
				return
			}
		}
		if page.NextCursor == nil {
			break
		}
		query = "?state=UNKNOWN&tool=" + tool + "&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	t.Fatalf("the admin API does not list the record of %s step %d UNKNOWN", tool, step)
}

// sdkRetries sends the call again as the Go SDK does (it retries 502, 503,
// 504 and request_in_progress by status) and returns its final error.
func sdkRetries(t *testing.T, h *harness, session string, step uint64, tool, args string) error {
	t.Helper()
	client := agentclient.New(h.srv.URL, agentclient.WithRetry(20*time.Millisecond, 100*time.Millisecond), agentclient.WithMaxAttempts(4))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Session(session).Call(ctx, step, tool, []byte(args))
	return err
}

func wantOutcomeUnknown(t *testing.T, err error) {
	t.Helper()
	var problem *agentclient.Error
	if !errors.As(err, &problem) || problem.Status != http.StatusConflict || problem.Code != wire.CodeOutcomeUnknown {
		t.Fatalf("a retry ended with %v, want 409 outcome_unknown", err)
	}
}

// No release without evidence, for an in-process tool of a lease_expiry:
// unknown policy: its own 5xx or error is its word that it did nothing
// (released, the retry runs); a 5xx it relays from an upstream
// (Response.Relayed) leaves the record UNKNOWN — 500 tool_failed not
// retryable, then 409 — unless marked NotExecuted (released).
func TestRelayedFiveXXOfAnUnknownToolLeavesItUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		pay := newTestTool("pay")
		pay.behave = func(_ context.Context, req *tools.Request) (*tools.Response, error) {
			var args struct{ Mode string }
			_ = json.Unmarshal(req.Arguments, &args)
			if pay.runs(req.IdempotencyKey) > 1 {
				return tools.JSON(200, map[string]any{"ok": true})
			}
			switch args.Mode {
			case "own-5xx":
				return &tools.Response{Status: 503, Body: []byte(`{"busy":true}`)}, nil
			case "own-error":
				return nil, errors.New("scripted failure")
			case "relayed":
				return &tools.Response{Status: 500, Body: []byte(`{}`), Relayed: true}, nil
			case "relayed-marked":
				return &tools.Response{Status: 503, Body: []byte(`{}`), Relayed: true, NotExecuted: true}, nil
			}
			return nil, errors.New("unknown mode")
		}
		h := newHarness(t, kind, []tools.Tool{pay}, withAdmin("adm"), withPolicy("pay", tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}))
		for step, mode := range []string{"own-5xx", "own-error", "relayed-marked"} {
			args := `{"mode":"` + mode + `"}`
			first := h.do(callSpec{tool: "pay", session: "p", step: uint64(step), args: args})
			retry := h.do(callSpec{tool: "pay", session: "p", step: uint64(step), args: args})
			if first.status < 500 || retry.status != http.StatusOK || pay.runs(derivedKey(t, "p", uint64(step), "pay", args)) != 2 {
				t.Errorf("%s: %d then %d, %d runs; want released and run again", mode, first.status, retry.status, pay.runs(derivedKey(t, "p", uint64(step), "pay", args)))
			}
		}
		args := `{"mode":"relayed"}`
		p := wantProblem(t, h.do(callSpec{tool: "pay", session: "p", step: 9, args: args}), http.StatusInternalServerError, wire.CodeToolFailed)
		if p["retryable"] != false {
			t.Fatalf("a relayed 5xx of an unknown tool says retryable %v", p["retryable"])
		}
		wantProblem(t, h.do(callSpec{tool: "pay", session: "p", step: 9, args: args}), http.StatusConflict, wire.CodeOutcomeUnknown)
		wantUnknownRecord(t, h, "p", 9, "pay", args)
		if n := pay.runs(derivedKey(t, "p", 9, "pay", args)); n != 1 {
			t.Fatalf("the relayed 5xx's call ran %d times, want 1", n)
		}
	})
}

// A payment-like tool: timeout 1s, an upstream that outlives it. The unknown
// tool answers 504 tool_timeout not retryable, its retries 409
// outcome_unknown, and it ran once; the rerun tool's 504 stays retryable
// and a retry runs it again.
func TestTimeoutOfAnUnknownToolLeavesItUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		up := newSlowUpstream(t)
		h := newHarness(t, kind, []tools.Tool{httpTool(t, "pay", up.srv.URL, nil), httpTool(t, "provision", up.srv.URL, nil)},
			withAdmin("adm"),
			withPolicy("pay", tools.Policy{Timeout: time.Second, LeaseExpiry: tools.LeaseExpiryUnknown}),
			withPolicy("provision", tools.Policy{Timeout: time.Second}))

		p := wantProblem(t, h.do(callSpec{tool: "pay", session: "t", step: 1, args: `{"amount":5}`}), http.StatusGatewayTimeout, wire.CodeToolTimeout)
		if p["retryable"] != false {
			t.Fatalf("the timeout of an unknown tool says retryable %v: %v", p["retryable"], p)
		}
		wantOutcomeUnknown(t, sdkRetries(t, h, "t", 1, "pay", `{"amount":5}`))
		wantProblem(t, h.do(callSpec{tool: "pay", session: "t", step: 1, args: `{"amount":5}`}), http.StatusConflict, wire.CodeOutcomeUnknown)
		wantUnknownRecord(t, h, "t", 1, "pay", `{"amount":5}`)

		// Over MCP alike: a tool failure whose _meta says not retryable,
		// then -32002 outcome_unknown.
		cs := h.mcpSession(mcpClientOptions{})
		res, err := mcpCall(t, cs, "pay", `{"amount":6}`, identityMeta("t", 3))
		if err != nil || !res.IsError {
			t.Fatalf("MCP timeout of the unknown tool: %v %+v", err, res)
		}
		wantErrorMeta(t, res, wire.CodeToolTimeout, false)
		_, err = mcpCall(t, cs, "pay", `{"amount":6}`, identityMeta("t", 3))
		wantRPCError(t, err, wire.RPCOutcomeUnknown, wire.CodeOutcomeUnknown)

		p = wantProblem(t, h.do(callSpec{tool: "provision", session: "t", step: 2, args: `{}`}), http.StatusGatewayTimeout, wire.CodeToolTimeout)
		if p["retryable"] != true {
			t.Fatalf("the timeout of a rerun tool says retryable %v", p["retryable"])
		}
		_ = h.do(callSpec{tool: "provision", session: "t", step: 2, args: `{}`}) // released: runs again

		up.finish()
		if n := up.ran(t, "t", 1, "pay", `{"amount":5}`); n != 1 {
			t.Fatalf("the unknown tool's upstream ran %d times, want 1", n)
		}
		if n := up.ran(t, "t", 3, "pay", `{"amount":6}`); n != 1 {
			t.Fatalf("the unknown tool's upstream ran %d times over MCP, want 1", n)
		}
		if n := up.ran(t, "t", 2, "provision", `{}`); n != 2 {
			t.Fatalf("the rerun tool's upstream ran %d times, want 2 (released, run again)", n)
		}
	})
}

// A drain shorter than the call cancels the tool: the unknown tool's record
// stays UNKNOWN (500 tool_failed, not retryable), the rerun tool's is
// released.
func TestDrainCancellingAnUnknownToolLeavesItUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		up := newSlowUpstream(t)
		h := newHarness(t, kind, []tools.Tool{httpTool(t, "pay", up.srv.URL, nil), httpTool(t, "provision", up.srv.URL, nil)},
			withAdmin("adm"),
			withPolicy("pay", tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}))
		answers := map[string]chan response{"pay": make(chan response, 1), "provision": make(chan response, 1)}
		for step, tool := range []string{"pay", "provision"} {
			go func() { answers[tool] <- h.do(callSpec{tool: tool, session: "d", step: uint64(step), args: `{}`}) }()
		}
		eventually(t, 5*time.Second, "both calls to reach the upstream", func() bool {
			return up.ran(t, "d", 0, "pay", `{}`) == 1 && up.ran(t, "d", 1, "provision", `{}`) == 1
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := h.gw.Drain(ctx); err == nil {
			t.Fatal("Drain returned nil although the tools outlived it")
		}
		for tool, retryable := range map[string]bool{"pay": false, "provision": true} {
			p := wantProblem(t, <-answers[tool], http.StatusInternalServerError, wire.CodeToolFailed)
			if p["retryable"] != retryable {
				t.Fatalf("%s cancelled by the drain: retryable %v, want %v", tool, p["retryable"], retryable)
			}
		}
		up.release() // the upstream acts after the drain, as a slow payment would

		// A replica that is not draining takes the retries.
		other := newHarness(t, kind, []tools.Tool{httpTool(t, "pay", up.srv.URL, nil), httpTool(t, "provision", up.srv.URL, nil)},
			withStore(h.store), withAdmin("adm"),
			withPolicy("pay", tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}))
		wantOutcomeUnknown(t, sdkRetries(t, other, "d", 0, "pay", `{}`))
		wantUnknownRecord(t, other, "d", 0, "pay", `{}`)
		if r := other.do(callSpec{tool: "provision", session: "d", step: 1, args: `{}`}); r.status != http.StatusOK {
			t.Fatalf("retry of the released rerun call: %d %s", r.status, r.body)
		}
		up.finish()
		if n := up.ran(t, "d", 0, "pay", `{}`); n != 1 {
			t.Fatalf("the unknown tool's upstream ran %d times, want 1", n)
		}
		if n := up.ran(t, "d", 1, "provision", `{}`); n != 2 {
			t.Fatalf("the rerun tool's upstream ran %d times, want 2", n)
		}
	})
}

// The dropped keep-alive connection, through the gateway: the
// upstream answers the first request on each connection and drops the
// second unanswered. Each request reaches the socket once; the unknown
// tool's call is UNKNOWN (502 not retryable, retries 409), the rerun tool's
// call is released (502 retryable) and its retry runs on a new connection.
func TestConnectionLostAfterTheRequestWasWritten(t *testing.T) {
	up, err := dropupstream.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	client := httptool.NewClient() // one pool: the second call reuses the first's connection
	h := newHarness(t, storeEmbedded, []tools.Tool{httpTool(t, "pay", up.URL(), client), httpTool(t, "provision", up.URL(), client)},
		withAdmin("adm"), withPolicy("pay", tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}))
	received := func(session string, step uint64, tool string) int {
		return up.Received(keyderive.ScopedKey(callpath.AnonymousTenant, tool, derivedKey(t, session, step, tool, `{}`)))
	}

	for _, c := range []struct {
		tool      string
		retryable bool
	}{{"pay", false}, {"provision", true}} {
		if r := h.do(callSpec{tool: c.tool, session: c.tool, step: 0}); r.status != http.StatusOK {
			t.Fatalf("%s on a new connection: %d %s", c.tool, r.status, r.body)
		}
		p := wantProblem(t, h.do(callSpec{tool: c.tool, session: c.tool, step: 1}), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
		if p["retryable"] != c.retryable {
			t.Fatalf("%s: connection lost after the request: retryable %v, want %v", c.tool, p["retryable"], c.retryable)
		}
		if n := received(c.tool, 1, c.tool); n != 1 {
			t.Fatalf("%s: the upstream read the request %d times, want once", c.tool, n)
		}
	}
	wantOutcomeUnknown(t, sdkRetries(t, h, "pay", 1, "pay", `{}`))
	wantUnknownRecord(t, h, "pay", 1, "pay", `{}`)
	if r := h.do(callSpec{tool: "provision", session: "provision", step: 1}); r.status != http.StatusOK {
		t.Fatalf("retry of the released rerun call: %d %s", r.status, r.body)
	}
	if n := received("pay", 1, "pay"); n != 1 {
		t.Fatalf("the unknown tool's request reached the upstream %d times, want 1", n)
	}
	if n := received("provision", 1, "provision"); n != 2 {
		t.Fatalf("the rerun tool's request reached the upstream %d times, want 2 (once per attempt)", n)
	}
}

// TestOversizedResultOfAnUnknownToolLeavesItUnknown: an upstream that
// answers with a result over max_response_bytes has acted, but nothing of
// its answer can be stored: a lease_expiry: unknown tool's record becomes
// UNKNOWN (502 upstream_response_too_large, not retryable, then 409
// outcome_unknown), while a rerun tool is released and runs again.
func TestOversizedResultOfAnUnknownToolLeavesItUnknown(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		runs[r.Header.Get(wire.HeaderIdempotencyKey)]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"blob":"` + strings.Repeat("x", 2048) + `"}`))
	}))
	t.Cleanup(up.Close)
	capped := func(name string) tools.Tool {
		tool, err := httptool.New(httptool.Config{Name: name, URL: up.URL, MaxResponseBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{capped("pay"), capped("provision")},
		withAdmin("adm"), withPolicy("pay", tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}))
	ran := func(tool string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[keyderive.ScopedKey(callpath.AnonymousTenant, tool, derivedKey(t, tool, 0, tool, `{}`))]
	}
	for _, c := range []struct {
		tool      string
		retryable bool
	}{{"pay", false}, {"provision", false}} {
		p := wantProblem(t, h.do(callSpec{tool: c.tool, session: c.tool, step: 0}), http.StatusBadGateway, wire.CodeUpstreamResponseTooLarge)
		if p["retryable"] != c.retryable {
			t.Fatalf("%s: retryable %v, want %v", c.tool, p["retryable"], c.retryable)
		}
	}
	wantProblem(t, h.do(callSpec{tool: "pay", session: "pay", step: 0}), http.StatusConflict, wire.CodeOutcomeUnknown)
	wantUnknownRecord(t, h, "pay", 0, "pay", `{}`)
	wantProblem(t, h.do(callSpec{tool: "provision", session: "provision", step: 0}), http.StatusBadGateway, wire.CodeUpstreamResponseTooLarge)
	if n := ran("pay"); n != 1 {
		t.Fatalf("the unknown tool ran %d times, want 1", n)
	}
	if n := ran("provision"); n != 2 {
		t.Fatalf("the rerun tool ran %d times, want 2 (released, once per attempt)", n)
	}
}

func TestOutcomesThatAreNotRecordedRunAgain(t *testing.T) {
	cases := []struct {
		name       string
		behave     func(ctx context.Context, req *tools.Request) (*tools.Response, error)
		wantStatus int
		wantCode   string // problem code, "" when the tool's own body passes through
	}{
		{"500 from the tool", func(context.Context, *tools.Request) (*tools.Response, error) {
			return &tools.Response{Status: 503, Body: []byte(`{"busy":true}`)}, nil
		}, 503, ""},
		{"429 is transient", func(context.Context, *tools.Request) (*tools.Response, error) {
			return &tools.Response{Status: 429, Body: []byte(`{"slow":"down"}`)}, nil
		}, 429, ""},
		{"408 is transient", func(context.Context, *tools.Request) (*tools.Response, error) {
			return &tools.Response{Status: 408, Body: []byte(`{}`)}, nil
		}, 408, ""},
		{"425 is transient", func(context.Context, *tools.Request) (*tools.Response, error) {
			return &tools.Response{Status: 425, Body: []byte(`{}`)}, nil
		}, 425, ""},
		{"error", func(context.Context, *tools.Request) (*tools.Response, error) {
			return nil, context.Canceled
		}, 500, wire.CodeToolFailed},
		{"panic", func(context.Context, *tools.Request) (*tools.Response, error) {
			panic("boom")
		}, 500, wire.CodeToolFailed},
		{"upstream unreachable", func(context.Context, *tools.Request) (*tools.Response, error) {
			return nil, tools.ErrUpstreamUnreachable
		}, 502, wire.CodeUpstreamUnreachable},
		{"timeout", func(ctx context.Context, _ *tools.Request) (*tools.Response, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, 504, wire.CodeToolTimeout},
	}
	forEachStore(t, func(t *testing.T, kind storeKind) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				tool := newTestTool("flaky")
				tool.behave = tc.behave
				h := newHarness(t, kind, []tools.Tool{tool}, withPolicy("flaky", tools.Policy{Timeout: 200 * time.Millisecond}))
				c := callSpec{tool: "flaky", session: "s", step: 1, args: `{"a":1}`}
				var execIDs []string
				for i := 0; i < 2; i++ {
					r := h.do(c)
					if r.status != tc.wantStatus {
						t.Fatalf("attempt %d: status %d, want %d: %s", i, r.status, tc.wantStatus, r.body)
					}
					if tc.wantCode != "" {
						p := wantProblem(t, r, tc.wantStatus, tc.wantCode)
						if p["retryable"] != true {
							t.Fatalf("%s must be retryable", tc.wantCode)
						}
					}
					if r.header.Get("Idempotent-Replayed") != "false" || r.header.Get("Tool-Execution-Id") == "" {
						t.Fatalf("executed response lacks execution headers: %v", r.header)
					}
					execIDs = append(execIDs, r.header.Get("Tool-Execution-Id"))
				}
				if n := tool.total.Load(); n != 2 {
					t.Fatalf("tool ran %d times, want 2 (nothing recorded)", n)
				}
				if execIDs[0] == execIDs[1] {
					t.Fatal("a new claim must mint a new execution id")
				}
				// After the release the step is free again: no step_conflict
				// for another call of the same step.
				tool.behave = nil
				other := h.do(callSpec{tool: "flaky", session: "s", step: 1, args: `{"a":2}`})
				if other.status != 200 {
					t.Fatalf("step not freed after release: %d %s", other.status, other.body)
				}
			})
		}
	})
}

func TestFourXXIsRecordedAndReplayed(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("strict")
		tool.behave = func(context.Context, *tools.Request) (*tools.Response, error) {
			return &tools.Response{Status: 404, Body: []byte(`{"error":"no such zone"}`)}, nil
		}
		h := newHarness(t, kind, []tools.Tool{tool})
		c := callSpec{tool: "strict", session: "s", step: 9, args: `{"zone":"x"}`}
		first := h.do(c)
		second := h.do(c)
		if first.status != 404 || second.status != 404 || !bytes.Equal(first.body, second.body) {
			t.Fatalf("want the 404 replayed: %d %s / %d %s", first.status, first.body, second.status, second.body)
		}
		if second.header.Get("Idempotent-Replayed") != "true" || tool.total.Load() != 1 {
			t.Fatalf("4xx not replayed: replayed=%q runs=%d", second.header.Get("Idempotent-Replayed"), tool.total.Load())
		}
	})
}
