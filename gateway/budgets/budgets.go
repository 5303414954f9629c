// Package budgets is the budget leaf of the gateway: shared business
// limits over many calls (docs/budgets.md). It checks and compiles the
// configuration — budgets with a limit, a window and a scope, and the
// tools' charges with a CEL cost — and turns one call into the store's
// charges (idempotency.Charge), which the store reserves in the claim's
// own atomic step. It never talks to a store itself.
package budgets

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // a configured time zone loads on any host

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Scope says whose calls a budget counts together.
type Scope string

// The scopes of a budget.
const (
	// ScopeTenant: one sum per tenant, whatever the tool.
	ScopeTenant Scope = "tenant"
	// ScopeTenantTool: one sum per tenant and tool.
	ScopeTenantTool Scope = "tenant_tool"
	// ScopeRequester: one sum per caller: tenant and the call's
	// principal id (gateway/principal); the calls of a tenant that carry
	// no principal (no auth) share one sum.
	ScopeRequester Scope = "requester"
)

// Budget is one configured budget (config `budgets[]`).
type Budget struct {
	Name   string  `yaml:"name"`
	Limit  float64 `yaml:"limit"`
	Window Window  `yaml:"window"`
	Scope  Scope   `yaml:"scope"`
}

// Window is a budget's window: a calendar day or hour in a time zone, or
// a rolling duration. Exactly one of Calendar and Rolling is set.
type Window struct {
	// Calendar is "day" or "hour".
	Calendar string `yaml:"calendar"`
	// TimeZone is an IANA name ("Europe/Berlin"); "" is UTC.
	TimeZone string `yaml:"time_zone"`
	// Rolling is a Go duration ("24h"): the window is the last Rolling
	// before each reservation.
	Rolling string `yaml:"rolling"`
}

// Charge is one of a tool's charges (config `tools[].charges[]`).
type Charge struct {
	Budget string `yaml:"budget"`
	// Cost is a CEL expression on `args` (and `tool`, `tenant`) giving a
	// non-negative number, e.g. "args.amount".
	Cost string `yaml:"cost"`
}

// Unit is how many store units one configured unit is: stores sum
// integers, so amounts are kept in millionths.
const Unit = 1_000_000

// maxAmount bounds limits and costs so that sums of many stay exact in
// every store (Lua numbers are doubles).
const maxAmount = 1e12

// CostLimit bounds the CEL cost of one charge's evaluation, as
// decide.CostLimit does for a rule.
const CostLimit = decide.CostLimit

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Set is a compiled configuration: the budgets and each tool's charges.
// It is safe for concurrent use. A nil *Set has no budgets.
type Set struct {
	budgets map[string]*compiled
	charges map[string][]compiledCharge
}

type compiled struct {
	Budget
	limit   int64
	loc     *time.Location
	rolling time.Duration
}

type compiledCharge struct {
	budget *compiled
	cost   cel.Program
	// constant is the cost's value when it references nothing, neither a
	// variable nor a function (a literal: "1", the count of sends):
	// computed once by New, so a call pays no CEL.
	constant ref.Val
}

// New checks and compiles budgets and the tools' charges. It refuses,
// naming the budget or the tool and charge: a name that is not
// [A-Za-z0-9_.-] (up to 64), a duplicate, a negative or too large limit,
// a window that is neither a calendar day/hour nor a positive rolling
// duration, an unknown time zone, an unknown scope, a charge of an unknown budget
// or the same budget twice, and a cost that does not compile or is not a
// number.
func New(budgets []Budget, charges map[string][]Charge) (*Set, error) {
	s := &Set{budgets: map[string]*compiled{}, charges: map[string][]compiledCharge{}}
	for i, b := range budgets {
		c, err := compile(b)
		if err != nil {
			return nil, fmt.Errorf("budgets[%d]: %w", i, err)
		}
		if s.budgets[b.Name] != nil {
			return nil, fmt.Errorf("budgets[%d]: budget %q is defined twice", i, b.Name)
		}
		s.budgets[b.Name] = c
	}
	env, err := cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("tenant", cel.StringType),
	)
	if err != nil {
		return nil, fmt.Errorf("budgets: CEL environment: %w", err)
	}
	for tool, list := range charges {
		seen := map[string]bool{}
		for i, ch := range list {
			b := s.budgets[ch.Budget]
			switch {
			case b == nil:
				return nil, fmt.Errorf("tool %q: charges[%d]: no budget named %q", tool, i, ch.Budget)
			case seen[ch.Budget]:
				return nil, fmt.Errorf("tool %q: charges[%d]: budget %q is charged twice", tool, i, ch.Budget)
			case strings.TrimSpace(ch.Cost) == "":
				return nil, fmt.Errorf("tool %q: charges[%d]: cost is required (a CEL number, e.g. \"args.amount\")", tool, i)
			}
			seen[ch.Budget] = true
			ast, issues := env.Compile(ch.Cost)
			if issues != nil && issues.Err() != nil {
				return nil, fmt.Errorf("tool %q: charges[%d]: cost: %w", tool, i, issues.Err())
			}
			if t := ast.OutputType(); !t.IsExactType(cel.DynType) && !t.IsExactType(cel.IntType) && !t.IsExactType(cel.DoubleType) && !t.IsExactType(cel.UintType) {
				return nil, fmt.Errorf("tool %q: charges[%d]: cost: type is %s, want a number", tool, i, t)
			}
			prg, err := env.Program(ast, cel.CostLimit(CostLimit))
			if err != nil {
				return nil, fmt.Errorf("tool %q: charges[%d]: cost: %w", tool, i, err)
			}
			charge := compiledCharge{budget: b, cost: prg}
			if len(ast.NativeRep().ReferenceMap()) == 0 {
				if charge.constant, _, err = prg.Eval(map[string]any{}); err != nil {
					return nil, fmt.Errorf("tool %q: charges[%d]: cost: %w", tool, i, err)
				}
			}
			s.charges[tool] = append(s.charges[tool], charge)
		}
	}
	return s, nil
}

func compile(b Budget) (*compiled, error) {
	if !validName.MatchString(b.Name) {
		return nil, fmt.Errorf("budget name %q: want 1 to 64 of A-Z a-z 0-9 _ . - (starting with a letter or digit)", b.Name)
	}
	if b.Limit < 0 || b.Limit > maxAmount || math.IsNaN(b.Limit) {
		return nil, fmt.Errorf("budget %q: limit %v must be between 0 and %v", b.Name, b.Limit, maxAmount)
	}
	c := &compiled{Budget: b, limit: int64(math.Round(b.Limit * Unit))}
	w := b.Window
	switch {
	case w.Rolling != "" && (w.Calendar != "" || w.TimeZone != ""):
		return nil, fmt.Errorf("budget %q: window: rolling takes no calendar or time_zone", b.Name)
	case w.Rolling != "":
		d, err := time.ParseDuration(w.Rolling)
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("budget %q: window: rolling %q: want a duration of at least 1s, e.g. \"24h\"", b.Name, w.Rolling)
		}
		c.rolling = d
	case w.Calendar == "day" || w.Calendar == "hour":
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("budget %q: window: time_zone %q: %w", b.Name, w.TimeZone, err)
		}
		c.loc = loc
	default:
		return nil, fmt.Errorf("budget %q: window: want {calendar: day|hour, time_zone: ...} or {rolling: <duration>}, got calendar %q", b.Name, w.Calendar)
	}
	switch b.Scope {
	case ScopeTenant, ScopeTenantTool, ScopeRequester:
	default:
		return nil, fmt.Errorf("budget %q: scope %q: want tenant, tenant_tool or requester", b.Name, b.Scope)
	}
	return c, nil
}

// Charges reports whether tool charges any budget: a tool that does not
// costs nothing more on the call path.
func (s *Set) Charges(tool string) bool { return s != nil && len(s.charges[tool]) > 0 }

// Any reports whether some tool charges a budget.
func (s *Set) Any() bool { return s != nil && len(s.charges) > 0 }

// Names lists the configured budgets.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.budgets))
	for name := range s.budgets {
		out = append(out, name)
	}
	return out
}

// Call is what a charge's cost and scope are computed from.
type Call struct {
	Tool, Tenant string
	// Requester is the call's principal id ("" without one): the scope
	// of a requester budget.
	Requester string
	// Arguments are the canonical (JCS) arguments.
	Arguments []byte
	// Now is the reservation's time: it picks the window.
	Now time.Time
}

// ErrCost is wrapped by Evaluate's errors about a cost that is not a
// non-negative number: the caller's arguments are at fault.
var ErrCost = errors.New("budget cost")

// Evaluate returns the store charges of one call of c.Tool (nil when the
// tool charges no budget).
func (s *Set) Evaluate(ctx context.Context, c Call) ([]idempotency.Charge, error) {
	if !s.Charges(c.Tool) {
		return nil, nil
	}
	list := s.charges[c.Tool]
	out := make([]idempotency.Charge, 0, len(list))
	var vars map[string]any
	for _, ch := range list {
		v := ch.constant
		if v == nil {
			if vars == nil {
				vars = map[string]any{"args": decide.ArgsValue(c.Arguments), "tool": c.Tool, "tenant": c.Tenant}
			}
			var err error
			if v, _, err = ch.cost.ContextEval(ctx, vars); err != nil {
				return nil, fmt.Errorf("%w of budget %q: %w", ErrCost, ch.budget.Name, err)
			}
		}
		var cost float64
		switch n := v.(type) {
		case types.Int:
			cost = float64(n)
		case types.Uint:
			cost = float64(n)
		case types.Double:
			cost = float64(n)
		default:
			return nil, fmt.Errorf("%w of budget %q: got %s, want a number", ErrCost, ch.budget.Name, v.Type())
		}
		if cost < 0 || cost > maxAmount || math.IsNaN(cost) {
			return nil, fmt.Errorf("%w of budget %q: %v is not between 0 and %v", ErrCost, ch.budget.Name, cost, maxAmount)
		}
		b := ch.budget
		since, end := b.window(c.Now)
		out = append(out, idempotency.Charge{
			Bucket:  b.bucket(c, since),
			Budget:  b.Name,
			Limit:   b.limit,
			Cost:    int64(math.Round(cost * Unit)),
			At:      c.Now,
			Since:   since,
			Retain:  end.Sub(since) + 24*time.Hour,
			Rolling: b.rolling > 0,
		})
	}
	return out, nil
}

// window returns the window now falls in: its start (entries before it
// no longer count) and its end (when it resets). A rolling window starts
// its length before now.
func (b *compiled) window(now time.Time) (since, end time.Time) {
	if b.rolling > 0 {
		return now.Add(-b.rolling), now.Add(b.rolling)
	}
	t := now.In(b.loc)
	if b.Window.Calendar == "hour" {
		start := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, b.loc)
		return start, start.Add(time.Hour)
	}
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, b.loc)
	return start, time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, b.loc)
}

// bucket names the store's sum: budget (first, up to a "|": the stores
// read it back with idempotency.BudgetOfBucket), scope and, for a
// calendar window, the window (so each window's sum is its own bucket and a
// reservation belongs to exactly one window). A rolling window's bucket
// is one per scope; its entries count while they are younger than the
// window.
func (b *compiled) bucket(c Call, since time.Time) string {
	var sb strings.Builder
	sb.WriteString(b.Name)
	sb.WriteString("|t:")
	sb.WriteString(c.Tenant)
	if b.Scope == ScopeTenantTool {
		sb.WriteString("|tool:")
		sb.WriteString(c.Tool)
	}
	if b.Scope == ScopeRequester {
		sb.WriteString("|p:")
		sb.WriteString(c.Requester)
	}
	if b.rolling == 0 {
		sb.WriteString("|w:")
		sb.WriteString(since.Format("2006-01-02T15"))
	}
	return sb.String()
}

// ResetsAt is when the budget's current window ends for a call at now
// (for a rolling window: when the oldest entry could leave it, at the
// latest one window from now).
func (s *Set) ResetsAt(name string, now time.Time) time.Time {
	if s == nil {
		return time.Time{}
	}
	b := s.budgets[name]
	if b == nil {
		return time.Time{}
	}
	_, end := b.window(now)
	return end
}

// Limit is the named budget's limit in store units (0 for no such budget).
func (s *Set) Limit(name string) int64 {
	if s == nil || s.budgets[name] == nil {
		return 0
	}
	return s.budgets[name].limit
}

// Amount turns store units into the configured unit.
func Amount(units int64) float64 { return float64(units) / Unit }

// Current is one budget's current window for one scope, as the admin
// API reports it: the bucket to read and what to compare it with.
type Current struct {
	Budget string
	// Tool is set for a tenant_tool budget (one window per charging tool).
	Tool string
	// Requester is set for a requester budget: whose window it is.
	Requester string
	Bucket    string
	Since     time.Time
	ResetsAt  time.Time
	Rolling   bool
	// Limit is in millionths, as the store keeps amounts.
	Limit int64
}

// Windows lists the current windows of tenant's budgets at now: one per
// budget scoped by tenant, one per charging tool of a tenant_tool budget,
// and for a requester budget the window of requester (a principal id; ""
// is the calls without one); sorted by budget, then tool.
func (s *Set) Windows(tenant, requester string, now time.Time) []Current {
	if s == nil {
		return nil
	}
	var out []Current
	add := func(b *compiled, tool string) {
		since, end := b.window(now)
		who := ""
		if b.Scope == ScopeRequester {
			who = requester
		}
		out = append(out, Current{Budget: b.Name, Tool: tool, Requester: who, Bucket: b.bucket(Call{Tool: tool, Tenant: tenant, Requester: requester}, since),
			Since: since, ResetsAt: end, Rolling: b.rolling > 0, Limit: b.limit})
	}
	for _, b := range s.budgets {
		if b.Scope != ScopeTenantTool {
			add(b, "")
			continue
		}
		for tool, list := range s.charges {
			for _, ch := range list {
				if ch.budget == b {
					add(b, tool)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Current) int {
		return cmp.Or(strings.Compare(a.Budget, b.Budget), strings.Compare(a.Tool, b.Tool))
	})
	return out
}
