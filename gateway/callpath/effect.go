package callpath

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// effect is the effect stage: for a tool with an effect key, the key's
// value on the call's canonical arguments, which the claim then holds in
// the store (one execution per value, whatever the idempotency key,
// session or step; docs/idempotency.md, "Effect keys"). A pointer the
// arguments lack ends the call with invalid_arguments naming it.
func (s *Engine) effect(_ context.Context, st *callState) bool {
	if st.unprotected != 0 || st.policy.EffectKey == "" {
		return false
	}
	tmpl := s.settings.Load().effectKeys[st.policy.EffectKey]
	if tmpl == nil { // a policy a tool brought at run time (an MCP server's)
		var err error
		if tmpl, err = CompileEffectKey(st.policy.EffectKey); err != nil {
			return st.end(problemResult(NewProblem(wire.CodeToolFailed, "the tool's effect_key is malformed: "+err.Error())))
		}
	}
	// The store as configured: s.store is its instrumented wrapper.
	if k, ok := s.opts.Store.(idempotency.EffectKeeper); !ok || !k.KeepsEffects() {
		return st.end(storeUnavailable("this idempotency store does not keep effect keys; the tool was not run"))
	}
	value, missing, err := tmpl.Value(st.canonical)
	switch {
	case missing != "":
		return st.refuse(NewProblem(wire.CodeInvalidArguments, "the arguments have no member at "+missing+", which the tool's effect_key names"))
	case err != nil:
		return st.refuse(NewProblem(wire.CodeInvalidArguments, "the effect_key cannot be read from the arguments: "+err.Error()))
	}
	st.effect = &idempotency.Effect{Value: value}
	return false
}

// effectConflict is the refusal of a call whose effect key value another
// call holds with other arguments; holder names that call.
func effectConflict(holder *idempotency.EffectHolder) *Problem {
	p := NewProblem(wire.CodeEffectConflict, "another call already holds this effect key value with other arguments; it was not run again")
	if holder != nil {
		p.ExecutionID, p.State = holder.ExecutionID, string(holder.State)
	}
	return p
}

// EffectKey is a compiled effect_key template: literal text with RFC 6901
// JSON Pointers in braces, e.g. "refund:{/txn_id}".
type EffectKey struct {
	// parts alternate literal text and pointers: parts[i] is a pointer
	// when i is odd.
	parts []string
	// tokens are the pointers' reference tokens, unescaped, by pointer.
	tokens [][]string
}

// CompileEffectKey parses an effect_key template. It refuses unbalanced
// or nested braces, a pointer that does not start with '/', a '~' not
// followed by 0 or 1, and a template that names no pointer (every call
// would be the same effect).
func CompileEffectKey(template string) (*EffectKey, error) {
	k := &EffectKey{}
	rest := template
	for {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			k.parts = append(k.parts, rest)
			break
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("%q: '}' at byte %d closes no '{'", template, len(template)-len(rest)+open)
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return nil, fmt.Errorf("%q: '{' at byte %d is not closed before the next '{' or the end", template, len(template)-len(rest)+open)
		}
		pointer := rest[open+1 : open+1+end]
		tokens, err := parsePointer(pointer)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", template, err)
		}
		k.parts = append(k.parts, rest[:open], pointer)
		k.tokens = append(k.tokens, tokens)
		rest = rest[open+2+end:]
	}
	if len(k.tokens) == 0 {
		return nil, fmt.Errorf("%q names no argument: write a pointer in braces, e.g. \"refund:{/txn_id}\"", template)
	}
	return k, nil
}

// parsePointer splits an RFC 6901 pointer into unescaped reference
// tokens. The empty pointer (the whole arguments) is refused: an effect
// names a member.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("pointer %q must start with '/' (RFC 6901)", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("pointer %q: '~' must be followed by 0 or 1 (RFC 6901)", p)
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// Pointers returns the template's pointers as written, in order.
func (k *EffectKey) Pointers() []string {
	var out []string
	for i := 1; i < len(k.parts); i += 2 {
		out = append(out, k.parts[i])
	}
	return out
}

// Tokens returns the unescaped reference tokens of the template's i-th
// pointer.
func (k *EffectKey) Tokens(i int) []string { return k.tokens[i] }

// Value evaluates the template on canonical (JCS) arguments: a string
// member as it is, any other value as its canonical JSON text. missing is
// the first pointer the arguments lack ("" when all are there).
func (k *EffectKey) Value(canonical []byte) (value, missing string, err error) {
	var b strings.Builder
	for i, part := range k.parts {
		if i%2 == 0 {
			b.WriteString(part)
			continue
		}
		raw, found, err := lookup(canonical, k.tokens[i/2])
		if err != nil {
			return "", "", err
		}
		if !found {
			return "", part, nil
		}
		if raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", "", fmt.Errorf("member at %s: %w", part, err)
			}
			b.WriteString(s)
			continue
		}
		b.Write(raw) // canonical text: the arguments are JCS
	}
	return b.String(), "", nil
}

// lookup follows tokens into the canonical JSON doc and returns the raw
// (canonical) text of the value found.
func lookup(doc []byte, tokens []string) (json.RawMessage, bool, error) {
	cur := json.RawMessage(doc)
	for _, t := range tokens {
		switch {
		case len(cur) > 0 && cur[0] == '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(cur, &obj); err != nil {
				return nil, false, err
			}
			next, ok := obj[t]
			if !ok {
				return nil, false, nil
			}
			cur = next
		case len(cur) > 0 && cur[0] == '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(cur, &arr); err != nil {
				return nil, false, err
			}
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(arr) || (len(t) > 1 && t[0] == '0') {
				return nil, false, nil
			}
			cur = arr[i]
		default:
			return nil, false, nil // a scalar has no members
		}
	}
	return bytes.TrimSpace(cur), true, nil
}
