package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/notify"
)

var secret = []byte("whsec-test")

// TestSignIsHMACOfTimestampAndBody checks the header against the HMAC
// computed here from its definition.
func TestSignIsHMACOfTimestampAndBody(t *testing.T) {
	body := []byte(`{"type":"approval.pending"}`)
	at := time.Unix(1_800_000_000, 0)
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("1800000000." + string(body)))
	want := "t=1800000000,v1=" + hex.EncodeToString(h.Sum(nil))
	if got := notify.Sign(secret, at, body); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

// TestVerify checks what a receiver accepts and refuses.
func TestVerify(t *testing.T) {
	body := []byte(`{"approval_id":"01J"}`)
	now := time.Now()
	good := notify.Sign(secret, now, body)
	other := notify.Sign([]byte("other"), now, body)
	cases := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		want   error
	}{
		{"valid", secret, good, body, nil},
		{"valid among others", secret, other + ",v1=" + good[len("t=1800000000,v1="):], body, nil},
		{"body changed", secret, good, []byte(`{"approval_id":"01K"}`), notify.ErrSignatureMismatch},
		{"other secret", []byte("other-secret"), good, body, notify.ErrSignatureMismatch},
		{"old", secret, notify.Sign(secret, now.Add(-6*time.Minute), body), body, notify.ErrSignatureExpired},
		{"future", secret, notify.Sign(secret, now.Add(6*time.Minute), body), body, notify.ErrSignatureExpired},
		{"timestamp changed", secret, "t=" + strconv.FormatInt(now.Unix()-1, 10) + good[len("t=1800000000"):], body, notify.ErrSignatureMismatch},
		{"empty", secret, "", body, notify.ErrSignatureMalformed},
		{"no v1", secret, "t=1800000000", body, notify.ErrSignatureMalformed},
		{"no t", secret, "v1=00", body, notify.ErrSignatureMalformed},
		{"v1 not hex", secret, "t=1800000000,v1=zz", body, notify.ErrSignatureMalformed},
		{"no equals", secret, "t=1800000000,v1", body, notify.ErrSignatureMalformed},
	}
	for _, tc := range cases {
		err := notify.Verify(tc.secret, tc.header, tc.body, 5*time.Minute)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
}
