package redisstore

import (
	"strconv"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The ARGV of each script, as one typed struct per script
// ([redisscript.Args]): each field's lua tag is the name the script gives
// that argument in its header, fields in the header's order, and Argv
// lists the fields in that order. TestScriptHeaders holds every script,
// its struct and Argv equal ([redisscript.CheckHeader]).

// claimArgs are claim.lua's ARGV.
type claimArgs struct {
	Fingerprint string `lua:"fp"`           // packed
	Exec        string `lua:"exec"`         // packed execution id of a new claim
	Owner       string `lua:"owner"`        // packed owner token of a new claim
	LockMS      int64  `lua:"lock_ms"`      // the lease
	ReplayMS    int64  `lua:"replay_ms"`    // how long UNKNOWN (and an expired lease) stay
	LeaseExpiry string `lua:"lease_expiry"` // "rerun", "unknown" or ""
	StepGuard   string `lua:"step_guard"`   // "1" or "0"
	Session     string `lua:"session"`      // packed; "" without a step
	Tool        string `lua:"tool"`         // for the step entry
	Arguments   []byte `lua:"args"`         // canonical arguments, kept while open
	approvalClaimArgs
	StepIndex string `lua:"step_index"` // decimal; "" without a step
	stepArgs
	// HolderOnly is "1" when the claim decides on the record that holds
	// its effect (effects.go, decideByHolder): it consumes no approval
	// and writes no record; "0" otherwise.
	HolderOnly string `lua:"holder_only"`
	// Identity is which identity keyed the call (ClaimRequest.Identity,
	// JSON; "" for the gateway's own), kept by a new record.
	Identity string `lua:"identity"`
}

// Argv lists pointers to the fields (go-redis writes a *string or *int64 as
// its value): a pointer goes into an interface without an allocation, a
// string or a large integer does not, and every call runs this script.
func (a *claimArgs) Argv() []any {
	return []any{&a.Fingerprint, &a.Exec, &a.Owner, &a.LockMS, &a.ReplayMS, &a.LeaseExpiry, &a.StepGuard, &a.Session, &a.Tool, a.Arguments,
		&a.Approval, &a.Rule, &a.Reason, &a.Approver, &a.TimeoutMS, &a.UseMS, &a.Requester, &a.Quorum, &a.Binding, &a.StepIndex, &a.StepHead, &a.Tenant, &a.HolderOnly, &a.Identity}
}

// ownerCheck is the owner check every owner-checked script starts with.
type ownerCheck struct {
	Owner string `lua:"owner"` // packed owner token
	Fence string `lua:"fence"` // fencing token, decimal
}

func ownerOf(lease idempotency.Lease) ownerCheck {
	return ownerCheck{Owner: packID(lease.Owner), Fence: strconv.FormatInt(lease.FencingToken, 10)}
}

// renewArgs are renew.lua's ARGV.
type renewArgs struct {
	ownerCheck
	LockMS int64 `lua:"lock_ms"`
	stepArgs
}

func (a renewArgs) Argv() []any { return []any{a.Owner, a.Fence, a.LockMS, a.StepHead, a.Tenant} }

// completeArgs are complete.lua's ARGV.
type completeArgs struct {
	ownerCheck
	ReplayMS int64  `lua:"replay_ms"`
	Status   int    `lua:"status"`
	Ctype    string `lua:"ctype"` // packed (packCtype)
	Body     []byte `lua:"body"`
	stepArgs
	// OutboxExec and OutboxEntry: the receipt outbox entry (outbox.go),
	// "" with receipts off.
	OutboxExec  string `lua:"outbox_exec"`
	OutboxEntry []byte `lua:"outbox_entry"`
	// KeepArgs is "1" when the record's arguments are kept
	// (Lease.KeepArguments, keptargs.go), "0" otherwise.
	KeepArgs string `lua:"keep_args"`
}

// Argv lists pointers, as claimArgs does: every execution completes.
func (a *completeArgs) Argv() []any {
	return []any{&a.Owner, &a.Fence, &a.ReplayMS, &a.Status, &a.Ctype, a.Body, &a.StepHead, &a.Tenant, &a.OutboxExec, a.OutboxEntry, &a.KeepArgs}
}

// markUnknownArgs are mark_unknown.lua's ARGV.
type markUnknownArgs struct {
	ownerCheck
	ReplayMS int64 `lua:"replay_ms"`
	stepArgs
}

func (a markUnknownArgs) Argv() []any {
	return []any{a.Owner, a.Fence, a.ReplayMS, a.StepHead, a.Tenant}
}

// releaseArgs are release.lua's ARGV.
type releaseArgs struct {
	ownerCheck
	stepArgs
	Split string `lua:"split"` // flag: on Redis Cluster, the caller drops the budget entries (evalRelease)
}

func (a releaseArgs) Argv() []any { return []any{a.Owner, a.Fence, a.StepHead, a.Tenant, a.Split} }

// resolveArgs are resolve.lua's ARGV.
type resolveArgs struct {
	TTLMS  int64  `lua:"ttl_ms"`
	Status int    `lua:"status"`
	Ctype  string `lua:"ctype"` // packed (packCtype)
	Body   []byte `lua:"body"`
	stepArgs
}

func (a resolveArgs) Argv() []any {
	return []any{a.TTLMS, a.Status, a.Ctype, a.Body, a.StepHead, a.Tenant}
}

// pointArgs are point.lua's ARGV.
type pointArgs struct {
	Record string `lua:"record"` // the record's key name
	TTLMS  int64  `lua:"ttl_ms"`
}

func (a pointArgs) Argv() []any { return []any{a.Record, a.TTLMS} }

// layoutArgs are layout.lua's ARGV.
type layoutArgs struct {
	Version int `lua:"version"`
}

func (a layoutArgs) Argv() []any { return []any{a.Version} }

// deleteArgs are delete.lua's ARGV: only what names the step entry (the
// key name is the scope check).
type deleteArgs struct {
	stepArgs
	Split string `lua:"split"` // flag: on Redis Cluster, the caller drops the budget entries (evalRelease)
}

func (a deleteArgs) Argv() []any { return []any{a.StepHead, a.Tenant, a.Split} }

// flag is a boolean as the scripts read it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// effectArgs are effect.lua's ARGV.
type effectArgs struct {
	Holder string `lua:"holder"` // the caller's holder identity (effects.go)
	Take   string `lua:"take"`   // the value it writes: its take of the holder (effectTake)
	Expect string `lua:"expect"` // a stale value to replace, "" none
}

func (a effectArgs) Argv() []any { return []any{a.Holder, a.Take, a.Expect} }

// effectKeepArgs are effect_keep.lua's ARGV: none (the key is all it needs).
type effectKeepArgs struct{}

func (a effectKeepArgs) Argv() []any { return nil }

// effectDropArgs are effect_drop.lua's ARGV.
type effectDropArgs struct {
	// Owner is the packed owner token of the take to remove ("" for a
	// value an earlier build wrote, without one).
	Owner string `lua:"owner"`
	// Record is what the take's identity must start with: the holder's
	// length-prefixed record name.
	Record string `lua:"record"`
}

func (a effectDropArgs) Argv() []any { return []any{a.Owner, a.Record} }
