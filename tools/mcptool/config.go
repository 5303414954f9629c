// Package mcptool fronts existing MCP servers: each configured server (an
// upstream) is listed at start, its tools are served by the gateway as its
// own, and every call is forwarded as an MCP tools/call carrying the call's
// identity in _meta, so the gateway's exactly-once rules (key, lease,
// fencing, replay) apply to servers that know nothing about them.
//
// A Manager owns the upstreams: it connects to them (Streamable HTTP, or a
// stdio process it starts, restarts with backoff and stops), keeps a small
// pool of client sessions per upstream, lists the tools (all pages) and
// re-lists them on notifications/tools/list_changed and periodically,
// replacing the upstream's tools in the tools.Registry while it serves.
//
// The gateway reads every upstream through transports of its own
// (stdio.go, httpbound.go): a message over max_response_bytes fails its
// own call and never the session other calls share, and a call whose
// request was sent when its session died is reported as an uncertain
// outcome (tools.ErrOutcomeUncertain), not as an unreachable upstream. An
// upstream's request for client input (an MCP multi round-trip request) is
// handed back to the gateway's client, never fulfilled here.
//
// Package mcptool imports tools, gateway/pins (a leaf) and the MCP Go SDK,
// never the gateway.
package mcptool

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/tools"
)

// Defaults of a ServerConfig.
const (
	// DefaultRelistInterval is how often an upstream's tools are listed
	// again when it does not announce changes itself.
	DefaultRelistInterval = 5 * time.Minute
	// DefaultHTTPSessions is the size of the session pool of a Streamable
	// HTTP upstream. A session multiplexes concurrent calls, so a few
	// spread the load without one connection per call.
	DefaultHTTPSessions = 4
)

// ServerConfig is one entry of mcp_servers: an MCP server whose tools the
// gateway serves.
type ServerConfig struct {
	// Name identifies the upstream in logs, metrics and errors; it matches
	// the tool-name pattern.
	Name string
	// URL is a Streamable HTTP endpoint (http or https). Exactly one of URL
	// and Command is set.
	URL string
	// Headers are sent on every HTTP request to URL. ${NAME} in a value is
	// replaced by the environment variable NAME (an unset variable is an
	// error), so secrets stay out of the file.
	Headers map[string]string
	// Command is a stdio server: the program and its arguments. The gateway
	// starts it, restarts it with backoff when it exits, and stops it on
	// shutdown; its stderr goes to the gateway's log.
	Command []string
	// Prefix is put in front of every upstream tool name to make the
	// gateway's name; the result must match the tool-name pattern.
	Prefix string
	// Tools is the allow-list of upstream tool names (without the prefix);
	// empty means every tool the server lists.
	Tools []string
	// ReadOnly lists upstream tool names served read-only (no key, no
	// record, run on every call); tools the server marks readOnlyHint are
	// read-only too.
	ReadOnly []string
	// Policy is the policy of every tool of the server, brought in each
	// tool's Spec (zero fields: the gateway's defaults, see
	// [tools.Policy.Resolve]); its Timeout also bounds the call here.
	Policy tools.Policy
	// RecordIsError says whether a result with isError: true is recorded
	// and replayed like any other (true, the default in config) or treated
	// like a 5xx: answered with status 500, not recorded, run again on retry.
	RecordIsError bool
	// RelistInterval is how often the tools are listed again (default
	// DefaultRelistInterval).
	RelistInterval time.Duration
	// Sessions is the number of client sessions kept open to a URL
	// upstream (default DefaultHTTPSessions). A Command upstream is one
	// process with one session, which carries concurrent calls.
	Sessions int
	// MaxResponseBytes caps one message from the server (default
	// DefaultMaxResponseBytes): a result over it fails its call alone with
	// an error wrapping tools.ErrResponseTooLarge, and is discarded as it
	// streams past without ending the session other calls share.
	MaxResponseBytes int64
	// Pins fixes the pin of some tools: upstream tool name →
	// "sha256:<hex>" of the JCS of its definition (package gateway/pins).
	// The other tools are pinned on first use, once Manager.UsePins gave
	// a store.
	Pins map[string]string
}

// headerRef is the ${NAME} form expanded in header values.
var headerRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// reservedHeaders are set by the MCP transport itself; configuring them
// would break the protocol.
var reservedHeaders = map[string]bool{
	"Content-Type":         true,
	"Content-Length":       true,
	"Accept":               true,
	"Mcp-Session-Id":       true,
	"Mcp-Protocol-Version": true,
	"Last-Event-Id":        true,
	"Host":                 true,
}

// check validates c and returns its headers with ${NAME} expanded. Errors
// name the field (the caller prefixes the entry's path).
func (c ServerConfig) check(getenv func(string) string) (http.Header, error) {
	if !tools.ValidName(c.Name) {
		return nil, fmt.Errorf("name: %q must match %s", c.Name, tools.NamePattern)
	}
	switch {
	case c.URL != "" && len(c.Command) > 0:
		return nil, fmt.Errorf("url and command: give one, not both")
	case c.URL == "" && len(c.Command) == 0:
		return nil, fmt.Errorf("url or command: give one")
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("url: %q: want an http(s) URL", c.URL)
		}
	case c.Command[0] == "":
		return nil, fmt.Errorf("command[0]: the program must not be empty")
	}
	if len(c.Headers) > 0 && c.URL == "" {
		return nil, fmt.Errorf("headers: only for a url server (a command server gets its environment)")
	}
	headers := make(http.Header, len(c.Headers))
	for name, value := range c.Headers {
		canonical := http.CanonicalHeaderKey(name)
		if !validHeaderName(name) {
			return nil, fmt.Errorf("headers: %q is not a valid header name", name)
		}
		if reservedHeaders[canonical] {
			return nil, fmt.Errorf("headers.%s: set by the MCP transport, cannot be configured", name)
		}
		var missing string
		expanded := headerRef.ReplaceAllStringFunc(value, func(ref string) string {
			v := getenv(ref[2 : len(ref)-1])
			if v == "" && missing == "" {
				missing = ref
			}
			return v
		})
		if missing != "" {
			return nil, fmt.Errorf("headers.%s: %s is not set in the environment", name, missing)
		}
		if !validHeaderValue(expanded) {
			return nil, fmt.Errorf("headers.%s: the value contains a control character", name)
		}
		headers.Set(canonical, expanded)
	}
	if c.Prefix != "" && !tools.ValidName(c.Prefix) {
		return nil, fmt.Errorf("prefix: %q: must start like a tool name ([a-z0-9]) and use [a-z0-9_-]", c.Prefix)
	}
	for i, name := range c.Tools {
		if name == "" {
			return nil, fmt.Errorf("tools[%d]: empty name", i)
		}
		if !tools.ValidName(c.Prefix + name) {
			return nil, fmt.Errorf("tools[%d]: %q gives the gateway name %q, which does not match %s", i, name, c.Prefix+name, tools.NamePattern)
		}
	}
	for i, name := range c.ReadOnly {
		if name == "" {
			return nil, fmt.Errorf("read_only[%d]: empty name", i)
		}
	}
	for name, fixed := range c.Pins {
		if name == "" {
			return nil, fmt.Errorf("pins: empty tool name")
		}
		if _, err := pins.ParseFixed(fixed); err != nil {
			return nil, fmt.Errorf("pins.%s: %w", name, err)
		}
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, err // names timeout, replay_ttl or lease_expiry
	}
	if c.Sessions < 0 {
		return nil, fmt.Errorf("sessions: %d: must be positive", c.Sessions)
	}
	if c.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("max_response_bytes: %d: must be positive", c.MaxResponseBytes)
	}
	if c.Sessions > 1 && len(c.Command) > 0 {
		return nil, fmt.Errorf("sessions: a command server is one process with one session")
	}
	return headers, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= 0x20 {
			return false
		}
		switch r {
		case '"', '(', ')', ',', '/', ':', ';', '<', '=', '>', '?', '@', '[', '\\', ']', '{', '}':
			return false
		}
	}
	return true
}

// validHeaderValue refuses line breaks and other control characters.
func validHeaderValue(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\t') || r == 0x7f {
			return false
		}
	}
	return true
}
