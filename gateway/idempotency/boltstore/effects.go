package boltstore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// effectKey scopes an effect value by tenant and tool.
func effectKey(scope idempotency.Scope, value string) []byte {
	return joinKey(scope.Tenant, scope.Tool, value)
}

// KeepsEffects reports that Claim honours idempotency.ClaimRequest.Effect.
func (s *Store) KeepsEffects() bool { return true }

var _ idempotency.EffectKeeper = (*Store)(nil)

// effectHeld decides a claim whose effect is held by a live record under
// another key (see idempotency.Store.Claim); held is false when the
// effect is free (never claimed, or its holder is gone), and the claim
// goes on to write its own record. It runs in the claim's transaction,
// so the lookup and the reservation the claim then writes are one step.
func (t *txn) effectHeld(ownKey []byte, req idempotency.ClaimRequest) (idempotency.Decision, bool, error) {
	holderKey := t.effects.Get(effectKey(req.Scope, req.Effect.Value))
	if holderKey == nil || bytes.Equal(holderKey, ownKey) {
		return idempotency.Decision{}, false, nil
	}
	holderKey = clone(holderKey)
	holder, err := t.liveRecord(holderKey)
	if err != nil || holder == nil || holder.Effect != req.Effect.Value {
		return idempotency.Decision{}, false, err // a stale reservation: the claim overwrites it
	}
	if holder.Fingerprint != req.Fingerprint {
		return idempotency.Decision{Outcome: idempotency.OutcomeEffectConflict,
			EffectHolder: &idempotency.EffectHolder{ExecutionID: holder.ExecutionID, State: idempotency.State(holder.State)}}, true, nil
	}
	switch idempotency.State(holder.State) {
	case idempotency.StateAwaitingApproval, idempotency.StateApproved, idempotency.StateDenied:
		// Another call of the same action waits for a human: this one
		// waits too, and never consumes or decides that approval.
		return idempotency.Decision{Outcome: idempotency.OutcomeInProgress, ExecutionID: holder.ExecutionID,
			RetryAfter: time.Second, ByEffect: true}, true, nil
	}
	// The holder's own decision, as its own retry would get it; a
	// takeover of its expired lease runs under the holder's scope and step.
	onHolder := req
	onHolder.Scope = holder.scope()
	onHolder.Step = nil
	if holder.Step != nil {
		step := stepOf(holder.Step)
		onHolder.Step = &step
	}
	d, _, err := t.decideExisting(holderKey, holder, onHolder)
	if err != nil {
		return idempotency.Decision{}, false, fmt.Errorf("effect holder: %w", err)
	}
	d.ByEffect = true
	return d, true, nil
}

// freeEffect drops the effect reservation of the record under key, if the
// reservation still names it.
func (t *txn) freeEffect(key []byte, r *storedRecord) error {
	if r.Effect == "" {
		return nil
	}
	ek := effectKey(r.scope(), r.Effect)
	if !bytes.Equal(t.effects.Get(ek), key) {
		return nil
	}
	if err := t.effects.Delete(ek); err != nil {
		return fmt.Errorf("delete effect reservation: %w", err)
	}
	return nil
}
