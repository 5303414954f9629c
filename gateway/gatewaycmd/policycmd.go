package gatewaycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

const policyUsage = "replay -config NEW [-since DURATION] [-json]"

// replayExamples is how many example calls are shown per tool and
// decision.
const replayExamples = 3

// replayTimeout bounds a whole replay (every page of the store).
const replayTimeout = 5 * time.Minute

// ReplayReport is what `gateway policy replay` prints (its -json form).
type ReplayReport struct {
	Since time.Time     `json:"since"`
	Tools []ReplayTally `json:"tools"`
	// NotReplayable counts, per reason, the calls of the period that could
	// not be evaluated.
	NotReplayable map[string]int `json:"not_replayable"`
}

// ReplayTally is one tool's counts under the new rules.
type ReplayTally struct {
	Tool     string `json:"tool"`
	Replayed int    `json:"replayed"`
	Allowed  int    `json:"allowed"`
	Approval int    `json:"held_for_approval"`
	Denied   int    `json:"denied"`
	// OverBudget is "N/A": the config has no budgets yet.
	OverBudget    string                     `json:"over_budget"`
	NotReplayable int                        `json:"not_replayable"`
	Examples      map[string][]ReplayExample `json:"examples,omitempty"`
}

// ReplayExample is one replayed call.
type ReplayExample struct {
	Tenant    string `json:"tenant"`
	Session   string `json:"session,omitempty"`
	Step      uint64 `json:"step,omitempty"`
	State     string `json:"state"`
	Arguments string `json:"arguments"`
	Rule      string `json:"rule,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// The reasons a call of the period cannot be replayed.
const (
	notReplayableCompleted = "COMPLETED without its arguments: the store drops a call's arguments when it completes, unless idempotency.keep_arguments was on when it ran (they are kept while IN_PROGRESS or UNKNOWN, and with an approval)"
	notReplayableGone      = "the record changed or expired during the replay"
)

// runPolicy is `gateway policy replay`.
func runPolicy(ctx context.Context, inv invocation) error {
	if len(inv.args) == 0 || inv.args[0] != "replay" {
		if len(inv.args) > 0 && (inv.args[0] == "-h" || inv.args[0] == "-help" || inv.args[0] == "--help") {
			fmt.Fprintf(inv.stdout, "usage: gateway policy %s\n", policyUsage)
			return nil
		}
		return fmt.Errorf("policy: want replay (usage: gateway policy %s)", policyUsage)
	}
	fs := flag.NewFlagSet("policy replay", flag.ContinueOnError)
	configPath := fs.String("config", "", "the config whose decide rules are replayed (required); its store is read")
	since := fs.Duration("since", 7*24*time.Hour, "replay the calls created this long ago or later")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	sub := inv
	sub.args = inv.args[1:]
	if err := parseFlags(fs, sub, "policy replay", policyUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 || *since <= 0 {
		return fmt.Errorf("policy replay: want -config NEW and a positive -since (usage: gateway policy %s)", policyUsage)
	}
	cfg, _, err := loadConfig(*configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("policy replay: %w", err)
	}
	decisions, _, _, err := cfg.buildDecisions()
	if err != nil {
		return fmt.Errorf("policy replay: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	// Read only: never migrate the store from here.
	cfg.Store.Migrate = new(bool)
	store, desc, err := cfg.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return fmt.Errorf("policy replay: %w", err)
	}
	defer store.Close()
	report, err := replay(ctx, store, decisions, time.Now().Add(-*since))
	if err != nil {
		return fmt.Errorf("policy replay: store %s: %w", desc, err)
	}
	return writeReport(inv.stdout, *asJSON, report)
}

// replay evaluates decisions (the new rules; a tool without rules allows)
// against every record of the store created at or after since.
func replay(ctx context.Context, store idempotency.Store, decisions map[string]*decide.Policy, since time.Time) (*ReplayReport, error) {
	admin, ok := store.(idempotency.Admin)
	if !ok {
		return nil, errors.New("the store cannot list its records")
	}
	report := &ReplayReport{Since: since.UTC(), NotReplayable: map[string]int{}}
	tallies := map[string]*ReplayTally{}
	tally := func(tool string) *ReplayTally {
		t, ok := tallies[tool]
		if !ok {
			t = &ReplayTally{Tool: tool, OverBudget: "N/A", Examples: map[string][]ReplayExample{}}
			tallies[tool] = t
		}
		return t
	}
	filter := idempotency.ListFilter{Limit: idempotency.MaxListLimit}
	for {
		page, err := admin.List(ctx, filter)
		if err != nil {
			return nil, err
		}
		for _, listed := range page.Records {
			if listed.CreatedAt.Before(since) {
				continue
			}
			t := tally(listed.Scope.Tool)
			// List pages carry no arguments: Get has them, a COMPLETED
			// record's only when it kept them (idempotency.keep_arguments).
			rec, err := store.Get(ctx, listed.Scope)
			if errors.Is(err, idempotency.ErrNotFound) || (err == nil && rec.CanonicalArguments == nil) {
				reason := notReplayableGone
				if err == nil && rec.State == idempotency.StateCompleted {
					reason = notReplayableCompleted
				}
				t.NotReplayable++
				report.NotReplayable[reason]++
				continue
			}
			if err != nil {
				return nil, err
			}
			in := &decide.Input{Arguments: rec.CanonicalArguments, Tenant: rec.Scope.Tenant, API: "rest"}
			if rec.Step != nil {
				in.Session, in.Step, in.HasStep = rec.Step.SessionID, rec.Step.Index, true
			}
			verdict, _ := decisions[rec.Scope.Tool].Decide(ctx, in) // an evaluation error is a deny, as at call time
			t.Replayed++
			switch verdict.Decision {
			case decide.Allow:
				t.Allowed++
			case decide.Approve:
				t.Approval++
			default:
				t.Denied++
			}
			key := string(verdict.Decision)
			if len(t.Examples[key]) < replayExamples {
				ex := ReplayExample{Tenant: rec.Scope.Tenant, State: string(rec.State), Arguments: clip(string(rec.CanonicalArguments), 200), Reason: verdict.Reason}
				if verdict.Rule >= 0 {
					ex.Rule = fmt.Sprintf("decide[%d]", verdict.Rule)
				}
				if rec.Step != nil {
					ex.Session, ex.Step = rec.Step.SessionID, rec.Step.Index
				}
				t.Examples[key] = append(t.Examples[key], ex)
			}
		}
		if page.Cursor == "" {
			break
		}
		filter.Cursor = page.Cursor
	}
	for _, t := range tallies {
		report.Tools = append(report.Tools, *t)
	}
	sort.Slice(report.Tools, func(i, j int) bool { return report.Tools[i].Tool < report.Tools[j].Tool })
	if report.Tools == nil {
		report.Tools = []ReplayTally{}
	}
	return report, nil
}

// clip shortens s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// writeText prints the table, the examples and why calls were not
// replayed.
func (r *ReplayReport) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "policy replay of the calls created since %s\n\n", r.Since.Format(time.RFC3339))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tREPLAYED\tALLOWED\tAPPROVAL\tDENIED\tOVER BUDGET\tNOT REPLAYABLE")
	for _, t := range r.Tools {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\n", t.Tool, t.Replayed, t.Allowed, t.Approval, t.Denied, t.OverBudget, t.NotReplayable)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range r.Tools {
		for _, d := range []decide.Decision{decide.Deny, decide.Approve, decide.Allow} {
			for _, ex := range t.Examples[string(d)] {
				who := ex.Tenant
				if ex.Session != "" {
					who += fmt.Sprintf(" session %s step %d", ex.Session, ex.Step)
				}
				fmt.Fprintf(&b, "\n%s %s: %s (%s) %s", t.Tool, d, who, ex.State, ex.Arguments)
				if ex.Rule != "" || ex.Reason != "" {
					fmt.Fprintf(&b, " — %s %s", ex.Rule, ex.Reason)
				}
			}
		}
	}
	if len(r.NotReplayable) > 0 {
		fmt.Fprintf(&b, "\n\nnot replayable:\n")
		reasons := make([]string, 0, len(r.NotReplayable))
		for reason := range r.NotReplayable {
			reasons = append(reasons, reason)
		}
		sort.Strings(reasons)
		for _, reason := range reasons {
			fmt.Fprintf(&b, "  %d: %s\n", r.NotReplayable[reason], reason)
		}
	}
	b.WriteString("\nover budget: N/A (the config has no budgets in this version)\n")
	_, err := io.WriteString(w, b.String())
	return err
}
