package gatewaycmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

const checkUsage = "-config FILE [-dial] [-json]"

// CheckReport is what `gateway check` found in a valid config: what the
// gateway would serve with it, in this environment.
type CheckReport struct {
	Config string `json:"config"`
	Listen string `json:"listen"`
	// AdminListen is admin_listen, when set: where the operations
	// endpoints are served instead of Listen.
	AdminListen string `json:"admin_listen,omitempty"`
	TLS         bool   `json:"tls"`
	// Store names the store start-up would open (never with a password),
	// after the environment overrides: "redis:host:port",
	// "redis-cluster:...", "postgres:host/db schema s", "embedded:/path".
	Store   string `json:"store"`
	KeyMode string `json:"key_mode"`
	Tenants int    `json:"tenants"`
	// OIDCIssuer is auth.oidc's issuer ("" without one).
	OIDCIssuer string `json:"oidc_issuer,omitempty"`
	Admin      bool   `json:"admin"`
	// Mode is enforce or observe (the decide rules' mode).
	Mode       string             `json:"mode"`
	Tools      []CheckedTool      `json:"tools"`
	MCPServers []CheckedMCPServer `json:"mcp_servers,omitempty"`
	// Dial holds, with -dial, one result per store and upstream reached.
	Dial []DialResult `json:"dial,omitempty"`
	// Warnings are what the config allows but probably did not mean
	// (an effect_key pointer the tool's schema does not require).
	Warnings []string `json:"warnings,omitempty"`
}

// CheckedTool is one tool the gateway would serve, with its effective
// settings (defaults filled in).
type CheckedTool struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // plugin | http | mcp
	ReadOnly bool   `json:"read_only"`
	Timeout  string `json:"timeout"`
	// ReplayTTL and LeaseExpiry are empty for read-only tools, which store nothing.
	ReplayTTL   string `json:"replay_ttl,omitempty"`
	LeaseExpiry string `json:"lease_expiry,omitempty"`
	// URL is an HTTP tool's upstream, without user info or query (they may
	// hold credentials); an MCP tool's server as "mcp:<name>".
	URL         string `json:"url,omitempty"`
	Description string `json:"description,omitempty"`
	// DecideRules is how many decide rules the tool has (compiled).
	DecideRules int `json:"decide_rules,omitempty"`
	// EffectKey is the tool's effect_key template, when it has one.
	EffectKey string `json:"effect_key,omitempty"`
	// NotExecutedStatuses are the statuses among 408, 425 and 429 that
	// release a call of the tool (its not_executed_statuses, or the
	// default of its lease_expiry); empty for read-only tools.
	NotExecutedStatuses []int `json:"not_executed_statuses,omitempty"`
}

// CheckedMCPServer is one entry of mcp_servers. Its tools are known only
// once it is listed: with -dial they are in Tools.
type CheckedMCPServer struct {
	Name string `json:"name"`
	// Target is the url (redacted as for HTTP tools) or the command's program.
	Target string `json:"target"`
}

// DialResult is what -dial found at one target.
type DialResult struct {
	// Target is "store", "mcp:<name>" or "http:<tool>".
	Target string `json:"target"`
	OK     bool   `json:"ok"`
	// Detail says what answered (e.g. "PING answered", "12 tools listed")
	// or why it failed.
	Detail string `json:"detail"`
}

// Check validates the config file at path exactly as the gateway does at
// start-up (prepare: with the environment overrides getenv gives and the
// compiled-in plugins), without opening the store, starting MCP servers or
// listening, and reports what it would serve. The error names the field at
// fault.
func Check(path string, getenv func(string) string) (*CheckReport, error) {
	return check(context.Background(), path, getenv, false)
}

// CheckDial is Check, then it connects to the store and to every upstream
// (lists each MCP server's tools, opens a connection to each HTTP tool's
// upstream without calling it) and reports each in Dial. A target that
// fails is reported, not returned as the error.
func CheckDial(ctx context.Context, path string, getenv func(string) string) (*CheckReport, error) {
	return check(ctx, path, getenv, true)
}

func check(ctx context.Context, path string, getenv func(string) string, dial bool) (*CheckReport, error) {
	logs := &lineBuffer{}
	st, err := prepare(path, getenv, logs, true)
	if err != nil {
		return nil, err
	}
	if st.mcp != nil {
		defer st.mcp.Close()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, opts := st.cfg, st.opts
	report := &CheckReport{
		Config:      abs,
		Listen:      cfg.Listen,
		AdminListen: cfg.AdminListen,
		TLS:         cfg.TLS.enabled(),
		Store:       st.store.desc,
		KeyMode:     string(opts.KeyMode),
		Tenants:     len(opts.Tenants),
		Admin:       opts.AdminTokenSHA256 != nil,
		Mode:        string(opts.Mode),
	}
	if cfg.Auth != nil && cfg.Auth.OIDC != nil {
		report.OIDCIssuer = cfg.Auth.OIDC.Issuer
	}
	for _, e := range cfg.MCPServers {
		target := redactURL(e.URL)
		if len(e.Command) > 0 {
			target = e.Command[0]
		}
		report.MCPServers = append(report.MCPServers, CheckedMCPServer{Name: e.Name, Target: target})
	}
	if dial {
		report.Dial = append(report.Dial, dialStore(ctx, cfg, st.store, st.log))
		report.Dial = append(report.Dial, dialMCP(ctx, st, logs)...)
		report.Dial = append(report.Dial, dialHTTPTools(ctx, cfg)...)
		report.Dial = append(report.Dial, dialOIDC(ctx, opts.OIDC)...)
	}
	report.Tools = checkedTools(cfg, opts)
	report.Warnings = append(effectKeyWarnings(opts), st.cfg.missingSecrets...)
	if opts.AdminTokenSHA256 != nil && len(st.console.SessionKeys) == 0 {
		report.Warnings = append(report.Warnings, "console: no session key (console.session_key_file or "+gateway.ConsoleSessionKeyEnv+
			"): each process signs console sessions with a random key, so they end at a restart and other replicas refuse them")
	}
	return report, nil
}

// checkedTools lists the tools of opts with their effective policies.
func checkedTools(cfg *Config, opts callpath.Options) []CheckedTool {
	upstreams := map[string]string{}
	for _, t := range cfg.Tools {
		if t.HTTP != nil {
			upstreams[t.Name] = redactURL(t.HTTP.URL)
		}
	}
	gatewayDefaults := tools.Policy{Timeout: opts.ToolTimeout, ReplayTTL: opts.ReplayTTL}
	var out []CheckedTool
	for _, e := range opts.Tools.Entries() {
		// The gateway's own rule (configured, then the tool's own, e.g. its
		// mcp_servers: entry, then the defaults), not a copy of it.
		p := opts.Policies[e.Spec.Name].Resolve(e.Spec.Policy, gatewayDefaults)
		ct := CheckedTool{
			Name:        e.Spec.Name,
			Kind:        "plugin",
			ReadOnly:    e.Spec.ReadOnly,
			Timeout:     shortDuration(p.Timeout),
			URL:         upstreams[e.Spec.Name],
			Description: e.Spec.Description,
			DecideRules: opts.Decisions[e.Spec.Name].Rules(),
		}
		switch t := e.Tool.(type) {
		case *httptool.Tool:
			ct.Kind = "http"
		case *mcptool.Tool:
			ct.Kind = "mcp"
			ct.URL = "mcp:" + t.Server()
		}
		if !ct.ReadOnly {
			ct.ReplayTTL = shortDuration(p.ReplayTTL)
			ct.LeaseExpiry = string(p.LeaseExpiry)
			ct.EffectKey = p.EffectKey
			for _, status := range tools.TransientStatuses {
				if p.StatusNotExecuted(status) {
					ct.NotExecutedStatuses = append(ct.NotExecutedStatuses, status)
				}
			}
		}
		out = append(out, ct)
	}
	return out
}

// runCheck is `gateway check`: exit status 0 and the report when the
// config is valid (and, with -dial, every target answered), 1 and the
// error otherwise.
func runCheck(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dial := fs.Bool("dial", false, "also connect to the store and every upstream, and report each")
	if err := parseFlags(fs, inv, "check", checkUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("check: want -config FILE and nothing else (usage: gateway check %s)", checkUsage)
	}
	report, err := check(ctx, *configPath, inv.getenv, *dial)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if err := writeReport(inv.stdout, *asJSON, report); err != nil {
		return err
	}
	var failed []string
	for _, d := range report.Dial {
		if !d.OK {
			failed = append(failed, d.Target)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("check -dial: %d of %d targets failed: %s", len(failed), len(report.Dial), strings.Join(failed, ", "))
	}
	return nil
}

// writeText prints the report as a short summary and a table of tools.
func (r *CheckReport) writeText(w io.Writer) error {
	scheme := "http"
	if r.TLS {
		scheme = "https"
	}
	admin := "off"
	if r.Admin {
		admin = "on"
	}
	auth := "off (every caller is tenant anonymous)"
	switch {
	case r.Tenants > 0 && r.OIDCIssuer != "":
		auth = fmt.Sprintf("%d tenants and tokens of %s", r.Tenants, r.OIDCIssuer)
	case r.OIDCIssuer != "":
		auth = "tokens of " + r.OIDCIssuer
	case r.Tenants > 0:
		auth = fmt.Sprintf("%d tenants", r.Tenants)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "config\t%s: OK\n", r.Config)
	fmt.Fprintf(tw, "listen\t%s (%s)\n", r.Listen, scheme)
	if r.AdminListen != "" {
		fmt.Fprintf(tw, "admin_listen\t%s (%s: /healthz, /readyz, /metrics, /admin)\n", r.AdminListen, scheme)
	}
	fmt.Fprintf(tw, "store\t%s\n", r.Store)
	fmt.Fprintf(tw, "key_mode\t%s\n", r.KeyMode)
	fmt.Fprintf(tw, "auth\t%s\n", auth)
	fmt.Fprintf(tw, "admin\t%s\n", admin)
	fmt.Fprintf(tw, "mode\t%s\n", r.Mode)
	fmt.Fprintf(tw, "tools\t%d\n", len(r.Tools))
	for _, m := range r.MCPServers {
		fmt.Fprintf(tw, "mcp_server\t%s (%s)\n", m.Name, m.Target)
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(tw, "warning\t%s\n", warning)
	}
	for _, d := range r.Dial {
		verdict := "OK"
		if !d.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(tw, "dial %s\t%s: %s\n", d.Target, verdict, d.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tREAD_ONLY\tTIMEOUT\tREPLAY_TTL\tLEASE_EXPIRY\tURL")
	for _, t := range r.Tools {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\t%s\n", t.Name, t.Kind, t.ReadOnly, t.Timeout,
			orString(t.ReplayTTL, "-"), orString(t.LeaseExpiry, "-"), orString(t.URL, "-"))
	}
	return tw.Flush()
}

// redactURL drops user info and the query of an upstream URL, where
// credentials hide.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "..."
	}
	u.Fragment = ""
	return u.String()
}

// shortDuration writes 24h rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
