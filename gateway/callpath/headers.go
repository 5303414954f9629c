package callpath

import (
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// KeyMode says how the gateway treats the Idempotency-Key header.
type KeyMode string

// Key modes.
const (
	// KeyModeDerived requires the key to be derived from the session, step,
	// tool and arguments, and verifies it.
	KeyModeDerived KeyMode = "derived"
	// KeyModeOpaque accepts any 1–255 visible ASCII key from clients that are
	// not agents.
	KeyModeOpaque KeyMode = "opaque"
)

// Validate accepts the two key modes.
func (m KeyMode) Validate() error {
	if m != KeyModeDerived && m != KeyModeOpaque {
		return fmt.Errorf("key mode %q: want derived or opaque", string(m))
	}
	return nil
}

// requestContentType returns the request's one Content-Type value, or ""
// when it is absent or sent more than once: two media types are ambiguous,
// and the gateway never guesses which one a client meant.
func requestContentType(h http.Header) string {
	v, present, ok := singleHeader(h, "Content-Type")
	if !present || !ok {
		return ""
	}
	return v
}

// singleHeader returns the header's value; present is false when it is absent
// or empty (an empty header counts as missing), ok is false when it was sent
// more than once.
func singleHeader(h http.Header, name string) (value string, present, ok bool) {
	values := h.Values(name)
	nonEmpty := 0
	for _, v := range values {
		if v != "" {
			nonEmpty++
			value = v
		}
	}
	if nonEmpty == 0 {
		return "", false, true
	}
	return value, true, nonEmpty == 1 && len(values) == 1
}

// unquoteKey unwraps an RFC 8941 sf-string ("..." with \" and \\ escapes).
// An unquoted value is returned as it is.
func unquoteKey(v string) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return v, true
	}
	if v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if !strings.ContainsAny(inner, `"\`) {
		return inner, true
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch c {
		case '"':
			return "", false // an unescaped quote ends an sf-string early
		case '\\':
			if i+1 >= len(inner) || (inner[i+1] != '"' && inner[i+1] != '\\') {
				return "", false
			}
			i++
			c = inner[i]
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// validKey checks the unquoted key's format for the mode.
func validKey(key string, mode KeyMode) bool {
	if mode == KeyModeDerived {
		if len(key) != 64 {
			return false
		}
		for i := 0; i < len(key); i++ {
			c := key[i]
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	}
	if len(key) == 0 || len(key) > 255 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// preferWait returns the N of a "Prefer: wait=N" header (RFC 7240), capped
// at maxWait seconds; 0 when absent or malformed.
func preferWait(h http.Header, maxWait int) int {
	for _, line := range h.Values(wire.HeaderPrefer) {
		for _, pref := range strings.Split(line, ",") {
			name, value, found := strings.Cut(strings.TrimSpace(pref), "=")
			if !found || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			value = strings.Trim(strings.TrimSpace(value), `"`)
			if i := strings.IndexByte(value, ';'); i >= 0 {
				value = value[:i]
			}
			// delta-seconds: digits only; a value too large to parse still
			// means "wait as long as allowed".
			n, err := strconv.ParseUint(value, 10, 64)
			switch {
			case errors.Is(err, strconv.ErrRange):
				return maxWait
			case err != nil || n == 0:
				return 0
			}
			return int(min(n, uint64(maxWait)))
		}
	}
	return 0
}

// preferApproval reports whether the Prefer header carries the
// wire.PreferApproval preference: the caller asks that its wait=N also
// waits for a pending approval's decision.
func preferApproval(h http.Header) bool {
	for _, line := range h.Values(wire.HeaderPrefer) {
		for _, pref := range strings.Split(line, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(pref), ";")
			if strings.EqualFold(strings.TrimSpace(name), wire.PreferApproval) {
				return true
			}
		}
	}
	return false
}

// ceilSeconds rounds d up to whole seconds, at least 1.
func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// isJSONContentType accepts application/json with any parameters.
func isJSONContentType(v string) bool {
	switch v {
	case "":
		return false
	case "application/json": // what nearly every client sends; no parse
		return true
	}
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/json"
}

// innermostWriter unwraps middleware writers (those with Unwrap, as
// http.ResponseController does) down to the server's own.
func innermostWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
