package gatewaycmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/toolgateway/toolgateway/gateway"
)

const budgetsUsage = "budgets -tenant T [-requester PRINCIPAL]"

// budgets is `gateway admin budgets -tenant T`: the tenant's current
// window of every budget (of -requester's for a requester budget), used, held and remaining (GET /admin/v1/budgets).
func (c *adminClient) budgets(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("budgets", flag.ContinueOnError)
	tenant := fs.String("tenant", "", "the tenant whose budgets to show (required)")
	requester := fs.String("requester", "", "the principal whose window of a requester budget to show (default: the calls without one)")
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	if _, err := c.parseInterleaved(fs, args, 0, budgetsUsage); err != nil {
		return err
	}
	if *tenant == "" {
		return fmt.Errorf("admin budgets: -tenant is required (usage: gateway admin %s)", budgetsUsage)
	}
	query := url.Values{"tenant": {*tenant}}
	if *requester != "" {
		query.Set("requester", *requester)
	}
	raw, err := c.do(ctx, http.MethodGet, "/admin/v1/budgets?"+query.Encode(), nil)
	if err != nil {
		return fmt.Errorf("admin budgets: %w", err)
	}
	if *asJSON {
		return writeIndented(c.stdout, json.RawMessage(raw))
	}
	var body struct {
		Budgets []gateway.AdminBudget `json:"budgets"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("admin budgets: %w", err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tTOOL\tWINDOW START\tRESETS AT\tLIMIT\tUSED\tHELD\tREMAINING")
	amount := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	for _, b := range body.Budgets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Budget, orDash(b.Tool), b.WindowStart, b.ResetsAt,
			amount(b.Limit), amount(b.Used), amount(b.Held), amount(b.Remaining))
	}
	return tw.Flush()
}
