package notify_test

import (
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
