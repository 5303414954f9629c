package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/tools"
)

// heldRecheck is how often a server with a held tool reads that tool's pin
// again, so an operator's acceptance on another replica releases it here
// within this long.
const heldRecheck = 2 * time.Second

// pinState is what the last install found of one served tool.
type pinState struct {
	upstreamName string
	// current is the definition the server lists now (Tool, SHA256,
	// Definition).
	current pins.Pin
	verdict pins.Verdict
	fixed   bool
}

func heldCount(states map[string]*pinState) int {
	n := 0
	for _, s := range states {
		if s.verdict.Held {
			n++
		}
	}
	return n
}

// definitionOf is the pin of t as the server lists it now, under the
// gateway's name.
func (u *upstream) definitionOf(t *mcp.Tool) (pins.Pin, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return pins.Pin{}, fmt.Errorf("MCP server %q, tool %q: %w", u.cfg.Name, t.Name, err)
	}
	canonical, err := pins.Canonical(raw)
	if err != nil {
		return pins.Pin{}, fmt.Errorf("MCP server %q, tool %q: %w", u.cfg.Name, t.Name, err)
	}
	return pins.Pin{Tool: u.cfg.Prefix + t.Name, SHA256: pins.Hash(canonical), Definition: canonical}, nil
}

// pinned checks tool, built from t, against its pin: it returns the tool to
// serve (tool itself, or a held stand-in showing the pinned definition)
// and its state; without a pin store, tool and no state. A store that does
// not answer fails the install (the previous tools stay, the listing is
// retried with backoff): a tool is never served unchecked.
func (u *upstream) pinned(ctx context.Context, t *mcp.Tool, tool *Tool) (tools.Tool, *pinState, error) {
	if u.pinStore == nil {
		return tool, nil, nil
	}
	current, err := u.definitionOf(t)
	if err != nil {
		return nil, nil, err
	}
	fixed := u.fixed[t.Name]
	verdict, err := pins.Check(ctx, u.pinStore, current, fixed, time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("MCP server %q, tool %q: pin: %w", u.cfg.Name, t.Name, err)
	}
	if verdict.Recorded {
		u.log.Info("mcp server: tool pinned", "tool", current.Tool, "sha256", current.SHA256, "by", verdict.Pinned.By)
		if u.onPin != nil {
			u.onPin(verdict.Pinned, false)
		}
	}
	state := &pinState{upstreamName: t.Name, current: current, verdict: verdict, fixed: fixed != ""}
	if !verdict.Held {
		return tool, state, nil
	}
	u.log.Warn("mcp server: tool held: its definition differs from its pin; calls answer 409 tool_changed until an operator accepts it",
		"tool", current.Tool, "pinned_sha256", verdict.Pinned.SHA256, "current_sha256", current.SHA256)
	held := &heldTool{up: u, upstreamName: t.Name, pinned: verdict.Pinned.SHA256, current: current.SHA256, spec: tool.spec}
	if len(verdict.Pinned.Definition) > 0 {
		var old mcp.Tool
		if err := json.Unmarshal(verdict.Pinned.Definition, &old); err == nil {
			if spec, err := u.specFrom(&old); err == nil {
				held.spec, held.shown = spec, true
			}
		}
	}
	if !held.shown {
		held.spec.Description = "held: its definition changed and the pinned one was never seen"
		held.spec.InputSchema = nil
	}
	return held, state, nil
}

// recheckHeld reads the pins of the held tools again and installs the last
// listing anew when one of them now matches (accepted elsewhere).
func (u *upstream) recheckHeld(ctx context.Context) {
	u.pinMu.Lock()
	listed, states := u.lastListed, u.pinStates
	u.pinMu.Unlock()
	changed := false
	for _, s := range states {
		if !s.verdict.Held || s.fixed {
			continue
		}
		p, err := u.pinStore.Pin(ctx, s.current.Tool)
		if err == nil && p.SHA256 != s.verdict.Pinned.SHA256 {
			changed = true
		}
	}
	if !changed {
		return
	}
	if err := u.install(ctx, listed); err != nil {
		u.log.Warn("mcp server: re-checking held tools failed", "error", err)
	}
}

// statuses is the pin state of the server's tools.
func (u *upstream) statuses() []pins.Status {
	u.pinMu.Lock()
	defer u.pinMu.Unlock()
	out := make([]pins.Status, 0, len(u.pinStates))
	for name, s := range u.pinStates {
		out = append(out, pins.Status{Tool: name, Server: u.cfg.Name, Pinned: s.verdict.Pinned.SHA256, Current: s.current.SHA256,
			Held: s.verdict.Held, FixedByConfig: s.fixed, PinnedAt: s.verdict.Pinned.At, PinnedBy: s.verdict.Pinned.By})
	}
	return out
}

// UsePins makes the Manager pin its servers' tools in store (call before
// Start): each tool's definition is checked at every listing, and one that
// differs from its pin is held (calls fail with tools.ErrToolChanged). record, when not
// nil, is told of every pin stored: recorded at first sight or from the
// config (accepted false), or an operator's acceptance (true).
func (m *Manager) UsePins(store pins.Store, record func(p pins.Pin, accepted bool)) {
	for _, u := range m.upstreams {
		u.pinStore, u.onPin = store, record
	}
}

var _ pins.Keeper = (*Manager)(nil)

// Statuses implements pins.Keeper: the tools of every listed server.
func (m *Manager) Statuses(context.Context) ([]pins.Status, error) {
	var out []pins.Status
	for _, u := range m.upstreams {
		out = append(out, u.statuses()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

// Accept implements pins.Keeper: it pins tool's current definition (as
// last listed) and installs the server's tools again, so the tool serves
// at once on this gateway (other replicas within heldRecheck).
func (m *Manager) Accept(ctx context.Context, tool, sha256, by string) (pins.Status, error) {
	for _, u := range m.upstreams {
		if u.pinStore == nil {
			continue
		}
		u.pinMu.Lock()
		state, ok := u.pinStates[tool]
		listed := u.lastListed
		u.pinMu.Unlock()
		if !ok {
			continue
		}
		switch {
		case state.fixed:
			return pins.Status{}, pins.ErrFixedByConfig
		case sha256 != "" && sha256 != state.current.SHA256:
			return pins.Status{}, fmt.Errorf("%w: accept asked for %s, the server lists %s", pins.ErrNotCurrent, sha256, state.current.SHA256)
		}
		accepted := state.current
		accepted.At, accepted.By = time.Now(), by
		if state.verdict.Pinned.SHA256 != accepted.SHA256 {
			if err := u.pinStore.SetPin(ctx, accepted); err != nil {
				return pins.Status{}, fmt.Errorf("accept %q: %w", tool, err)
			}
			u.log.Info("mcp server: changed tool accepted", "tool", tool, "sha256", accepted.SHA256, "by", by)
			if u.onPin != nil {
				u.onPin(accepted, true)
			}
		}
		if err := u.install(ctx, listed); err != nil {
			return pins.Status{}, fmt.Errorf("accept %q: install: %w", tool, err)
		}
		for _, s := range u.statuses() {
			if s.Tool == tool {
				return s, nil
			}
		}
		return pins.Status{}, pins.ErrUnknownTool // the server's tools changed meanwhile
	}
	return pins.Status{}, pins.ErrUnknownTool
}

// Change implements pins.Keeper: tool's pinned definition (as the store
// keeps it) beside the one its server listed last.
func (m *Manager) Change(_ context.Context, tool string) (pins.Change, error) {
	for _, u := range m.upstreams {
		u.pinMu.Lock()
		state, ok := u.pinStates[tool]
		u.pinMu.Unlock()
		if !ok {
			continue
		}
		for _, s := range u.statuses() {
			if s.Tool == tool {
				return pins.Change{Status: s, Pinned: state.verdict.Pinned.Definition, Current: state.current.Definition}, nil
			}
		}
	}
	return pins.Change{}, pins.ErrUnknownTool
}

// heldTool answers for a tool whose definition differs from its pin: it is
// found (calls answer tool_changed, not tool_not_found), published with
// its pinned definition when the store kept it (never with the changed
// one), and never runs.
type heldTool struct {
	up              *upstream
	upstreamName    string
	spec            tools.Spec
	pinned, current string
	shown           bool
}

var (
	_ tools.Availability = (*heldTool)(nil)
	_ tools.Unlisted     = (*heldTool)(nil)
	_ tools.Provenance   = (*heldTool)(nil)
)

func (h *heldTool) Spec() tools.Spec { return h.spec }

// Available reports the tool as held.
func (h *heldTool) Available() error {
	return fmt.Errorf("MCP server %q, tool %q: %w (pinned sha256 %s, listed now %s): an operator must accept the new definition",
		h.up.cfg.Name, h.upstreamName, tools.ErrToolChanged, h.pinned, h.current)
}

// Call runs nothing.
func (h *heldTool) Call(context.Context, *tools.Request) (*tools.Response, error) {
	return nil, h.Available()
}

// Unlisted hides a held tool whose pinned definition was never seen.
func (h *heldTool) Unlisted() bool { return !h.shown }

// Provenance names the server and the tool's name there.
func (h *heldTool) Provenance() string {
	return fmt.Sprintf("MCP server %q, tool %q (held: changed since pinned)", h.up.cfg.Name, h.upstreamName)
}
