package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/notify"
)

// receiver is a webhook endpoint that verifies every request and answers
// the statuses it is given in turn (200 when they run out).
type receiver struct {
	t        *testing.T
	mu       sync.Mutex
	statuses []int
	bodies   []map[string]any
	arrived  chan struct{} // one value per request, when set
	release  chan struct{} // each request waits for it, when set
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, time.Minute); err != nil {
		rc.t.Errorf("receiver: %v", err)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" || r.Method != http.MethodPost {
		rc.t.Errorf("receiver: %s with Content-Type %q", r.Method, ct)
	}
	var decoded map[string]any
	if err := json.Unmarshal(body, &decoded); err != nil {
		rc.t.Errorf("receiver: body %s: %v", body, err)
	}
	if rc.arrived != nil {
		rc.arrived <- struct{}{}
	}
	if rc.release != nil {
		select {
		case <-rc.release:
		case <-r.Context().Done():
			return
		}
	}
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, decoded)
	status := http.StatusOK
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	}
	rc.mu.Unlock()
	w.WriteHeader(status)
}

func (rc *receiver) requests() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.bodies)
}

// start serves rc and returns a Notifier posting to it with fast retries.
func start(t *testing.T, rc *receiver, tune func(*notify.Config)) *notify.Notifier {
	t.Helper()
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	cfg := notify.Config{
		URL: srv.URL, Secret: secret, ConsoleBaseURL: "https://gw.example.com",
		InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
	}
	if tune != nil {
		tune(&cfg)
	}
	n, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pending(id string) notify.Pending {
	now := time.Now()
	return notify.Pending{
		ApprovalID: id, Tool: "refund", Tenant: "acme", Session: "s-1", Step: 2, HasStep: true,
		CanonicalArguments: []byte(`{"amount":2000}`), Rule: 1, Reason: "finance",
		RequestedAt: now, ExpiresAt: now.Add(time.Hour),
	}
}

// closeAll drains n fully, failing the test if it cannot.
func closeAll(t *testing.T, n *notify.Notifier) notify.Stats {
	t.Helper()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n.Stats()
}

// TestNotifyDelivers checks a notification arrives signed, with its body.
func TestNotifyDelivers(t *testing.T) {
	rc := &receiver{t: t}
	n := start(t, rc, nil)
	if err := n.Notify(pending("01JA")); err != nil {
		t.Fatal(err)
	}
	st := closeAll(t, n)
	if st != (notify.Stats{Delivered: 1}) || rc.requests() != 1 {
		t.Fatalf("stats %+v after %d requests; want 1 delivered", st, rc.requests())
	}
	got := rc.bodies[0]
	if got["type"] != "approval.pending" || got["approval_id"] != "01JA" || got["step"] != 2.0 ||
		got["console_url"] != "https://gw.example.com/console/approvals/01JA" ||
		got["canonical_arguments"].(map[string]any)["amount"] != 2000.0 {
		t.Errorf("body %v", got)
	}
}

// TestNotifyRetries checks 5xx, 429 and 408 answers are retried until one
// succeeds, each attempt signed afresh (the receiver verifies each).
func TestNotifyRetries(t *testing.T) {
	rc := &receiver{t: t, statuses: []int{500, 503, 429, 408}}
	n := start(t, rc, nil)
	if err := n.Notify(pending("01JB")); err != nil {
		t.Fatal(err)
	}
	if st := closeAll(t, n); st != (notify.Stats{Delivered: 1, Retries: 4}) || rc.requests() != 5 {
		t.Errorf("stats %+v after %d requests; want delivered after 4 retries, 5 requests", st, rc.requests())
	}
}

// TestNotifyGivesUp checks the attempts are bounded.
func TestNotifyGivesUp(t *testing.T) {
	rc := &receiver{t: t, statuses: []int{500, 500, 500, 500, 500, 500}}
	n := start(t, rc, func(c *notify.Config) { c.MaxAttempts = 3 })
	if err := n.Notify(pending("01JC")); err != nil {
		t.Fatal(err)
	}
	if st := closeAll(t, n); st != (notify.Stats{Failed: 1, Retries: 2}) || rc.requests() != 3 {
		t.Errorf("stats %+v after %d requests; want failed after 3 attempts", st, rc.requests())
	}
}

// TestNotifyFinalStatus checks a 4xx other than 408 and 429 is not retried.
func TestNotifyFinalStatus(t *testing.T) {
	rc := &receiver{t: t, statuses: []int{401, 200}}
	n := start(t, rc, nil)
	if err := n.Notify(pending("01JD")); err != nil {
		t.Fatal(err)
	}
	if st := closeAll(t, n); st != (notify.Stats{Failed: 1}) || rc.requests() != 1 {
		t.Errorf("stats %+v after %d requests; want failed after 1 attempt", st, rc.requests())
	}
}

// TestNotifyNeverBlocks checks that with the receiver hanging and the
// queue full, Notify still returns: it drops and counts.
func TestNotifyNeverBlocks(t *testing.T) {
	rc := &receiver{t: t, arrived: make(chan struct{}, 8), release: make(chan struct{})}
	n := start(t, rc, func(c *notify.Config) { c.Workers, c.QueueSize = 1, 2 })
	if err := n.Notify(pending("01J0")); err != nil {
		t.Fatal(err)
	}
	<-rc.arrived // the only worker is now stuck in the receiver
	for _, id := range []string{"01J1", "01J2"} {
		if err := n.Notify(pending(id)); err != nil {
			t.Fatalf("Notify(%s) with room in the queue: %v", id, err)
		}
	}
	// The receiver is still blocked on release (nothing has closed it),
	// and the queue is full: this call must come back anyway.
	if err := n.Notify(pending("01J3")); !errors.Is(err, notify.ErrQueueFull) {
		t.Fatalf("Notify on a full queue = %v, want ErrQueueFull", err)
	}
	if st := n.Stats(); st.Dropped != 1 || st.Delivered != 0 {
		t.Fatalf("stats while blocked %+v; want 1 dropped, none delivered", st)
	}
	close(rc.release)
	if st := closeAll(t, n); st != (notify.Stats{Delivered: 3, Dropped: 1}) {
		t.Errorf("stats %+v; want 3 delivered, 1 dropped", st)
	}
}

// TestCloseCancels checks Close gives up draining when its context ends:
// the attempt in flight is cancelled, the queued ones dropped, and later
// notifications refused.
func TestCloseCancels(t *testing.T) {
	rc := &receiver{t: t, arrived: make(chan struct{}, 8), release: make(chan struct{})}
	defer close(rc.release)
	n := start(t, rc, func(c *notify.Config) { c.Workers = 1 })
	for _, id := range []string{"01J0", "01J1", "01J2"} {
		if err := n.Notify(pending(id)); err != nil {
			t.Fatal(err)
		}
	}
	<-rc.arrived
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	if err := n.Notify(pending("01J9")); !errors.Is(err, notify.ErrClosed) {
		t.Errorf("Notify after Close = %v, want ErrClosed", err)
	}
	if st := n.Stats(); st != (notify.Stats{Failed: 1, Dropped: 3}) || rc.requests() != 0 {
		t.Errorf("stats %+v after %d answered requests; want the one in flight failed, 2 queued + 1 late dropped", st, rc.requests())
	}
}

// TestNewRefuses checks the required settings and an unencodable payload.
func TestNewRefuses(t *testing.T) {
	if _, err := notify.New(notify.Config{Secret: secret}); err == nil {
		t.Error("New accepted a config without URL")
	}
	if _, err := notify.New(notify.Config{URL: "http://127.0.0.1:1"}); err == nil {
		t.Error("New accepted a config without secret")
	}
	n := start(t, &receiver{t: t}, nil)
	bad := pending("01JE")
	bad.CanonicalArguments = []byte(`{`)
	if err := n.Notify(bad); err == nil {
		t.Error("Notify accepted arguments that are not JSON")
	}
	if st := closeAll(t, n); st != (notify.Stats{}) {
		t.Errorf("stats %+v, want nothing sent", st)
	}
}

// TestNotifyLogsNoURL checks a failure is logged without the webhook URL,
// whose path or query often holds a token.
func TestNotifyLogsNoURL(t *testing.T) {
	var log strings.Builder
	var mu sync.Mutex
	n, err := notify.New(notify.Config{
		URL: "http://127.0.0.1:1/hooks/T0K3N-s3cr3t", Secret: secret, MaxAttempts: 1,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &log}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(pending("01JF")); err != nil {
		t.Fatal(err)
	}
	if st := closeAll(t, n); st.Failed != 1 {
		t.Fatalf("stats %+v, want 1 failed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if out := log.String(); !strings.Contains(out, "01JF") || strings.Contains(out, "T0K3N") {
		t.Errorf("log %q: want the approval id and not the URL", out)
	}
}

// TestNotifyNoRedirect checks a redirect is a final answer, not followed.
func TestNotifyNoRedirect(t *testing.T) {
	rc := &receiver{t: t}
	target := httptest.NewServer(rc)
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer redirect.Close()
	n, err := notify.New(notify.Config{URL: redirect.URL, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(pending("01JG")); err != nil {
		t.Fatal(err)
	}
	if st := closeAll(t, n); st != (notify.Stats{Failed: 1}) || rc.requests() != 0 {
		t.Errorf("stats %+v, %d requests at the redirect's target; want 1 failed, none followed", st, rc.requests())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
