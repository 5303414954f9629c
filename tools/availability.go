package tools

// Availability is implemented by a tool that can be registered before it
// can run: the stand-in for an MCP server's tool while that server's tools
// have not been listed yet (package tools/mcptool). Available returns nil
// when the tool can run, else an error wrapping ErrUpstreamUnavailable.
//
// The gateway asks (through Entry.Available) once a call has passed the
// request checks and before the idempotency store decision, and answers 503
// upstream_unavailable with nothing stored. A tool that implements
// Availability also fails its Call with the same error, so a caller that does
// not ask still runs nothing.
type Availability interface {
	Available() error
}

// Provenance is implemented by tools that come from somewhere a user must be
// told about when their name clashes with another tool's: it returns e.g.
// `MCP server "tickets", tool "create_ticket"`. Tools without it are named
// by their tool name alone.
type Provenance interface {
	Provenance() string
}

// Available reports whether the entry's tool can run now: nil, or an error
// wrapping ErrUpstreamUnavailable (see Availability).
func (e *Entry) Available() error {
	if a, ok := e.Tool.(Availability); ok {
		return a.Available()
	}
	return nil
}

// provenance names where an entry's tool comes from, for clash errors.
func provenance(t Tool, name string) string {
	if p, ok := t.(Provenance); ok {
		return p.Provenance()
	}
	return "tool " + quote(name)
}

func quote(s string) string { return `"` + s + `"` }
