package gatewaycmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/console"
)

// Usages of the approval commands of `gateway admin`.
const (
	approvalsUsage = "approvals [-state S] [-tenant T] [-tool X] [-session S] [-requester P] [-limit N] [-cursor C] [-all]"
	approvalUsage  = "approval ID"
	approveUsage   = "approve ID [-by B] [-note N]"
	denyUsage      = "deny ID -reason R [-by B]"
)

// approvalPath is the admin path of an approval.
func approvalPath(id string) string {
	return "/admin/v1/approvals/" + url.PathEscape(id)
}

// approvals is `gateway admin approvals`: a table of approvals, pending
// ones by default.
func (c *adminClient) approvals(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("approvals", flag.ContinueOnError)
	state := fs.String("state", gateway.ApprovalPending, "PENDING, APPROVED, DENIED, EXPIRED or CONSUMED; \"all\" for every state")
	tenant := fs.String("tenant", "", "only this tenant's approvals")
	tool := fs.String("tool", "", "only this tool's approvals")
	session := fs.String("session", "", "only this agent session's approvals")
	requester := fs.String("requester", "", "only this principal's approvals (e.g. token:acme)")
	paging := addPagingFlags(fs)
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	if _, err := c.parseInterleaved(fs, args, 0, approvalsUsage); err != nil {
		return err
	}
	stateFilter := strings.ToUpper(*state)
	if stateFilter == "ALL" {
		stateFilter = ""
	}
	q := paging.query(map[string]string{"state": stateFilter, "tenant": *tenant, "tool": *tool, "session": *session, "requester": *requester})
	approvals, next, err := c.listPages(ctx, "/admin/v1/approvals", "approvals", q, *paging.all)
	if err != nil {
		return fmt.Errorf("admin approvals: %w", err)
	}
	if *asJSON {
		return c.writeListing("approvals", approvals, next)
	}
	return c.approvalTable(approvals, next)
}

// approvalTable prints listed approvals, one line each.
func (c *adminClient) approvalTable(approvals []json.RawMessage, next string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTENANT\tTOOL\tAPPROVER\tREQUESTED\tEXPIRES\tDECIDED BY\tREASON")
	for _, raw := range approvals {
		var a gateway.AdminApproval
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("admin approvals: an approval: %w", err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, a.Tenant, a.Tool, a.Approver,
			a.RequestedAt, a.ExpiresAt, orDash(console.Visible(decidedBy(a))), orDash(console.Visible(a.Reason)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		_, err := fmt.Fprintf(c.stdout, "\n%s; more: -cursor %s (or -all)\n", countOf(len(approvals), "approval"), next)
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "\n%s\n", countOf(len(approvals), "approval"))
	return err
}

// countOf is "1 approval", "2 approvals".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// approval is `gateway admin approval ID`: one approval with the call's
// arguments, what an approver reads before deciding.
func (c *adminClient) approval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("approval", flag.ContinueOnError)
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	pos, err := c.parseInterleaved(fs, args, 1, approvalUsage)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodGet, approvalPath(pos[0]), nil)
	if err != nil {
		return fmt.Errorf("admin approval: %w", err)
	}
	return c.printApproval(raw, *asJSON)
}

// decide is `gateway admin approve` (approve) and `gateway admin deny`.
// The decider is -by, else $USER; a deny needs its reason.
func (c *adminClient) decide(ctx context.Context, args []string, approve bool) error {
	name, usage := "approve", approveUsage
	if !approve {
		name, usage = "deny", denyUsage
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	by := fs.String("by", c.user, "who decides, kept as claimed_by beside token:admin (default $USER)")
	var note *string
	if approve {
		note = fs.String("note", "", "a note kept with the decision")
	} else {
		note = fs.String("reason", "", "why the call is denied (required)")
	}
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	pos, err := c.parseInterleaved(fs, args, 1, usage)
	if err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(*by) == "":
		return fmt.Errorf("admin %s: -by is required ($USER is not set) (usage: gateway admin %s)", name, usage)
	case !approve && strings.TrimSpace(*note) == "":
		return fmt.Errorf("admin deny: -reason is required (usage: gateway admin %s)", usage)
	}
	payload, err := json.Marshal(map[string]string{"by": *by, "note": *note})
	if err != nil {
		return fmt.Errorf("admin %s: %w", name, err)
	}
	raw, err := c.do(ctx, http.MethodPost, approvalPath(pos[0])+"/"+name, payload)
	if err != nil {
		return fmt.Errorf("admin %s: %w", name, err)
	}
	return c.printApproval(raw, *asJSON)
}

// printApproval prints one approval as aligned "field value" lines (or
// JSON).
func (c *adminClient) printApproval(raw []byte, asJSON bool) error {
	if asJSON {
		return c.writeAnswer(raw)
	}
	var a gateway.AdminApproval
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("admin: the answer is not an approval: %w", err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	// A caller's strings reach a terminal: control sequences and
	// direction overrides are shown escaped, never acted on.
	line := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s\t%s\n", name, console.Visible(value))
		}
	}
	line("id", a.ID)
	line("state", a.State)
	line("tenant", a.Tenant)
	line("tool", a.Tool)
	line("key", a.Key)
	line("session_id", a.SessionID)
	if a.StepIndex != nil {
		line("step_index", strconv.FormatUint(*a.StepIndex, 10))
	}
	if a.CanonicalArguments != nil {
		line("arguments", *a.CanonicalArguments)
	}
	line("rule", strconv.Itoa(a.Rule))
	line("reason", a.Reason)
	line("approver", a.Approver)
	line("requester", a.Requester)
	if a.Quorum > 1 {
		line("quorum", strconv.Itoa(a.Quorum))
		line("approved_by", strings.Join(a.ApprovedBy, ", "))
	}
	line("requested_at", a.RequestedAt)
	line("expires_at", a.ExpiresAt)
	line("decided_by", a.DecidedBy)
	line("claimed_by", a.ClaimedBy)
	line("decided_at", a.DecidedAt)
	line("note", a.Note)
	return tw.Flush()
}

// decidedBy is the DECIDED BY column: the decider's principal, with the
// name claimed beside token:admin first ("alice (token:admin)").
func decidedBy(a gateway.AdminApproval) string {
	if a.ClaimedBy != "" {
		return a.ClaimedBy + " (" + a.DecidedBy + ")"
	}
	return a.DecidedBy
}
