package tools

import "errors"

// Availability is implemented by a tool that can be registered before it
// can run: the stand-in for an MCP server's tool while that server's tools
// have not been listed yet (package tools/mcptool). Available returns nil
// when the tool can run, else an error wrapping ErrUpstreamUnavailable.
//
// The gateway asks (through Entry.Available) once a call has passed the
// request checks and before the idempotency store decision, and answers 503
// upstream_unavailable (409 tool_changed) with nothing stored. A tool that implements
// Availability also fails its Call with the same error, so a caller that does
// not ask still runs nothing.
type Availability interface {
	Available() error
}

// Unlisted is implemented by a tool that can be found by name but must not
// be published by discovery while Unlisted returns true: a held tool whose
// pinned definition the gateway never saw (it shows none rather than the
// changed one). A stand-in (ErrUpstreamUnavailable) is never published
// either way; a held tool that does not implement Unlisted is published
// with its Spec (the pinned definition).
type Unlisted interface {
	Unlisted() bool
}

// Provenance is implemented by tools that come from somewhere a user must be
// told about when their name clashes with another tool's: it returns e.g.
// `MCP server "tickets", tool "create_ticket"`. Tools without it are named
// by their tool name alone.
type Provenance interface {
	Provenance() string
}

// Available reports whether the entry's tool can run now: nil, or an error
// wrapping ErrUpstreamUnavailable or ErrToolChanged (see Availability).
func (e *Entry) Available() error {
	if a, ok := e.Tool.(Availability); ok {
		return a.Available()
	}
	return nil
}

// standIn reports whether the entry stands in for a tool not listed yet.
func (e *Entry) standIn() bool {
	return errors.Is(e.Available(), ErrUpstreamUnavailable)
}

// published reports whether discovery shows the entry: a tool that can
// run, or a held one showing its pinned definition.
func (e *Entry) published() bool {
	err := e.Available()
	if err == nil {
		return true
	}
	if !errors.Is(err, ErrToolChanged) {
		return false
	}
	u, ok := e.Tool.(Unlisted)
	return !ok || !u.Unlisted()
}

// provenance names where an entry's tool comes from, for clash errors.
func provenance(t Tool, name string) string {
	if p, ok := t.(Provenance); ok {
		return p.Provenance()
	}
	return "tool " + quote(name)
}

func quote(s string) string { return `"` + s + `"` }
