package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

var _ idempotency.Reconciler = (*Store)(nil)

// The reconcile scripts (reconcile_*.lua).
var (
	reconcileClaimScript    = redisscript.MustLoad(luaFiles, "reconcile_claim")
	reconcileAttemptScript  = redisscript.MustLoad(luaFiles, "reconcile_attempt")
	reconcileCompleteScript = redisscript.MustLoad(luaFiles, "reconcile_complete")
	reconcileDropScript     = redisscript.MustLoad(luaFiles, "reconcile_drop")
)

// reconcileKey is the key of a record's reconciliation: the record's name
// with its kind letter R turned Q, so it shares the record's hash tag
// (and slot) and no record SCAN sees it.
func (k keyLayout) reconcileKey(recordKey string) string {
	return k.prefix + "Q" + strings.TrimPrefix(recordKey, k.prefix+"R")
}

// storedReconciliation is the JSON of a reconciliation key (see
// reconcile_claim.lua). Times are Unix milliseconds.
type storedReconciliation struct {
	Fence      string `json:"f"`
	Owner      string `json:"o"`
	LeaseUntil int64  `json:"l"`
	Count      int    `json:"n"`
	// Attempts is a JSON array, or {} (how cjson writes an empty table).
	Attempts   json.RawMessage `json:"a"`
	ResolvedBy string          `json:"rb"`
}

type storedAttempt struct {
	At      int64  `json:"t"`
	Outcome string `json:"o"`
	Detail  string `json:"d"`
}

// applyReconciliation sets rec's reconciliation from raw, when raw
// belongs to rec's claim (its fencing token).
func applyReconciliation(rec *idempotency.Record, raw string) error {
	var st storedReconciliation
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return fmt.Errorf("%w: reconciliation: %v", errBadReply, err)
	}
	if st.Fence != strconv.FormatInt(rec.FencingToken, 10) {
		return nil // a former claim's
	}
	out := &idempotency.Reconciliation{Owner: st.Owner, Count: st.Count}
	if st.LeaseUntil != 0 {
		out.LeaseUntil = time.UnixMilli(st.LeaseUntil)
	}
	var attempts []storedAttempt
	if len(st.Attempts) > 0 && st.Attempts[0] == '[' {
		if err := json.Unmarshal(st.Attempts, &attempts); err != nil {
			return fmt.Errorf("%w: reconciliation attempts: %v", errBadReply, err)
		}
	}
	for _, a := range attempts {
		out.Attempts = append(out.Attempts, idempotency.ReconcileAttempt{At: time.UnixMilli(a.At), Outcome: a.Outcome, Detail: a.Detail})
	}
	rec.Reconciliation = out
	rec.ResolvedBy = st.ResolvedBy
	return nil
}

// target finds the record key reconcile operations work on: the one Get
// returns.
func (s *Store) target(ctx context.Context, op string, scope idempotency.Scope) (string, error) {
	if err := s.ready(ctx); err != nil {
		return "", fmt.Errorf("redisstore: %s %v: %w", op, scope, err)
	}
	found, err := s.find(ctx, scope)
	if err != nil {
		return "", fmt.Errorf("redisstore: %s %v: %w", op, scope, err)
	}
	if len(found) == 0 {
		return "", fmt.Errorf("redisstore: %s %v: %w", op, scope, idempotency.ErrNotFound)
	}
	return newest(found).key, nil
}

// ClaimReconcile takes the record's reconcile lease (reconcile_claim.lua).
func (s *Store) ClaimReconcile(ctx context.Context, scope idempotency.Scope, owner string, ttl time.Duration) (idempotency.Record, error) {
	if owner == "" || ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: claim reconcile %v: owner and a positive ttl are required", scope)
	}
	key, err := s.target(ctx, "claim reconcile", scope)
	if err != nil {
		return idempotency.Record{}, err
	}
	cmds, err := s.eval(ctx, call(reconcileClaimScript, []string{key, s.keys.reconcileKey(key)}, reconcileClaimArgs{Owner: owner, TTLMS: millis(ttl), stepArgs: s.keys.stepArgs(scope.Tenant)}))
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: claim reconcile %v: %w", scope, err)
	}
	reply, err := cmds[0].StringSlice()
	if err != nil || len(reply) == 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: claim reconcile %v: %w", scope, errors.Join(errBadReply, err))
	}
	switch reply[0] {
	case "held":
		return idempotency.Record{}, idempotency.ErrReconcileHeld
	case "not_resolvable":
		return idempotency.Record{}, idempotency.ErrNotResolvable
	case "not_found":
		return idempotency.Record{}, idempotency.ErrNotFound
	case "ok":
		if len(reply) == 3 {
			rec, err := s.recordWith(ctx, "claim reconcile", scope, key, reply[1], reply[2])
			if err != nil {
				return idempotency.Record{}, err
			}
			// An abandoned record just turned UNKNOWN for its replay TTL:
			// its pointer lives as long.
			if err := s.keepPointer(ctx, scope, key, millis(time.Until(rec.ExpiresAt)+time.Second)); err != nil {
				return idempotency.Record{}, fmt.Errorf("redisstore: claim reconcile %v: %w", scope, err)
			}
			return rec, nil
		}
	}
	return idempotency.Record{}, fmt.Errorf("redisstore: claim reconcile %v: %w", scope, errBadReply)
}

// recordWith decodes a record value and its reconciliation as a script
// returned them.
func (s *Store) recordWith(ctx context.Context, op string, scope idempotency.Scope, key, value, reconciliation string) (idempotency.Record, error) {
	expiry, err := s.client.PExpireTime(ctx, key).Result()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: %s %v: %w", op, scope, err)
	}
	rec, err := recordOf(scope, value, expiresAt(expiry))
	if err == nil {
		err = applyReconciliation(&rec, reconciliation)
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: %s %v: %w", op, scope, err)
	}
	return rec, nil
}

// RecordReconcileAttempt appends attempt (reconcile_attempt.lua).
func (s *Store) RecordReconcileAttempt(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64, attempt idempotency.ReconcileAttempt) (idempotency.Record, error) {
	key, err := s.target(ctx, "record reconcile attempt", scope)
	if err != nil {
		return idempotency.Record{}, leaseLostIfMissing(err)
	}
	cmds, err := s.eval(ctx, call(reconcileAttemptScript, []string{key, s.keys.reconcileKey(key)}, reconcileAttemptArgs{
		Owner: owner, Fence: strconv.FormatInt(fencingToken, 10), AtMS: attempt.At.UnixMilli(),
		Outcome: attempt.Outcome, Detail: attempt.Detail, Keep: idempotency.MaxReconcileAttemptsKept}))
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: record reconcile attempt %v: %w", scope, err)
	}
	if n, err := cmds[0].Int(); err == nil && n == 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: record reconcile attempt %v: %w", scope, idempotency.ErrLeaseLost)
	}
	state, err := cmds[0].Text()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: record reconcile attempt %v: %w", scope, errors.Join(errBadReply, err))
	}
	rec := idempotency.Record{Scope: scope, FencingToken: fencingToken, State: idempotency.StateUnknown}
	if err := applyReconciliation(&rec, state); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: record reconcile attempt %v: %w", scope, err)
	}
	return rec, nil
}

// CompleteReconciled completes the record with resp (reconcile_complete.lua).
func (s *Store) CompleteReconciled(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64, resp idempotency.StoredResponse, ttl time.Duration) (idempotency.Record, error) {
	if ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: complete reconciled %v: ttl %v must be positive", scope, ttl)
	}
	if err := checkResponse(resp); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: complete reconciled %v: %w", scope, err)
	}
	key, err := s.target(ctx, "complete reconciled", scope)
	if err != nil {
		return idempotency.Record{}, leaseLostIfMissing(err)
	}
	if err := s.keepPointer(ctx, scope, key, millis(ttl)); err != nil { // as Resolve does
		return idempotency.Record{}, fmt.Errorf("redisstore: complete reconciled %v: %w", scope, err)
	}
	cmds, err := s.eval(ctx, call(reconcileCompleteScript, []string{key, s.keys.reconcileKey(key)}, reconcileCompleteArgs{
		Owner: owner, Fence: strconv.FormatInt(fencingToken, 10), TTLMS: millis(ttl),
		Status: resp.Status, Ctype: packCtype(resp.ContentType), Body: resp.Body, stepArgs: s.keys.stepArgs(scope.Tenant)}))
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: complete reconciled %v: %w", scope, err)
	}
	if n, err := cmds[0].Int(); err == nil && n == 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: complete reconciled %v: %w", scope, idempotency.ErrLeaseLost)
	}
	reply, err := cmds[0].StringSlice()
	if err != nil || len(reply) != 2 {
		return idempotency.Record{}, fmt.Errorf("redisstore: complete reconciled %v: %w", scope, errors.Join(errBadReply, err))
	}
	return s.recordWith(ctx, "complete reconciled", scope, key, reply[0], reply[1])
}

// DropReconciled deletes the record (reconcile_drop.lua).
func (s *Store) DropReconciled(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64) error {
	key, err := s.target(ctx, "drop reconciled", scope)
	if err != nil {
		return leaseLostIfMissing(err)
	}
	ok, err := s.evalRelease(ctx, call(reconcileDropScript, []string{key, s.keys.reconcileKey(key), s.keys.charged(key)},
		reconcileDropArgs{Owner: owner, Fence: strconv.FormatInt(fencingToken, 10), stepArgs: s.keys.stepArgs(scope.Tenant), Split: flag(s.keys.sessionSlots)}))
	if err != nil {
		return fmt.Errorf("redisstore: drop reconciled %v: %w", scope, err)
	}
	if ok == 0 {
		return fmt.Errorf("redisstore: drop reconciled %v: %w", scope, idempotency.ErrLeaseLost)
	}
	return nil
}

// leaseLostIfMissing: a record gone before a reconcile write is a lost
// lease (an operator deleted it), as the stores' contract says.
func leaseLostIfMissing(err error) error {
	if errors.Is(err, idempotency.ErrNotFound) {
		return fmt.Errorf("%w (%w)", idempotency.ErrLeaseLost, err)
	}
	return err
}

// reconcileClaimArgs are reconcile_claim.lua's ARGV.
type reconcileClaimArgs struct {
	Owner string `lua:"owner"`
	TTLMS int64  `lua:"ttl_ms"`
	stepArgs
}

func (a reconcileClaimArgs) Argv() []any { return []any{a.Owner, a.TTLMS, a.StepHead, a.Tenant} }

// reconcileAttemptArgs are reconcile_attempt.lua's ARGV.
type reconcileAttemptArgs struct {
	Owner   string `lua:"owner"`
	Fence   string `lua:"fence"`
	AtMS    int64  `lua:"at_ms"`
	Outcome string `lua:"outcome"`
	Detail  string `lua:"detail"`
	Keep    int    `lua:"keep"`
}

func (a reconcileAttemptArgs) Argv() []any {
	return []any{a.Owner, a.Fence, a.AtMS, a.Outcome, a.Detail, a.Keep}
}

// reconcileCompleteArgs are reconcile_complete.lua's ARGV.
type reconcileCompleteArgs struct {
	Owner  string `lua:"owner"`
	Fence  string `lua:"fence"`
	TTLMS  int64  `lua:"ttl_ms"`
	Status int    `lua:"status"`
	Ctype  string `lua:"ctype"` // packed (packCtype)
	Body   []byte `lua:"body"`
	stepArgs
}

func (a reconcileCompleteArgs) Argv() []any {
	return []any{a.Owner, a.Fence, a.TTLMS, a.Status, a.Ctype, a.Body, a.StepHead, a.Tenant}
}

// reconcileDropArgs are reconcile_drop.lua's ARGV.
type reconcileDropArgs struct {
	Owner string `lua:"owner"`
	Fence string `lua:"fence"`
	stepArgs
	Split string `lua:"split"` // flag: on Redis Cluster, the caller drops the budget entries (evalRelease)
}

func (a reconcileDropArgs) Argv() []any {
	return []any{a.Owner, a.Fence, a.StepHead, a.Tenant, a.Split}
}
