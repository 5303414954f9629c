package callpath

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// check is the check stage, everything before the store decision: I-JSON,
// identity, derived key, schema, availability, rate. Nothing here writes.
// It ends the call with a refusal (or a retired tool's answer), or passes
// it on: to be claimed, or to run without a record (read-only, or unkeyed
// where allowed).
func (s *Engine) check(ctx context.Context, st *callState) bool {
	c := st.call
	value, canonical, err := parseArguments(c)
	if res, ok := s.retiredCall(ctx, c, canonical, err); ok {
		return st.end(res) // retired.go
	}
	if err != nil {
		return st.refuse(NewProblem(wire.CodeInvalidJSON, invalidJSONDetail(err)))
	}
	if p := s.identify(ctx, st, canonical); p != nil {
		return st.refuse(p)
	}
	if p := validateArguments(c.Entry, value); p != nil {
		return st.refuse(p)
	}
	// An unkeyed call is not asked: a tool not listed yet fails its run
	// with the same upstream_unavailable.
	if st.unprotected != ResultUnkeyed {
		if p := unavailable(c.Entry); p != nil {
			if p.Code == wire.CodeToolChanged {
				// A held tool runs nothing, but a retry of a call it
				// completed before the change replays (the store is only
				// read, as for a retired tool).
				if res, ok := s.replayRetired(ctx, c, canonical); ok {
					return st.end(res)
				}
			}
			return st.refuse(p)
		}
	}
	if p := s.admitRate(ctx, c); p != nil {
		return st.refuse(p)
	}
	st.canonical = canonical // the decide stage's args, for every call
	if st.unprotected == 0 {
		st.fingerprint = keyderive.Fingerprint(canonical)
		st.policy = s.policy(c.Entry)
		st.owner = RequestIDFrom(ctx)
		if st.owner == "" {
			st.owner = newULID()
		}
	}
	return false
}

// parseArguments reads the call's arguments as I-JSON into their canonical
// form (JCS) and the schema's view of them. The value tree is the
// canonical one: the schema judges the very values the key is derived
// from. A tool whose schema accepts any object needs no tree: the
// canonical form's first byte says whether the arguments are an object.
func parseArguments(c *Call) (value arguments, canonical []byte, err error) {
	if c.Entry.AcceptsAnyObject() {
		canonical, err = keyderive.Canonicalize(c.Arguments)
		value.object = err == nil && canonical[0] == '{'
		return value, canonical, err
	}
	tree, canonical, err := keyderive.DecodeCanonical(c.Arguments)
	return treeArguments(tree), canonical, err
}

// identify settles whose call it is: one with no record (a read-only
// tool; an unkeyed call where the adapter allows it), one whose identity
// the adapter found wrong, or one with a key: the host call id's, or in
// derived mode the key derived from session, step, tool and canonical
// arguments (checked against the client's, or filled in when the
// transport let the client leave it out).
func (s *Engine) identify(ctx context.Context, st *callState, canonical []byte) *Problem {
	c := st.call
	switch {
	case c.Entry.Spec.ReadOnly:
		st.unprotected = ResultReadOnly
		return nil
	case c.IdentityProblem != nil && c.AllowUnkeyed && c.NoIdentity:
		st.unprotected = ResultUnkeyed
		return nil
	case c.IdentityProblem != nil:
		return c.IdentityProblem
	}
	id, name := c.Identity, c.Entry.Spec.Name
	if id.FingerprintPrincipal != "" {
		id.Key = fingerprintKey(id.FingerprintPrincipal, name, canonical, id.WindowStart)
	} else if id.HostMeta != "" {
		id.Key = hostCallKey(id.HostMeta, id.HostCallID, name, canonical)
	} else if s.opts.KeyMode == KeyModeDerived {
		want, err := keyderive.KeyFromCanonical(id.SessionID, id.StepIndex, name, canonical)
		if id.Key == "" && err == nil {
			id.Key = want // the transport let the client leave it to us
		}
		if err != nil || want != id.Key {
			setKey(ctx, id.Key)
			return keyMismatch(want, canonical)
		}
	}
	setKey(ctx, id.Key)
	st.id = id
	return nil
}

// keyMismatch is the 422 for a key that is not the one derived from the
// call, with what the client needs to find its own mistake: the key the
// gateway derived and the JCS text it hashed (it can compute both from
// what it sent, so they disclose nothing new).
func keyMismatch(want string, canonical []byte) *Problem {
	p := NewProblem(wire.CodeIdempotencyKeyMismatch,
		"Idempotency-Key must be SHA-256(session:step:tool:JCS(arguments)) in lowercase hex; expected_key is the key derived from canonical_arguments; see docs/keys.md")
	p.ExpectedKey, p.CanonicalArguments = want, string(canonical)
	return p
}

// invalidJSONDetail says whether the body is not JSON at all or JSON that
// is not I-JSON, then the parser's specific reason.
func invalidJSONDetail(err error) string {
	reason := strings.TrimPrefix(err.Error(), "keyderive: ")
	if errors.Is(err, keyderive.ErrSyntax) {
		return "the body is not JSON (send the arguments as one JSON object): " + reason
	}
	return "the body is JSON but not I-JSON (RFC 7493): " + reason
}

// arguments is what the schema step needs of a call's arguments.
type arguments struct {
	object bool // the arguments are one JSON object
	// validate: the schema must judge tree (the canonical value tree);
	// false when it accepts any object and no tree was built.
	validate bool
	tree     any
}

// treeArguments is the schema step's view of a value tree.
func treeArguments(tree any) arguments {
	_, object := tree.(map[string]any)
	return arguments{object: object, validate: true, tree: tree}
}

// validateArguments checks that the arguments are one JSON object valid
// against the tool's schema (the contract's schema step: after the key
// checks, so a non-object body is invalid_arguments only once the identity
// is right).
func validateArguments(entry *tools.Entry, args arguments) *Problem {
	if !args.object {
		p := NewProblem(wire.CodeInvalidArguments, "the arguments must be one JSON object")
		p.Errors = []wire.Violation{{Location: "", Message: "expected a JSON object"}}
		return p
	}
	if !args.validate {
		return nil // the schema accepts any object
	}
	violations := entry.Validate(args.tree)
	if len(violations) == 0 {
		return nil
	}
	p := NewProblem(wire.CodeInvalidArguments, fmt.Sprintf("%d schema violation(s); see errors", len(violations)))
	p.Errors = make([]wire.Violation, len(violations))
	for i, v := range violations {
		p.Errors[i] = wire.Violation{Location: v.Location, Message: v.Message}
	}
	return p
}

// unavailable answers, before anything is stored, 409 tool_changed for a
// held tool (its definition changed since it was pinned: it runs nothing
// until an operator accepts it), 503 upstream_unavailable for a tool whose
// MCP server has not been listed yet (its stand-in entry says so); nil
// when the tool can run.
func unavailable(entry *tools.Entry) *Problem {
	if err := entry.Available(); err != nil {
		if errors.Is(err, tools.ErrToolChanged) {
			return toolChanged()
		}
		return NewProblem(wire.CodeUpstreamUnavailable,
			"the tool's MCP server has not been listed yet; retry").WithRetryAfter(1)
	}
	return nil
}

// toolChanged is the answer of a call to a held tool.
func toolChanged() *Problem {
	return NewProblem(wire.CodeToolChanged,
		"the tool's upstream changed its definition since it was pinned; nothing ran: an operator must review and accept it (POST /admin/v1/tools/{tool}/accept)")
}
