package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Cookie names. The session cookie is signed, not stored: any replica
// whose keys include the signing key accepts it.
const (
	sessionCookie = "tg_console"
	signInCookie  = "tg_console_signin"
	csrfField     = "csrf"
)

// maxFormBytes bounds every form the console reads.
const maxFormBytes = 1 << 20

// SessionKey derives the console's session-signing key from an admin
// token's SHA-256, so every replica configured with the same token signs
// and accepts the same cookies without sharing state, and rotating the
// token (once the previous one is dropped) ends every session.
func SessionKey(adminTokenSHA256 [sha256.Size]byte) []byte {
	mac := hmac.New(sha256.New, adminTokenSHA256[:])
	mac.Write([]byte("toolgateway console session v1"))
	return mac.Sum(nil)
}

// session is a signed-in operator, as the cookie carries it.
type session struct {
	// ID is random per sign-in; the CSRF token is derived from it.
	ID string `json:"id"`
	// By is the operator's name, recorded on every decision.
	By string `json:"by"`
	// Expires is when the sign-in ends (Unix seconds).
	Expires int64 `json:"exp"`
	// key is the key that verified the cookie (it signs the CSRF token).
	key []byte
}

type sessionKeyType struct{}

// sessionFrom returns the request's session (set by requireSession).
func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKeyType{}).(*session)
	return s
}

// csrf is the session's CSRF token: an HMAC of its id, so no server state
// holds it and a forged form from another origin cannot know it.
func (s *session) csrf() string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte("csrf\x00" + s.ID))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func sign(key, payload []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	return mac.Sum(nil)
}

// issue writes the session cookie for by.
func (c *Console) issue(w http.ResponseWriter, r *http.Request, by string) error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	s := session{ID: hex.EncodeToString(id), By: by, Expires: c.opts.Now().Add(c.opts.SessionTTL).Unix()}
	payload, err := json.Marshal(s)
	if err != nil {
		return err
	}
	keys := c.opts.SessionKeys()
	if len(keys) == 0 {
		return errors.New("console: no session key (no admin token configured)")
	}
	value := base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(sign(keys[0], payload))
	c.setCookie(w, r, sessionCookie, value, c.opts.SessionTTL)
	return nil
}

// setCookie writes an HttpOnly, SameSite=Strict cookie scoped to the
// console (Secure on TLS); maxAge < 0 deletes it.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	ck := &http.Cookie{Name: name, Value: value, Path: Base + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.opts.Secure || r.TLS != nil}
	if maxAge < 0 {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(maxAge.Seconds())
	}
	http.SetCookie(w, ck)
}

// readSession verifies the session cookie: a valid signature by one of the
// keys and an expiry in the future; nil otherwise.
func (c *Console) readSession(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	payloadText, macText, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return nil
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(payloadText)
	mac, err2 := base64.RawURLEncoding.DecodeString(macText)
	if err1 != nil || err2 != nil {
		return nil
	}
	for _, key := range c.opts.SessionKeys() {
		if !hmac.Equal(mac, sign(key, payload)) {
			continue
		}
		var s session
		if json.Unmarshal(payload, &s) != nil || s.ID == "" || s.By == "" || c.opts.Now().Unix() >= s.Expires {
			return nil
		}
		s.key = key
		return &s
	}
	return nil
}

// requireSession lets signed-in operators through; others go to sign-in
// and come back to the page they asked for. A POST also needs the
// session's CSRF token (403 otherwise, nothing changes).
func (c *Console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.readSession(r)
		if s == nil {
			back := Base + "/approvals"
			if r.Method == http.MethodGet {
				back = r.URL.RequestURI()
			}
			http.Redirect(w, r, Base+"/signin?next="+url.QueryEscape(back), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil || !sameToken(r.PostForm.Get(csrfField), s.csrf()) {
				http.Error(w, "403 forbidden: the form's CSRF token is missing or wrong; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKeyType{}, s)))
	})
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// safeNext is where to go after sign-in: a console path only (never
// another origin, never a scheme-relative URL).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Base+"/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") || strings.HasPrefix(next, Base+"/signin") {
		return Base + "/approvals"
	}
	return next
}
