package keyderive

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
)

// MaxStepIndex is the largest step index: 2^53−1, the largest integer every
// JSON number implementation (and so every agent runtime) represents exactly.
const MaxStepIndex = 1<<53 - 1

// Limits of the other key inputs (contract section 1).
const (
	maxSessionIDLen = 256
	maxToolNameLen  = 64
)

// Key derives the idempotency key of one tool call:
// lowercase_hex(SHA-256(sessionID ":" stepIndex ":" tool ":" JCS(args))).
// args must be an I-JSON object; a valid non-object gives ErrNotObject.
func Key(sessionID string, stepIndex uint64, tool string, args []byte) (string, error) {
	key, _, err := Derive(sessionID, stepIndex, tool, args)
	return key, err
}

// Derive is Key that also returns the canonical bytes of args, which is what a
// client sends as the request body, in one parse. When args is already
// canonical, canonical is args itself (see Canonicalize).
func Derive(sessionID string, stepIndex uint64, tool string, args []byte) (key string, canonical []byte, err error) {
	if err := validateKeyInputs(sessionID, stepIndex, tool); err != nil {
		return "", nil, err
	}
	canonical, err = Canonicalize(args)
	if err != nil {
		return "", nil, err
	}
	// Canonical JSON has no leading whitespace, so the first byte is the kind.
	if canonical[0] != '{' {
		return "", nil, ErrNotObject
	}
	return hashKey(sessionID, stepIndex, tool, canonical), canonical, nil
}

// KeyFromCanonical hashes bytes that are already canonical (for instance the
// second result of Decode). It validates the session id, step index and tool
// name but not canonical itself.
func KeyFromCanonical(sessionID string, stepIndex uint64, tool string, canonical []byte) (string, error) {
	if err := validateKeyInputs(sessionID, stepIndex, tool); err != nil {
		return "", err
	}
	return hashKey(sessionID, stepIndex, tool, canonical), nil
}

// Fingerprint is the lowercase hex SHA-256 of canonical bytes: what the
// gateway stores to recognise a key reused with other arguments.
func Fingerprint(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hexString(&sum)
}

// hexString is hex.EncodeToString for a SHA-256 sum with one allocation
// (the string) instead of two.
func hexString(sum *[sha256.Size]byte) string {
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// ScopedKey is the key an upstream (HTTP or MCP) and an in-process tool's
// backend receive: lowercase_hex(SHA-256(tenant ":" tool ":" key)), scoped
// like the gateway's record. Two tenants that send the same key never share
// an upstream's deduplication, even one that deduplicates on this value
// alone. key is the client's (unquoted) key; tool the gateway's tool name.
func ScopedKey(tenant, tool, key string) string {
	// On the stack unless unusually long: one allocation, the result.
	var buf [384]byte
	input := append(buf[:0], tenant...)
	input = append(input, ':')
	input = append(input, tool...)
	input = append(input, ':')
	input = append(input, key...)
	sum := sha256.Sum256(input)
	return hexString(&sum)
}

func hashKey(sessionID string, stepIndex uint64, tool string, canonical []byte) string {
	// The prefix is at most 256+1+16+1+64+1 bytes. A small call (nearly
	// every one) is hashed from one stack buffer with sha256.Sum256, which
	// allocates nothing; a large one streams the canonical bytes instead
	// of copying them.
	var buf [352 + smallArgs]byte
	prefix := append(buf[:0], sessionID...)
	prefix = append(prefix, ':')
	prefix = strconv.AppendUint(prefix, stepIndex, 10)
	prefix = append(prefix, ':')
	prefix = append(prefix, tool...)
	prefix = append(prefix, ':')
	var sum [sha256.Size]byte
	if len(canonical) <= smallArgs {
		sum = sha256.Sum256(append(prefix, canonical...))
	} else {
		hash := sha256.New()
		hash.Write(prefix)
		hash.Write(canonical)
		hash.Sum(sum[:0])
	}
	return hexString(&sum)
}

// smallArgs is the largest canonical form hashed from the stack.
const smallArgs = 1024

func validateKeyInputs(sessionID string, stepIndex uint64, tool string) error {
	if err := ValidateSessionID(sessionID); err != nil {
		return err
	}
	if err := ValidateStepIndex(stepIndex); err != nil {
		return err
	}
	return ValidateToolName(tool)
}

// ValidateSessionID checks the Agent-Session-Id rules: 1–256 characters, each
// visible ASCII (0x21–0x7E), and no ':' (the key's separator).
func ValidateSessionID(id string) error {
	if len(id) == 0 || len(id) > maxSessionIDLen {
		return fmt.Errorf("%w: length %d, want 1–%d", ErrInvalidSession, len(id), maxSessionIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7E || c == ':' {
			return fmt.Errorf("%w: byte %d is %q", ErrInvalidSession, i, c)
		}
	}
	return nil
}

// ValidateStepIndex checks that step is at most MaxStepIndex.
func ValidateStepIndex(step uint64) error {
	if step > MaxStepIndex {
		return fmt.Errorf("%w: %d is above 2^53-1", ErrInvalidStep, step)
	}
	return nil
}

// ParseStepIndex parses an Agent-Step-Index header value: a decimal integer
// 0 … 2^53−1 without sign or leading zeros.
func ParseStepIndex(s string) (uint64, error) {
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: %.20q", ErrInvalidStep, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %.20q", ErrInvalidStep, s)
		}
	}
	step, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %.20q", ErrInvalidStep, s)
	}
	if err := ValidateStepIndex(step); err != nil {
		return 0, err
	}
	return step, nil
}

// ToolNamePattern is the rule ValidateToolName checks, for messages.
const ToolNamePattern = `^[a-z0-9][a-z0-9_-]{0,63}$`

// ValidateToolName checks ToolNamePattern (by hand: it runs on every key
// derivation, where a regexp would cost more than the rest).
func ValidateToolName(name string) error {
	if len(name) == 0 || len(name) > maxToolNameLen {
		return fmt.Errorf("%w: length %d, want 1–%d", ErrInvalidTool, len(name), maxToolNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		lowerOrDigit := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !lowerOrDigit && (i == 0 || (c != '_' && c != '-')) {
			return fmt.Errorf("%w: byte %d is %q", ErrInvalidTool, i, c)
		}
	}
	return nil
}
