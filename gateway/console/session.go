package console

import (
	"github.com/toolgateway/toolgateway/gateway/principal"

	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

// MinSessionKeyBytes is the shortest session key accepted: 32 random
// bytes, the size of the HMAC-SHA-256 it keys.
const MinSessionKeyBytes = 32

// ParseSessionKeys reads session keys as console.session_key_file and
// TOOLGATEWAY_CONSOLE_SESSION_KEY hold them: one key per line, hex or
// base64 (standard or URL alphabet, padded or not) of at least
// [MinSessionKeyBytes] random bytes; blank lines and lines starting with
// "#" are skipped. The first key signs, every key verifies, so a rotation
// adds the new key first and drops the old one later. Errors name the line,
// never the key.
func ParseSessionKeys(text string) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, ok := decodeKey(line)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: not hex or base64 (make a key with `openssl rand -base64 32`)", i+1)
		case len(key) < MinSessionKeyBytes:
			return nil, fmt.Errorf("line %d: %d bytes: want at least %d random bytes (make a key with `openssl rand -base64 32`)", i+1, len(key), MinSessionKeyBytes)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key: want one key per line (make one with `openssl rand -base64 32`)")
	}
	return keys, nil
}

// decodeKey reads one key: hex when it is hex, else base64.
func decodeKey(s string) ([]byte, bool) {
	if b, err := hex.DecodeString(s); err == nil {
		return b, true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// NewSessionKey returns a random session key, for a gateway configured
// with none: its sessions end with the process and no other replica
// accepts them.
func NewSessionKey() []byte {
	key := make([]byte, MinSessionKeyBytes)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it crashes the program instead)
	return key
}

// session is a signed-in operator, as the cookie carries it.
type session struct {
	// ID is random per sign-in; the CSRF token is derived from it.
	ID string `json:"id"`
	// By is the operator's display name: the provider's name for a person,
	// the name typed with the admin token (kept as claimed_by).
	By string `json:"by"`
	// Principal is who decides: oidc:<issuer host>:<sub> for a provider
	// sign-in, token:admin for the admin token (gateway/principal).
	Principal string `json:"p,omitempty"`
	// Claims are the ID token's claims of a person, for decide rules'
	// approvers expressions (signed with the cookie, so not forgeable).
	Claims map[string]any `json:"c,omitempty"`
	// Expires is when the sign-in ends (Unix seconds).
	Expires int64 `json:"exp"`
	// key is the key that verified the cookie (it signs the CSRF token).
	key []byte
}

// principal is who the session decides as; a session cookie from before
// principals existed decides as the admin token, with its name claimed.
func (s *session) principal() principal.Principal {
	if s.Principal == "" || s.Principal == principal.Admin.ID {
		return principal.Admin
	}
	kind, err := principal.KindOf(s.Principal)
	if err != nil {
		return principal.Admin
	}
	return principal.Principal{ID: s.Principal, Name: s.By, Kind: kind, Claims: s.Claims}
}

// claimedBy is the name typed with the admin token, kept beside
// token:admin; "" for a person.
func (s *session) claimedBy() string {
	if s.principal().IsPerson() {
		return ""
	}
	return s.By
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

// maxCookieBytes bounds a session cookie: browsers keep at most about
// 4 KiB of one cookie, so a provider whose claims would not fit is
// refused at sign-in rather than failing silently later.
const maxCookieBytes = 4000

// issue writes the session cookie of who, shown as by.
func (c *Console) issue(w http.ResponseWriter, r *http.Request, by string, who principal.Principal) error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	s := session{ID: hex.EncodeToString(id), By: by, Principal: who.ID, Claims: who.Claims, Expires: c.opts.Now().Add(c.opts.SessionTTL).Unix()}
	payload, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if base64.RawURLEncoding.EncodedLen(len(payload)) > maxCookieBytes-100 {
		return errors.New("console: the provider's claims do not fit in a session cookie")
	}
	keys := c.opts.SessionKeys()
	if len(keys) == 0 {
		return errors.New("console: no session key")
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
	var s session
	key, ok := c.readSigned(r, sessionCookie, &s)
	if !ok || s.ID == "" || s.By == "" || c.opts.Now().Unix() >= s.Expires {
		return nil
	}
	s.key = key
	return &s
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
		ctx := context.WithValue(r.Context(), sessionKeyType{}, s)
		next.ServeHTTP(w, r.WithContext(principal.NewContext(ctx, s.principal())))
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
