package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// errConsoleUnsupported: the store lacks the side the console needs
// (every store of this module has it; a plugin store may not).
var errConsoleUnsupported = errors.New("gateway: the idempotency store cannot list or decide approvals")

// consoleBackend is the console's view of this gateway: its store, its
// resolve validation (the admin API's) and its counters.
type consoleBackend struct{ s *Server }

var (
	_ console.Backend        = consoleBackend{}
	_ console.BudgetsBackend = consoleBackend{}
)

func (b consoleBackend) approvals() (idempotency.Approvals, error) {
	a, ok := b.s.opts.Store.(idempotency.Approvals)
	if !ok {
		return nil, errConsoleUnsupported
	}
	return a, nil
}

func (b consoleBackend) admin() (idempotency.Admin, error) {
	if b.s.AdminStore() == nil {
		return nil, errConsoleUnsupported
	}
	return b.s.AdminStore(), nil
}

// ListApprovals lists one page of approvals.
func (b consoleBackend) ListApprovals(ctx context.Context, f idempotency.ApprovalFilter) (idempotency.Page, error) {
	a, err := b.approvals()
	if err != nil {
		return idempotency.Page{}, err
	}
	return a.ListApprovals(ctx, f)
}

// GetApproval reads one approval with its arguments.
func (b consoleBackend) GetApproval(ctx context.Context, id string) (idempotency.Record, error) {
	a, err := b.approvals()
	if err != nil {
		return idempotency.Record{}, err
	}
	return a.GetApproval(ctx, id)
}

// DecideApproval approves or denies one approval as the signed-in
// principal (the engine checks the rules' approvers and receipts it).
func (b consoleBackend) DecideApproval(ctx context.Context, id string, d idempotency.ApprovalDecision) (idempotency.Record, error) {
	rec, err := b.s.DecideApproval(ctx, id, callpath.ApprovalDecision{
		Approve: d.Approve, Decider: principal.FromContext(ctx), ClaimedBy: d.ClaimedBy, Note: d.Note,
	})
	var refused *callpath.DecisionRefused
	if errors.As(err, &refused) {
		return rec, &console.RefusedError{Status: refused.Problem.Status, Message: refused.Problem.Detail}
	}
	return rec, err
}

// ListRecords lists one page of records.
func (b consoleBackend) ListRecords(ctx context.Context, f idempotency.ListFilter) (idempotency.Page, error) {
	a, err := b.admin()
	if err != nil {
		return idempotency.Page{}, err
	}
	return a.List(ctx, f)
}

// findRecordPages bounds the scan FindRecord makes of a tool's records:
// the stores index records by their key, not by its hash, so a deep link
// reads at most this many pages of MaxListLimit.
const findRecordPages = 20

// FindRecord reads the record of tool whose key hashes to keyHash: a
// bounded scan of the tool's records for the hash, then the record itself
// under its scope (with its response and arguments).
func (b consoleBackend) FindRecord(ctx context.Context, tool, keyHash string) (idempotency.Record, error) {
	a, err := b.admin()
	if err != nil {
		return idempotency.Record{}, err
	}
	f := idempotency.ListFilter{Tool: tool, Limit: idempotency.MaxListLimit}
	for range findRecordPages {
		page, err := a.List(ctx, f)
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("gateway: find record: %w", err)
		}
		for _, rec := range page.Records {
			if receipts.KeyHash(rec.Scope.Key) == keyHash {
				return b.s.opts.Store.Get(ctx, rec.Scope)
			}
		}
		if page.Cursor == "" {
			break
		}
		f.Cursor = page.Cursor
	}
	return idempotency.Record{}, idempotency.ErrNotFound
}

// FindExecution reads the record of an execution id.
func (b consoleBackend) FindExecution(ctx context.Context, id string) (idempotency.Record, error) {
	a, err := b.admin()
	if err != nil {
		return idempotency.Record{}, err
	}
	return a.FindExecution(ctx, id)
}

// Resolve validates res as the admin API's resolve body and completes the
// record with it for the tool's replay TTL. The form's body is the JSON
// value itself for a JSON content type (so it must be valid JSON) and the
// text otherwise, as "body" is in the admin API.
func (b consoleBackend) Resolve(ctx context.Context, scope idempotency.Scope, res console.Resolution) (idempotency.Record, error) {
	a, err := b.admin()
	if err != nil {
		return idempotency.Record{}, err
	}
	in := resolveRequest{Status: &res.Status, ContentType: res.ContentType}
	switch {
	case res.Body == "":
	case isJSONMediaType(res.ContentType) || res.ContentType == "":
		if !json.Valid([]byte(res.Body)) {
			return idempotency.Record{}, fmt.Errorf("%w: the body is not valid JSON (the content type is JSON)", console.ErrInvalidResolution)
		}
		in.Body = json.RawMessage(res.Body)
	default:
		text, _ := json.Marshal(res.Body)
		in.Body = text
	}
	resp, err := in.storedResponse()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("%w: %s", console.ErrInvalidResolution, err.Error())
	}
	rec, err := b.s.Settle(ctx, scope, receipts.EventResolved, res.By, "", func() (idempotency.Record, error) {
		return a.Resolve(ctx, scope, resp, b.s.PolicyOf(scope.Tool).ReplayTTL)
	})
	if err == nil {
		b.s.Logger().InfoContext(ctx, "console resolved a record", "tenant", scope.Tenant, "tool", scope.Tool,
			"key_prefix", idempotency.KeyPrefix(scope.Key), "execution_id", rec.ExecutionID, "status", resp.Status)
	}
	return rec, err
}

// Delete removes a record (resolved as not executed).
func (b consoleBackend) Delete(ctx context.Context, rec idempotency.Record, by string) error {
	scope := rec.Scope
	_, err := b.s.Settle(ctx, scope, receipts.EventDeleted, by, "", func() (idempotency.Record, error) {
		return rec, b.s.Store().Delete(ctx, scope)
	})
	if err == nil {
		b.s.Logger().InfoContext(ctx, "console deleted a record", "tenant", scope.Tenant, "tool", scope.Tool, "key_prefix", idempotency.KeyPrefix(scope.Key))
	}
	return err
}

// Receipts answers one page of a tenant's receipts.
func (b consoleBackend) Receipts(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	if b.s.ReceiptStore() == nil {
		return nil, 0, console.ErrReceiptsOff
	}
	return b.s.ReceiptStore().List(ctx, f)
}

// ReceiptChains verifies each tenant's chain, a bounded run further on
// each call (receiptchains.go), and answers their states.
func (b consoleBackend) ReceiptChains(ctx context.Context) ([]console.ChainState, error) {
	if b.s.ReceiptStore() == nil {
		return nil, console.ErrReceiptsOff
	}
	return b.s.chains.states(ctx, b.s.ReceiptStore(), b.s.opts.ReceiptKeys)
}

// Tools reports every configured tool's resolved policy and its counters,
// and each MCP upstream tool's pin.
func (b consoleBackend) Tools(ctx context.Context) ([]console.ToolStats, error) {
	counters, err := b.s.ToolCounters()
	if err != nil {
		return nil, err
	}
	pinOf := map[string]*pins.Status{}
	if b.s.opts.Pins != nil {
		statuses, err := b.s.opts.Pins.Statuses(ctx)
		if err != nil {
			return nil, fmt.Errorf("gateway: read the pins: %w", err)
		}
		for i := range statuses {
			pinOf[statuses[i].Tool] = &statuses[i]
		}
	}
	var out []console.ToolStats
	for _, e := range b.s.Tools().Entries() {
		name := e.Spec.Name
		p := b.s.PolicyOf(name)
		c := counters[name]
		if c == nil { // a tool no call reached yet
			c = &callpath.ToolCounter{}
		}
		st := console.ToolStats{Name: name, Decisions: c.Decisions, Observed: c.Observed, Executions: c.Executions, ExecutionsUnknown: c.ExecutionsUnknown, Replays: c.Replays,
			P50: c.Quantile(0.5), P99: c.Quantile(0.99), Pin: pinOf[name],
			Policy: []string{
				"timeout: " + p.Timeout.String(),
				"replay_ttl: " + p.ReplayTTL.String(),
				"lease_expiry: " + leaseExpiryName(p.LeaseExpiry),
			}}
		if rules, mode := b.s.Decisions(name); rules.Rules() > 0 {
			st.Policy = append(st.Policy, fmt.Sprintf("decide: %d rules, policy %.12s… (mode %s)", rules.Rules(), rules.Digest(), mode))
		}
		out = append(out, st)
	}
	return out, nil
}

// ApprovalRule reads the rule at index of tool's decide rules as
// configured now. The approval's binding begins with the policy digest it
// was asked under ("<policy>.<definition>", callpath's approvalBinding):
// another digest now means the rules changed since.
func (b consoleBackend) ApprovalRule(tool string, index int, binding string) console.ApprovalRule {
	policy, _ := b.s.Decisions(tool)
	rule, found := policy.Rule(index)
	return console.ApprovalRule{Rule: rule, Found: found,
		Changed: binding != "" && !strings.HasPrefix(binding, policy.Digest()+".")}
}

// ToolChange reads an MCP upstream tool's pinned and current definitions.
func (b consoleBackend) ToolChange(ctx context.Context, tool string) (pins.Change, error) {
	if b.s.opts.Pins == nil {
		return pins.Change{}, pins.ErrUnknownTool
	}
	return b.s.opts.Pins.Change(ctx, tool)
}

// AcceptTool accepts a held tool's current definition of hash sha256, as
// POST /admin/v1/tools/{tool}/accept does (the pin keeper leaves the
// tool_accepted receipt).
func (b consoleBackend) AcceptTool(ctx context.Context, tool, sha256, by string) (pins.Status, error) {
	if b.s.opts.Pins == nil {
		return pins.Status{}, pins.ErrUnknownTool
	}
	status, err := b.s.opts.Pins.Accept(ctx, tool, sha256, by)
	if err == nil {
		b.s.Logger().InfoContext(ctx, "tool accepted", "tool", tool, "sha256", status.Pinned, "by", by, "via", "console")
	}
	return status, err
}

// Budgets reads tenant's budget windows as the admin API does ("": the
// tenant of calls without auth); a store that keeps no budgets shows none.
func (b consoleBackend) Budgets(ctx context.Context, tenant, requester string) ([]console.BudgetCard, error) {
	if tenant == "" {
		tenant = callpath.AnonymousTenant
	}
	windows, err := b.s.BudgetWindows(ctx, tenant, requester)
	if errors.Is(err, errBudgetsUnkept) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cards := make([]console.BudgetCard, len(windows))
	for i, w := range windows {
		cards[i] = console.BudgetCard{Budget: w.Budget, Tool: w.Tool, Requester: w.Requester, WindowStart: w.WindowStart,
			ResetsAt: w.ResetsAt, Limit: w.Limit, Used: w.Used, Held: w.Held, Remaining: w.Remaining}
	}
	return cards, nil
}

// leaseExpiryName is the policy's name, the default spelled out.
func leaseExpiryName(e idempotency.LeaseExpiry) string {
	if e == "" {
		return string(idempotency.LeaseExpiryRerun)
	}
	return string(e)
}
