package httptool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/dropupstream"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// seen is what the upstream received for one call.
type seen struct {
	method string
	host   string
	header http.Header
	body   []byte
}

// recordingUpstream answers every call with status, contentType and body,
// and hands what it received to the test.
func recordingUpstream(t *testing.T, status int, contentType, body string) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{method: r.Method, host: r.Host, header: r.Header.Clone(), body: b}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func newTool(t *testing.T, cfg Config) *Tool {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "upstream-tool"
	}
	tool, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestForwardsExactBodyAndCallHeaders(t *testing.T) {
	srv, got := recordingUpstream(t, 201, "application/json; charset=utf-8", `{"id":"r-1"}`)
	tool := newTool(t, Config{
		URL:     srv.URL + "/provision?region=eu",
		Headers: map[string]string{"x-api-key": "secret", "Host": "upstream.internal"},
	})
	// Whitespace, key order and escapes must survive: the upstream gets the
	// client's bytes, not a re-encoding.
	args := []byte("{ \"b\" : 1,\n\"a\":\"\\u00e9\", \"n\": 1.50 }")
	resp, err := tool.Call(context.Background(), &tools.Request{
		Arguments:      args,
		Tenant:         "acme",
		SessionID:      "sess-1",
		StepIndex:      7,
		HasStep:        true,
		IdempotencyKey: strings.Repeat("ab", 32),
		ScopedKey:      strings.Repeat("cd", 32),
		ExecutionID:    "01HZX3J5Q8W9VQ6M0N5E2R4T7Y",
		FencingToken:   3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 201 || resp.ContentType != "application/json; charset=utf-8" || string(resp.Body) != `{"id":"r-1"}` {
		t.Fatalf("response = %d %q %q", resp.Status, resp.ContentType, resp.Body)
	}
	call := <-got
	if call.method != http.MethodPost {
		t.Errorf("method = %s", call.method)
	}
	if string(call.body) != string(args) {
		t.Errorf("body = %q, want exactly %q", call.body, args)
	}
	if call.host != "upstream.internal" {
		t.Errorf("Host = %q", call.host)
	}
	for name, want := range map[string]string{
		"Content-Type":      "application/json",
		"Idempotency-Key":   strings.Repeat("cd", 32), // the tenant-scoped key, not the client's
		"Tool-Tenant":       "acme",
		"Agent-Session-Id":  "sess-1",
		"Agent-Step-Index":  "7",
		"Fencing-Token":     "3",
		"Tool-Execution-Id": "01HZX3J5Q8W9VQ6M0N5E2R4T7Y",
		"X-Api-Key":         "secret",
		"Content-Length":    fmt.Sprint(len(args)),
	} {
		if v := call.header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
}

func TestReadOnlyCallSendsNoIdempotencyHeaders(t *testing.T) {
	srv, got := recordingUpstream(t, 200, "application/json", `{}`)
	tool := newTool(t, Config{URL: srv.URL, ReadOnly: true})
	if _, err := tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`), Tenant: "anonymous"}); err != nil {
		t.Fatal(err)
	}
	call := <-got
	for _, name := range []string{"Idempotency-Key", "Agent-Session-Id", "Agent-Step-Index", "Fencing-Token", "Tool-Execution-Id"} {
		if v, ok := call.header[name]; ok {
			t.Errorf("read-only call sent %s: %q", name, v)
		}
	}
	if !tool.Spec().ReadOnly {
		t.Error("Spec().ReadOnly = false")
	}
}

func TestEveryStatusIsAResponse(t *testing.T) {
	for _, status := range []int{200, 204, 302, 400, 409, 429, 500, 503} {
		srv, _ := recordingUpstream(t, status, "text/plain", fmt.Sprintf("status %d", status))
		tool := newTool(t, Config{URL: srv.URL})
		resp, err := tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
		if err != nil {
			t.Fatalf("%d: err = %v, want a Response", status, err)
		}
		wantBody := fmt.Sprintf("status %d", status)
		if status == 204 {
			wantBody = ""
		}
		if resp.Status != status || string(resp.Body) != wantBody {
			t.Errorf("%d: got %d %q", status, resp.Status, resp.Body)
		}
	}
}

// TestAnswerIsRelayedAndMarkedNotExecutedOnlyByTheHeader: every answer is
// Relayed (the upstream's, not the tool's own word); NotExecuted only when
// the upstream sent Toolgateway-Outcome: not-executed, exactly.
func TestAnswerIsRelayedAndMarkedNotExecutedOnlyByTheHeader(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{{"", false}, {wire.OutcomeNotExecuted, true}, {"executed", false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tc.header != "" {
				w.Header().Set(wire.HeaderOutcome, tc.header)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		resp, err := newTool(t, Config{URL: srv.URL}).Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
		srv.Close()
		if err != nil || resp.Status != http.StatusServiceUnavailable || !resp.Relayed || resp.NotExecuted != tc.want {
			t.Errorf("header %q: %+v, %v; want a relayed 503, NotExecuted %v", tc.header, resp, err, tc.want)
		}
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	var followed atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Store(true) }))
	defer target.Close()
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer srv.Close()
	resp, err := newTool(t, Config{URL: srv.URL, Client: NewClient()}).Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusFound || followed.Load() {
		t.Fatalf("status = %d, followed = %v; want the 302 itself", resp.Status, followed.Load())
	}
}

func TestTimeoutIsDeadlineExceeded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newTool(t, Config{URL: srv.URL}).Call(ctx, &tools.Request{Arguments: []byte(`{}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if errors.Is(err, tools.ErrUpstreamUnreachable) {
		t.Fatalf("timeout also claims unreachable: %v", err)
	}
}

func TestTimeoutWhileReadingTheBodyIsDeadlineExceeded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, `{"partial":`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newTool(t, Config{URL: srv.URL}).Call(ctx, &tools.Request{Arguments: []byte(`{}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestCancelledContextIsCanceled(t *testing.T) {
	srv, _ := recordingUpstream(t, 200, "", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newTool(t, Config{URL: srv.URL}).Call(ctx, &tools.Request{Arguments: []byte(`{}`)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRefusedConnectionIsUnreachable(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	listener.Close() // nothing listens there any more
	_, err = newTool(t, Config{URL: "http://user:hunter2@" + addr + "/x"}).Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
	// Never written, so certainly not acted on: a retry may run it again.
	if !errors.Is(err, tools.ErrUpstreamUnreachable) || errors.Is(err, tools.ErrOutcomeUncertain) {
		t.Fatalf("err = %v, want tools.ErrUpstreamUnreachable alone", err)
	}
	if !strings.Contains(err.Error(), `"upstream-tool"`) {
		t.Errorf("err %q does not name the tool", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("err %q leaks the URL's password", err)
	}
}

// An upstream that read the request and hung up without answering may
// have acted: the outcome is uncertain, not "unreachable".
func TestConnectionLostAfterTheRequestIsUncertain(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	_, err := newTool(t, Config{URL: srv.URL}).Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
	if !errors.Is(err, tools.ErrOutcomeUncertain) || errors.Is(err, tools.ErrUpstreamUnreachable) {
		t.Fatalf("err = %v, want tools.ErrOutcomeUncertain alone", err)
	}
}

// The repro of Go's resend: an upstream that answers the first request on
// each keep-alive connection and drops the connection on the second. net/http
// would write that second request again on a new connection (a POST with an
// Idempotency-Key header counts as replayable); the tool must write it once
// and report the lost connection as uncertain. Counted at the socket.
func TestRequestOnADroppedKeepAliveConnectionIsWrittenOnce(t *testing.T) {
	up, err := dropupstream.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	tool := newTool(t, Config{URL: up.URL() + "/charge"})
	call := func(key string) (*tools.Response, error) {
		return tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{"amount":1}`), ScopedKey: key, FencingToken: 1})
	}
	for i := range 5 {
		first, second := fmt.Sprintf("first-%d", i), fmt.Sprintf("second-%d", i)
		resp, err := call(first) // a new connection: answered
		if err != nil || resp.Status != 200 {
			t.Fatalf("call %s: %v %+v", first, err, resp)
		}
		resp, err = call(second) // the same connection, reused: dropped
		if !errors.Is(err, tools.ErrOutcomeUncertain) {
			t.Fatalf("call %s on the reused connection: %+v, %v; want an error wrapping tools.ErrOutcomeUncertain", second, resp, err)
		}
		for _, key := range []string{first, second} {
			if n := up.Received(key); n != 1 {
				t.Fatalf("the upstream read the request with key %s %d times, want once", key, n)
			}
		}
	}
}

// failingTransport fails every round trip with err.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// timeoutError is a net.Error that timed out outside a dial, like
// http.Transport's response-header timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "timeout awaiting response headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestTransportErrorsAreClassified(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"dns", &net.DNSError{Err: "no such host", Name: "upstream.invalid", IsNotFound: true}, tools.ErrUpstreamUnreachable},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}, tools.ErrUpstreamUnreachable},
		{"response header timeout", timeoutError{}, context.DeadlineExceeded},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, tools.ErrUpstreamUnreachable},
	}
	for _, c := range cases {
		tool := newTool(t, Config{URL: "http://upstream.invalid/", Client: &http.Client{Transport: failingTransport{c.err}}})
		_, err := tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want it to wrap %v", c.name, err, c.want)
		}
	}
}

func TestResponseCap(t *testing.T) {
	const limit = 1024
	body := strings.Repeat("x", limit)
	exact, _ := recordingUpstream(t, 200, "text/plain", body)
	over, _ := recordingUpstream(t, 200, "text/plain", body+"y")
	// No Content-Length: the cap must hold while streaming too.
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 4; i++ {
			io.WriteString(w, strings.Repeat("z", limit/2))
			w.(http.Flusher).Flush()
		}
	}))
	defer chunked.Close()

	resp, err := newTool(t, Config{URL: exact.URL, MaxResponseBytes: limit}).Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
	if err != nil || len(resp.Body) != limit {
		t.Fatalf("at the cap: err = %v", err)
	}
	for name, url := range map[string]string{"content-length": over.URL, "chunked": chunked.URL} {
		_, err := newTool(t, Config{URL: url, MaxResponseBytes: limit}).Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
		if !errors.Is(err, tools.ErrResponseTooLarge) {
			t.Errorf("%s: err = %v, want tools.ErrResponseTooLarge", name, err)
		}
	}
}

func TestDefaultCap(t *testing.T) {
	if got := newTool(t, Config{URL: "http://x"}).maxBytes; got != DefaultMaxResponseBytes {
		t.Fatalf("default cap = %d", got)
	}
}

func TestKeepAliveConnectionsAreReused(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := NewClient()
	tool := newTool(t, Config{URL: srv.URL, Client: client})
	for i := 0; i < 20; i++ {
		if _, err := tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 sequential calls opened %d connections, want 1", n)
	}

	// A burst of concurrent calls succeeds and leaves its connections
	// pooled: the next burst opens none (net/http's default keeps 2).
	const burst = 32
	var wg sync.WaitGroup
	start := make(chan struct{})
	var failures atomic.Int64
	runBurst := func() {
		for i := 0; i < burst; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)}); err != nil {
					failures.Add(1)
				}
			}()
		}
	}
	runBurst()
	close(start)
	wg.Wait()
	afterFirst := conns.Load()
	start = make(chan struct{})
	runBurst()
	close(start)
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d concurrent calls failed", failures.Load())
	}
	if afterFirst > burst+1 || conns.Load() > afterFirst+burst/2 {
		t.Fatalf("connections: %d after the first burst, %d after the second", afterFirst, conns.Load())
	}
}

func TestNewRejectsBadConfigNamingTheTool(t *testing.T) {
	cases := map[string]Config{
		"bad name":        {Name: "Bad", URL: "http://x"},
		"no url":          {Name: "t1"},
		"relative url":    {Name: "t1", URL: "/provision"},
		"ftp url":         {Name: "t1", URL: "ftp://x/y"},
		"reserved header": {Name: "t1", URL: "http://x", Headers: map[string]string{"idempotency-key": "x"}},
		"fencing header":  {Name: "t1", URL: "http://x", Headers: map[string]string{"Fencing-Token": "9"}},
		"bad header name": {Name: "t1", URL: "http://x", Headers: map[string]string{"bad header": "x"}},
		"header newline":  {Name: "t1", URL: "http://x", Headers: map[string]string{"X-A": "a\r\nX-B: b"}},
		"negative cap":    {Name: "t1", URL: "http://x", MaxResponseBytes: -1},
	}
	for what, cfg := range cases {
		_, err := New(cfg)
		if err == nil {
			t.Errorf("%s: New succeeded", what)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", cfg.Name)) {
			t.Errorf("%s: error %q does not name the tool", what, err)
		}
	}
}

func TestSpecAndRegistry(t *testing.T) {
	tool := newTool(t, Config{
		Name:        "remote",
		Description: "calls out",
		InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`),
		URL:         "https://user:pw@example.com/run",
	})
	r := tools.NewRegistry()
	if err := r.Add(tool); err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("remote")
	if e.Spec.Description != "calls out" || len(e.Validate(map[string]any{})) != 1 {
		t.Fatalf("entry = %+v", e.Spec)
	}
}

// TestAdversaryNonFinalStatusIsUncertain: an upstream on a raw socket
// (net/http cannot write these) reads the request and answers a status
// outside 200–599, a 101 after which it keeps the connection open, or a
// malformed status line: each is tools.ErrOutcomeUncertain, never a
// Response, and the call returns without reading on (bounded by ctx).
func TestAdversaryNonFinalStatusIsUncertain(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\n{}",
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var read atomic.Int32
		go func() {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
				_, _ = io.Copy(io.Discard, req.Body)
				read.Add(1)
				_, _ = io.WriteString(conn, answer)
			}
			<-t.Context().Done() // the connection stays open, as after a protocol switch
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		resp, err := newTool(t, Config{URL: "http://" + l.Addr().String()}).Call(ctx, &tools.Request{Arguments: []byte(`{}`)})
		cancel()
		_ = l.Close()
		status, _, _ := strings.Cut(strings.TrimPrefix(answer, "HTTP/1.1 "), " ")
		if resp != nil || !errors.Is(err, tools.ErrOutcomeUncertain) || errors.Is(err, context.DeadlineExceeded) || read.Load() != 1 {
			t.Errorf("status %s: %+v, %v (requests read %d); want tools.ErrOutcomeUncertain before the deadline, the request read once", status, resp, err, read.Load())
		}
	}
}
