package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/notify"
)

// A receiver checks each notification's signature over the exact body
// bytes before trusting it.
func ExampleVerify() {
	secret := []byte("the approvals.notify secret")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Decode body; deduplicate retries by its approval_id.
		w.WriteHeader(http.StatusNoContent)
	})

	body := `{"type":"approval.pending","approval_id":"01JABC"}`
	for _, header := range []string{
		notify.Sign(secret, time.Now(), []byte(body)),
		notify.Sign([]byte("a guess"), time.Now(), []byte(body)),
	} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/approvals", strings.NewReader(body))
		req.Header.Set(notify.SignatureHeader, header)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// 204
	// 401
}

// The gateway enqueues one notification per new pending approval; Close
// sends what is queued before shutdown.
func ExampleNotifier_Notify() {
	secret := []byte("the approvals.notify secret")
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, time.Minute) == nil {
			got <- string(body)
		}
	}))
	defer receiver.Close()

	n, err := notify.New(notify.Config{URL: receiver.URL, Secret: secret, ConsoleBaseURL: "https://gw.example.com"})
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	_ = n.Notify(notify.Pending{
		ApprovalID: "01JABC", Tool: "refund", Tenant: "acme", Session: "s-1", Step: 4, HasStep: true,
		CanonicalArguments: []byte(`{"amount":2000}`), Rule: 1, Reason: "refunds above 1 000 need finance",
		RequestedAt: at, ExpiresAt: at.Add(24 * time.Hour),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.Close(ctx)
	fmt.Println(<-got)
	fmt.Printf("%+v\n", n.Stats())
	// Output:
	// {"type":"approval.pending","approval_id":"01JABC","tool":"refund","tenant":"acme","session":"s-1","step":4,"canonical_arguments":{"amount":2000},"rule":1,"reason":"refunds above 1 000 need finance","requested_at":"2026-12-04T20:00:00Z","expires_at":"2026-12-05T20:00:00Z","console_url":"https://gw.example.com/console/approvals/01JABC"}
	// {Delivered:1 Failed:0 Dropped:0 Retries:0}
}
