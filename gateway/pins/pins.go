// Package pins keeps what the gateway saw of the tools it fronts but does
// not control: for each MCP upstream tool the SHA-256 of the JCS (RFC 8785)
// of its definition (name, description, inputSchema, outputSchema,
// annotations), so a server that changes a tool after it was reviewed (a
// "rug pull"), or a different server behind the same URL, is noticed. A
// tool whose definition no longer matches its pin is held: it runs nothing
// until an operator accepts the new definition (docs/tools.md, "Pins").
//
// The package holds the pin record, the hash, the store interface every
// idempotency store implements ([Store]) and the verdict ([Check]). It
// imports nothing of the gateway, so the stores, tools/mcptool and the
// gateway can all use it.
package pins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
)

// The ways a pin came to be: [Pin.By] is one of these or the name of the
// operator who accepted the definition.
const (
	// ByFirstUse: recorded the first time the gateway listed the tool
	// (mcp_servers[].pin: first_use, the default).
	ByFirstUse = "first_use"
	// ByConfig: the definition matched the hash the config fixes
	// (mcp_servers[].pins), recorded so a held tool can show it.
	ByConfig = "config"
)

// ModeFirstUse is mcp_servers[].pin's only value, and its default.
const ModeFirstUse = "first_use"

// Members are the members of a tool's definition that its pin covers; any
// other member the server sends (title, icons, _meta) is not pinned.
var Members = []string{"name", "description", "inputSchema", "outputSchema", "annotations"}

// Pin is what the store keeps of one tool.
type Pin struct {
	// Tool is the gateway's name of the tool (prefix included).
	Tool string `json:"tool"`
	// SHA256 is the lowercase hex SHA-256 of Definition.
	SHA256 string `json:"sha256"`
	// Definition is the JCS of the pinned definition (the members of
	// [Members] the server sent), kept so a held tool can be shown as it
	// was reviewed rather than as it changed.
	Definition json.RawMessage `json:"definition,omitempty"`
	// At is when it was pinned; By how ([ByFirstUse], [ByConfig]) or by
	// whom (the operator who accepted it).
	At time.Time `json:"at"`
	By string    `json:"by"`
}

// ErrNotFound: the tool has no pin yet.
var ErrNotFound = errors.New("pins: the tool has no pin")

// Store keeps pins, one per tool name, for every gateway sharing the
// store, across restarts. Every idempotency store implements it (the
// storetest conformance cases RunPins hold them to it).
type Store interface {
	// Pin returns tool's pin, or ErrNotFound.
	Pin(ctx context.Context, tool string) (Pin, error)
	// PinFirst stores p unless p.Tool has a pin already, in one atomic
	// step, and returns the pin the tool has afterwards and whether it is
	// p (so of two gateways that list a tool at once, both agree on the
	// first).
	PinFirst(ctx context.Context, p Pin) (Pin, bool, error)
	// SetPin replaces p.Tool's pin with p (an operator's acceptance).
	SetPin(ctx context.Context, p Pin) error
	// Pins returns every pin, sorted by tool.
	Pins(ctx context.Context) ([]Pin, error)
}

// Canonical returns the JCS of a tool's definition given as the JSON the
// server sent (an MCP Tool object): only the [Members] it has.
func Canonical(toolJSON []byte) ([]byte, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(toolJSON, &all); err != nil {
		return nil, fmt.Errorf("pins: tool definition: %w", err)
	}
	kept := make(map[string]json.RawMessage, len(Members))
	for _, m := range Members {
		if v, ok := all[m]; ok && string(v) != "null" {
			kept[m] = v
		}
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("pins: tool definition: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("pins: tool definition: %w", err)
	}
	return out, nil
}

// Hash is the lowercase hex SHA-256 of a canonical definition.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// ParseFixed reads a pin the config fixes, "sha256:<64 hex digits>", and
// returns the hex in lowercase.
func ParseFixed(s string) (string, error) {
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return "", fmt.Errorf("%q: want \"sha256:<64 hex digits>\"", s)
	}
	if err := ValidHash(hexPart); err != nil {
		return "", fmt.Errorf("%q: %w", s, err)
	}
	return strings.ToLower(hexPart), nil
}

// ValidHash checks a hex SHA-256 (either case).
func ValidHash(h string) error {
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return errors.New("want 64 hex digits (a SHA-256)")
	}
	return nil
}

// Verdict is what [Check] decides about a tool as it is listed now.
type Verdict struct {
	// Held: the definition differs from the pin; the tool runs nothing
	// until an operator accepts it.
	Held bool
	// Pinned is the tool's pin. When Held, its Definition is what may be
	// shown in the tool's place (empty when the store never saw the
	// pinned definition: a config pin the server never matched).
	Pinned Pin
	// Recorded: Check stored a new pin (first use, or a config pin's
	// definition seen for the first time): a tool_pinned receipt.
	Recorded bool
}

// Check decides about current, the tool as the server lists it now (Tool,
// SHA256, Definition; At and By are set here), against its pin: fixed
// (the config's hex, "" for none) or else the store's, which it records on
// first sight.
func Check(ctx context.Context, store Store, current Pin, fixed string, now time.Time) (Verdict, error) {
	current.At = now
	if fixed != "" {
		stored, err := store.Pin(ctx, current.Tool)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Verdict{}, err
		}
		if current.SHA256 == fixed {
			if err == nil && stored.SHA256 == fixed && len(stored.Definition) > 0 {
				return Verdict{Pinned: stored}, nil
			}
			current.By = ByConfig
			if err := store.SetPin(ctx, current); err != nil {
				return Verdict{}, err
			}
			return Verdict{Pinned: current, Recorded: true}, nil
		}
		pinned := Pin{Tool: current.Tool, SHA256: fixed, By: ByConfig}
		if err == nil && stored.SHA256 == fixed {
			pinned = stored
		}
		return Verdict{Held: true, Pinned: pinned}, nil
	}
	// A read first: the steady state (every listing, every recheck of a
	// held tool) writes nothing.
	stored, err := store.Pin(ctx, current.Tool)
	created := false
	switch {
	case errors.Is(err, ErrNotFound):
		current.By = ByFirstUse
		stored, created, err = store.PinFirst(ctx, current)
		if err != nil {
			return Verdict{}, err
		}
	case err != nil:
		return Verdict{}, err
	}
	return Verdict{Held: stored.SHA256 != current.SHA256, Pinned: stored, Recorded: created}, nil
}

// Status is one tool's pin as the admin API shows it (GET
// /admin/v1/tools).
type Status struct {
	// Tool is the gateway's name; Server the mcp_servers entry.
	Tool   string `json:"tool"`
	Server string `json:"server"`
	// Pinned is the pinned hash ("" while the store could not be asked);
	// Current the hash of the definition the server lists now.
	Pinned  string `json:"pinned_sha256"`
	Current string `json:"current_sha256"`
	// Held: Pinned and Current differ; calls answer 409 tool_changed.
	Held bool `json:"held"`
	// FixedByConfig: the pin is mcp_servers[].pins' (accept refuses it).
	FixedByConfig bool `json:"fixed_by_config,omitempty"`
	// PinnedAt and PinnedBy: when and how (first_use, config, or the
	// operator who accepted).
	PinnedAt time.Time `json:"pinned_at,omitzero"`
	PinnedBy string    `json:"pinned_by,omitempty"`
}

// Keeper is what the admin API needs of whoever serves pinned tools
// (tools/mcptool's Manager).
type Keeper interface {
	// Statuses lists the pins of the tools served now, sorted by tool.
	Statuses(ctx context.Context) ([]Status, error)
	// Accept pins tool's current definition, by the operator by; with
	// sha256 set, only if that is the current definition's hash
	// (ErrNotCurrent otherwise). ErrUnknownTool: no such pinned tool;
	// ErrFixedByConfig: the config fixes its pin.
	Accept(ctx context.Context, tool, sha256, by string) (Status, error)
	// Change returns tool's pinned and current definitions side by side,
	// for an operator to review before accepting; ErrUnknownTool when no
	// pinned tool has that name.
	Change(ctx context.Context, tool string) (Change, error)
}

// Change is one tool's pin with both definitions, as an operator reviews
// a held tool (the console's Tools page): Pinned is the JCS of the pinned
// definition (empty when the store never saw it: a config pin the server
// never matched), Current the JCS of what the server lists now.
type Change struct {
	Status
	Pinned  json.RawMessage `json:"pinned_definition,omitempty"`
	Current json.RawMessage `json:"current_definition"`
}

// MemberChange is one member of a definition ([Members]) in both
// versions: the JSON of each, empty where the version has no such member.
type MemberChange struct {
	Member          string
	Pinned, Current json.RawMessage
	Changed         bool
}

// Members compares the two definitions member by member, in [Members]'
// order, leaving out members neither has. A definition that is not a JSON
// object counts as having no members.
func (c Change) Members() []MemberChange {
	var pinned, current map[string]json.RawMessage
	_ = json.Unmarshal(c.Pinned, &pinned)
	_ = json.Unmarshal(c.Current, &current)
	var out []MemberChange
	for _, m := range Members {
		p, inPinned := pinned[m]
		cur, inCurrent := current[m]
		if !inPinned && !inCurrent {
			continue
		}
		// Both come from JCS, so equal members are equal bytes.
		out = append(out, MemberChange{Member: m, Pinned: p, Current: cur, Changed: string(p) != string(cur)})
	}
	return out
}

// Errors of [Keeper.Accept].
var (
	ErrUnknownTool   = errors.New("pins: no MCP upstream tool of that name")
	ErrNotCurrent    = errors.New("pins: the tool's current definition has another hash")
	ErrFixedByConfig = errors.New("pins: the config fixes this tool's pin (mcp_servers[].pins); change it there")
)

// Encode is the stored form of a pin (its JSON), the same in every store.
func Encode(p Pin) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("pins: encode %q: %w", p.Tool, err)
	}
	return b, nil
}

// Decode reads what Encode wrote.
func Decode(b []byte) (Pin, error) {
	var p Pin
	if err := json.Unmarshal(b, &p); err != nil {
		return Pin{}, fmt.Errorf("pins: decode a stored pin: %w", err)
	}
	return p, nil
}

// DecodeAll reads the pins a store holds as Encode wrote them, in tool
// order (what Store.Pins returns).
func DecodeAll(raws []string) ([]Pin, error) {
	out := make([]Pin, 0, len(raws))
	for _, raw := range raws {
		p, err := Decode([]byte(raw))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pin) int { return strings.Compare(a.Tool, b.Tool) })
	return out, nil
}
