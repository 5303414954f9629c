package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// A tool that its MCP server stops listing, or re-lists read-only, is
// retired (tools.Registry.Retired): the calls it completed while it was
// mutating keep replaying until their records expire, so an agent's retry
// after the change gets the outcome it missed instead of running a
// read-only stand-in or "no such tool". Nothing is claimed for it: the
// store is only read.

// retiredCall answers a call whose tool is retired, when it must be
// answered here: a retry of a completed call (same key, same fingerprint)
// replays the record; any other call to a removed tool answers
// tool_not_found as if the tool never existed, and one to a tool re-listed
// read-only runs read-only as usual (ok false). canonical is the JCS of the
// arguments, or argsErr why they have none (such a call was never
// recorded: a removed tool answers tool_not_found, before invalid_json).
func (s *Engine) retiredCall(ctx context.Context, c *Call, canonical []byte, argsErr error) (Result, bool) {
	name := c.Entry.Spec.Name
	old, retired := s.tools.Retired(name)
	if !retired {
		return Result{}, false
	}
	removed := c.Entry == old
	if !removed && !c.Entry.Spec.ReadOnly {
		return Result{}, false // another mutating tool has the name now
	}
	if argsErr == nil {
		if res, ok := s.replayRetired(ctx, c, canonical); ok {
			return res, true
		}
	}
	if removed {
		return problemResult(NewProblem(wire.CodeToolNotFound, "no tool of that name; its server no longer offers it")), true
	}
	return Result{}, false
}

// replayRetired looks the call's record up and replays it when it is the
// completed outcome of these arguments.
func (s *Engine) replayRetired(ctx context.Context, c *Call, canonical []byte) (Result, bool) {
	if c.IdentityProblem != nil {
		return Result{}, false
	}
	name := c.Entry.Spec.Name
	id := c.Identity
	key := id.Key
	if s.opts.KeyMode == KeyModeDerived {
		if !id.HasStep {
			return Result{}, false
		}
		want, err := keyderive.KeyFromCanonical(id.SessionID, id.StepIndex, name, canonical)
		if err != nil || (key != "" && key != want) {
			return Result{}, false
		}
		key = want
	}
	if key == "" {
		return Result{}, false
	}
	rec, err := s.store.Get(ctx, idempotency.Scope{Tenant: c.Tenant, Tool: name, Key: key})
	if err != nil || rec.State != idempotency.StateCompleted || rec.Response == nil ||
		rec.Fingerprint != keyderive.Fingerprint(canonical) || (!rec.ExpiresAt.IsZero() && !rec.ExpiresAt.After(time.Now())) {
		return Result{}, false
	}
	setKey(ctx, key)
	return Result{Kind: ResultReplayed, Status: rec.Response.Status, ContentType: rec.Response.ContentType, Body: rec.Response.Body,
		ExecutionID: rec.ExecutionID, Replayed: true, Label: labelReplayed}, true
}
