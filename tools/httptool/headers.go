package httptool

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/toolgateway/toolgateway/wire"
)

// reserved are the headers the gateway sets itself on every call (or the
// transport owns); letting config replace them would let it spoof the key or
// the fencing token the upstream relies on.
var reserved = map[string]bool{
	"Content-Type":            true,
	"Content-Length":          true,
	"Transfer-Encoding":       true,
	"Connection":              true,
	wire.HeaderIdempotencyKey: true,
	wire.HeaderSessionID:      true,
	wire.HeaderStepIndex:      true,
	wire.HeaderFencingToken:   true,
	wire.HeaderExecutionID:    true,
	wire.HeaderTenant:         true,
}

// staticHeaders checks the configured headers once, so a typo fails at
// start-up rather than on every call, and splits out Host, which net/http
// takes from Request.Host.
func staticHeaders(configured map[string]string) (http.Header, string, error) {
	headers := make(http.Header, len(configured))
	host := ""
	for name, value := range configured {
		if !isToken(name) {
			return nil, "", fmt.Errorf("%q is not a valid header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, "", fmt.Errorf("header %q: value contains a line break or NUL", name)
		}
		canonical := http.CanonicalHeaderKey(name)
		if reserved[canonical] {
			return nil, "", fmt.Errorf("header %q is set by the gateway and cannot be configured", canonical)
		}
		if canonical == "Host" {
			host = value
			continue
		}
		headers.Set(canonical, value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", "toolgateway")
	}
	return headers, host, nil
}

// isToken reports whether s is an RFC 9110 token, the syntax of a header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= 0x20 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}
