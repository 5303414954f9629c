package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the request header that carries the signature.
const SignatureHeader = "Toolgateway-Signature"

// Errors [Verify] returns; each is wrapped with detail.
var (
	// ErrSignatureMalformed: the header is not `t=<unix seconds>,v1=<hex>`.
	ErrSignatureMalformed = errors.New("notify: signature header malformed")
	// ErrSignatureMismatch: no v1 signature matches the body and secret.
	ErrSignatureMismatch = errors.New("notify: signature does not match")
	// ErrSignatureExpired: the timestamp is outside the tolerance.
	ErrSignatureExpired = errors.New("notify: signature timestamp outside tolerance")
)

// Sign returns the [SignatureHeader] value for body sent at t:
// `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// mac is HMAC-SHA256(secret, ts + "." + body).
func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received notification: header is the
// [SignatureHeader] value and body the exact bytes received. Any one
// matching v1 entry is enough (so a sender may add signatures under other
// secrets while they rotate), and a timestamp more than tolerance away from
// now is refused, so a captured request cannot be replayed later.
func Verify(secret []byte, header string, body []byte, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return fmt.Errorf("%w: %q", ErrSignatureMalformed, part)
		case k == "t":
			ts = v
		case k == "v1":
			sig, err := hex.DecodeString(v)
			if err != nil {
				return fmt.Errorf("%w: v1 is not hex", ErrSignatureMalformed)
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: want t=<unix seconds>,v1=<hex>", ErrSignatureMalformed)
	}
	if age := time.Since(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrSignatureExpired, age.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}
