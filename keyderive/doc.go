// Package keyderive derives the idempotency key of an agent's tool call, as
// the gateway contract (section 1, "Key derivation") defines it:
//
//	key = lowercase_hex( SHA-256( session_id ":" step_index ":" tool ":" JCS(arguments) ) )
//
// JCS is the JSON Canonicalization Scheme of RFC 8785: members sorted by their
// names' UTF-16 code units, no insignificant whitespace, numbers written the way
// ECMAScript writes IEEE-754 doubles, strings with the minimal set of escapes.
// Two agents that mean the same call therefore send the same key, whatever
// their JSON encoder does with member order, whitespace or number spelling.
//
// Input must be I-JSON (RFC 7493): valid UTF-8, no duplicate member names, no
// lone surrogates in \u escapes, numbers that fit an IEEE-754 double, nesting
// no deeper than MaxDepth. Every rejection wraps ErrInvalidJSON and one of the
// more specific errors (ErrSyntax, ErrDuplicateName, ...), so callers can tell
// them apart with errors.Is.
//
// The agent runtime chooses session_id and step_index; docs/keys.md explains
// how, and testdata/vectors.json holds vectors that an SDK in any other
// language must reproduce byte for byte.
package keyderive
