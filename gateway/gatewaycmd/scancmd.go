package gatewaycmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/toolscan"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

const scanUsage = "-config FILE [-json] [-fail-on unprotected]"

// ScanReport is what `gateway scan` prints (its -json form).
type ScanReport struct {
	Tools []ScannedTool `json:"tools"`
	// NotListed names the MCP servers whose tools could not be listed
	// (their tools are not in Tools).
	NotListed []string `json:"not_listed,omitempty"`
	Summary   struct {
		Tools         int `json:"tools"`
		ReadOnly      int `json:"read_only"`
		Consequential int `json:"consequential"`
		Unprotected   int `json:"unprotected"`
		Unknown       int `json:"unknown"`
	} `json:"summary"`
}

// ScannedTool is one tool's class, reasons, protections and what its
// config lacks.
type ScannedTool struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	toolscan.Result
	// Protections are what guards the tool's effect (decide rules,
	// lease_expiry: unknown, effect_key) and, for MCP tools, its pin.
	Protections []string `json:"protections"`
	// Protected: a consequential tool with at least one of decide rules
	// (enforced), lease_expiry: unknown, or an effect_key. Absent for the
	// other classes.
	Protected *bool `json:"protected,omitempty"`
	// Lacks lists the protections it does not have; Add is the YAML that
	// would add them.
	Lacks []string `json:"lacks,omitempty"`
	Add   string   `json:"add,omitempty"`
}

// runScan is `gateway scan`: which tools can hurt, and what protects them.
func runScan(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("scan", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	failOn := fs.String("fail-on", "", "unprotected: exit 1 when a consequential tool has no protection (or an MCP server could not be listed)")
	if err := parseFlags(fs, inv, "scan", scanUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("scan: want -config FILE and nothing else (usage: gateway scan %s)", scanUsage)
	}
	if *failOn != "" && *failOn != "unprotected" {
		return fmt.Errorf("scan: -fail-on %q: the only value is unprotected", *failOn)
	}
	report, err := scan(ctx, *configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	if err := writeReport(inv.stdout, *asJSON, report); err != nil {
		return err
	}
	if *failOn == "unprotected" && (report.Summary.Unprotected > 0 || len(report.NotListed) > 0) {
		return fmt.Errorf("scan: %d consequential tools unprotected, %d MCP servers not listed", report.Summary.Unprotected, len(report.NotListed))
	}
	return nil
}

// scan reads every tool of the config: the configured and compiled-in
// ones, and each MCP server's through tools/list (never tools/call).
func scan(ctx context.Context, path string, getenv func(string) string) (*ScanReport, error) {
	st, err := prepare(path, getenv, io.Discard, true)
	if err != nil {
		return nil, err
	}
	report := &ScanReport{Tools: []ScannedTool{}}
	if st.mcp != nil {
		defer st.mcp.Close()
		if err := startMCP(ctx, st.mcp, st.log); err != nil {
			return nil, err
		}
		report.NotListed = st.mcp.NotReady()
	}
	cfg, opts := st.cfg, st.opts
	configured := map[string]int{}
	for i, t := range cfg.Tools {
		configured[t.Name] = i
	}
	servers := map[string]int{}
	for i, e := range cfg.MCPServers {
		servers[e.Name] = i
	}
	for _, e := range opts.Tools.Entries() {
		t := toolscan.Tool{Name: e.Spec.Name, Description: e.Spec.Description, InputSchema: e.Spec.InputSchema, ServedReadOnly: e.Spec.ReadOnly}
		st := ScannedTool{Name: e.Spec.Name}
		policy := opts.Policies[e.Spec.Name].Resolve(e.Spec.Policy, tools.DefaultPolicy())
		mcpTool, isMCP := e.Tool.(*mcptool.Tool)
		_, isHTTP := e.Tool.(*httptool.Tool)
		index, inConfig := configured[e.Spec.Name]
		switch {
		case isMCP:
			i := servers[mcpTool.Server()]
			st.Source = fmt.Sprintf("mcp_servers[%d] (%s), tool %q", i, mcpTool.Server(), mcpTool.UpstreamName())
			t.HasMCP = true
			if a := mcpTool.Annotations(); a != nil {
				t.MCP = &toolscan.Annotations{ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
			}
			t.ConfigReadOnly = contains(cfg.MCPServers[i].ReadOnly, mcpTool.UpstreamName())
		case isHTTP:
			st.Source = fmt.Sprintf("tools[%d], HTTP upstream", index)
			t.HTTPMethod = http.MethodPost
			t.ConfigReadOnly = e.Spec.ReadOnly
		case inConfig:
			st.Source = fmt.Sprintf("tools[%d], plugin", index)
			t.ConfigReadOnly = e.Spec.ReadOnly
		default:
			st.Source = "plugin (compiled in, not in the config)"
			t.ConfigReadOnly = e.Spec.ReadOnly
		}
		st.Result = toolscan.Classify(t)
		if st.Class != toolscan.ReadOnly {
			upstreamName := ""
			if isMCP {
				upstreamName = mcpTool.UpstreamName()
			}
			protect(&st, opts.Decisions[e.Spec.Name], opts.Mode, policy, isMCP, inConfig, upstreamName, e.Spec.InputSchema)
		}
		if isMCP {
			pin := "pin: first_use (held if the server changes its definition)"
			if fixed := cfg.MCPServers[servers[mcpTool.Server()]].Pins[mcpTool.UpstreamName()]; fixed != "" {
				pin = "pin: " + fixed + " (fixed by the config)"
			}
			st.Protections = append(st.Protections, pin)
		}
		if isHTTP && inConfig && cfg.Tools[index].HTTP != nil && cfg.Tools[index].HTTP.TLS != nil {
			st.Protections = append(st.Protections, "tls.pin_sha256: the upstream's certificate is pinned")
		}
		if st.Protections == nil {
			st.Protections = []string{}
		}
		report.add(st)
	}
	return report, nil
}

// protect fills in what guards a mutating tool's effect, what it lacks
// and the YAML that would add it (upstreamName: an MCP tool's name on its
// server, where its settings go).
func protect(st *ScannedTool, policy *decide.Policy, mode decide.Mode, resolved tools.Policy, isMCP, inConfig bool, upstreamName string, schema []byte) {
	hasDecide := policy != nil && mode != decide.ModeObserve
	switch {
	case hasDecide:
		st.Protections = append(st.Protections, "decide rules (enforced)")
	case policy != nil:
		st.Protections = append(st.Protections, "decide rules in observe mode: nothing is held or denied, they only count")
	}
	hasUnknown := resolved.LeaseExpiry == tools.LeaseExpiryUnknown
	if hasUnknown {
		st.Protections = append(st.Protections, "lease_expiry: unknown")
	}
	hasEffect := resolved.EffectKey != ""
	if hasEffect {
		st.Protections = append(st.Protections, "effect_key: "+resolved.EffectKey)
	}
	if st.Class != toolscan.Consequential {
		return
	}
	protected := hasDecide || hasUnknown || hasEffect
	st.Protected = &protected
	var lines []string
	if !hasUnknown {
		st.Lacks = append(st.Lacks, "lease_expiry: unknown")
		lines = append(lines, "lease_expiry: unknown   # an uncertain outcome waits for an operator instead of running again")
	}
	if !hasEffect {
		st.Lacks = append(st.Lacks, "effect_key")
		// No member is guessed, so the line stays a comment: a key on the
		// wrong member (a customer id) would allow one action per
		// customer, ever.
		lines = append(lines, "# effect_key: \""+st.Name+":{/order_id}\"   # one execution per business action, whatever the key: name the member that identifies it")
	}
	if !hasDecide {
		st.Lacks = append(st.Lacks, "decide rules")
		lines = append(lines, "decide:")
		if amount := toolscan.AmountMember(schema); amount != "" {
			lines = append(lines, "  - when: \"args."+amount+" <= 100\"   # a threshold of your own", "    decision: allow")
		}
		lines = append(lines, "  - decision: approve   # everything else waits for a human; rules with when: before it allow what is safe")
	}
	if len(lines) == 0 {
		return
	}
	// The lines go where the config takes one tool's settings: a tools[]
	// entry, or the server entry's tool_settings for an MCP tool.
	head, indent := "tools:\n  - name: "+st.Name+"\n", "    "
	switch {
	case isMCP:
		head = "mcp_servers:\n  - name: " + serverOf(st.Source) + "\n    tool_settings:\n      " + upstreamName + ":\n"
		indent = "        "
	case !inConfig:
		head += "    # (a new tools[] entry: the plugin takes these settings)\n"
	}
	st.Add = head + indent + strings.Join(lines, "\n"+indent) + "\n"
}

// serverOf is the server name in a source "mcp_servers[i] (name), …".
func serverOf(source string) string {
	_, rest, _ := strings.Cut(source, "(")
	name, _, _ := strings.Cut(rest, ")")
	return name
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// add appends a tool and counts it.
func (r *ScanReport) add(t ScannedTool) {
	r.Tools = append(r.Tools, t)
	r.Summary.Tools++
	switch t.Class {
	case toolscan.ReadOnly:
		r.Summary.ReadOnly++
	case toolscan.Consequential:
		r.Summary.Consequential++
		if t.Protected != nil && !*t.Protected {
			r.Summary.Unprotected++
		}
	default:
		r.Summary.Unknown++
	}
	sort.SliceStable(r.Tools, func(i, j int) bool { return r.Tools[i].Name < r.Tools[j].Name })
}

// writeText prints the report: a table, then each non-read-only tool's
// reasons, protections and the YAML it lacks.
func (r *ScanReport) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tools: %d read_only, %d consequential (%d unprotected), %d unknown\n",
		r.Summary.Tools, r.Summary.ReadOnly, r.Summary.Consequential, r.Summary.Unprotected, r.Summary.Unknown)
	for _, s := range r.NotListed {
		fmt.Fprintf(&b, "MCP server %s: not listed, its tools are not scanned\n", s)
	}
	for _, t := range r.Tools {
		state := ""
		if t.Protected != nil {
			state = map[bool]string{true: " (protected)", false: " (UNPROTECTED)"}[*t.Protected]
		}
		fmt.Fprintf(&b, "\n%s: %s%s\n  source: %s\n", t.Name, t.Class, state, t.Source)
		for _, reason := range t.Reasons {
			fmt.Fprintf(&b, "  why: %s\n", reason)
		}
		for _, p := range t.Protections {
			fmt.Fprintf(&b, "  protected by: %s\n", p)
		}
		for _, l := range t.Lacks {
			fmt.Fprintf(&b, "  lacks: %s\n", l)
		}
		if t.Add != "" {
			fmt.Fprintf(&b, "  add:\n")
			for _, line := range strings.Split(strings.TrimRight(t.Add, "\n"), "\n") {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
