package gatewaycmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
)

const checkUsage = "-config FILE [-json]"

// CheckReport is what `gateway check` found in a valid config: what the
// gateway would serve with it, in this environment.
type CheckReport struct {
	Config  string        `json:"config"`
	Listen  string        `json:"listen"`
	TLS     bool          `json:"tls"`
	Store   string        `json:"store"`
	KeyMode string        `json:"key_mode"`
	Tenants int           `json:"tenants"`
	Admin   bool          `json:"admin"`
	Tools   []CheckedTool `json:"tools"`
}

// CheckedTool is one tool the gateway would serve, with its effective
// settings (defaults filled in).
type CheckedTool struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // plugin | http
	ReadOnly bool   `json:"read_only"`
	Timeout  string `json:"timeout"`
	// ReplayTTL and LeaseExpiry are empty for read-only tools, which store nothing.
	ReplayTTL   string `json:"replay_ttl,omitempty"`
	LeaseExpiry string `json:"lease_expiry,omitempty"`
	// URL is an HTTP tool's upstream, without user info or query (they may
	// hold credentials).
	URL         string `json:"url,omitempty"`
	Description string `json:"description,omitempty"`
}

// Check validates the config file at path as the gateway would at
// start-up (with the environment overrides getenv gives and the
// compiled-in plugins), without opening the store or listening, and
// reports what it would serve. The error names the field at fault.
func Check(path string, getenv func(string) string) (*CheckReport, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	cfg.applyEnv(getenv)
	cfg.withDefaults()
	if _, err := cfg.logLevel(); err != nil {
		return nil, err
	}
	if err := cfg.TLS.check(cfg.path); err != nil {
		return nil, err
	}
	store, err := cfg.describeStore()
	if err != nil {
		return nil, err
	}
	plugins := tools.Registered()
	opts, err := cfg.serverOptions(plugins)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	report := &CheckReport{
		Config:  abs,
		Listen:  cfg.Listen,
		TLS:     cfg.TLS.enabled(),
		Store:   store,
		KeyMode: string(opts.KeyMode),
		Tenants: len(opts.Tenants),
		Admin:   opts.AdminTokenSHA256 != nil,
	}
	upstreams := map[string]string{}
	for _, t := range cfg.Tools {
		if t.HTTP != nil {
			upstreams[t.Name] = redactURL(t.HTTP.URL)
		}
	}
	replayTTL := orDuration(opts.ReplayTTL, gateway.DefaultReplayTTL)
	for _, e := range opts.Tools.Entries() {
		p := opts.Policies[e.Spec.Name]
		ct := CheckedTool{
			Name:        e.Spec.Name,
			Kind:        "plugin",
			ReadOnly:    e.Spec.ReadOnly,
			Timeout:     shortDuration(orDuration(p.Timeout, gateway.DefaultToolTimeout)),
			URL:         upstreams[e.Spec.Name],
			Description: e.Spec.Description,
		}
		if _, ok := e.Tool.(*httptool.Tool); ok {
			ct.Kind = "http"
		}
		if !ct.ReadOnly {
			ct.ReplayTTL = shortDuration(orDuration(p.ReplayTTL, replayTTL))
			ct.LeaseExpiry = string(p.LeaseExpiry)
			if ct.LeaseExpiry == "" {
				ct.LeaseExpiry = string(idempotency.LeaseExpiryRerun)
			}
		}
		report.Tools = append(report.Tools, ct)
	}
	return report, nil
}

// describeStore validates the store section without connecting and says
// which store the gateway would open (never with a password).
func (c *Config) describeStore() (string, error) {
	if c.Store.WaitReplicas < 0 {
		return "", fmt.Errorf("store.wait_replicas: %d: must be 0 or more", c.Store.WaitReplicas)
	}
	switch {
	case len(c.Store.ClusterAddrs) > 0:
		return "redis-cluster:" + strings.Join(c.Store.ClusterAddrs, ","), nil
	case c.Store.RedisURL != "":
		opts, err := redis.ParseURL(c.Store.RedisURL)
		if err != nil {
			return "", fmt.Errorf("store.redis_url: %w", err)
		}
		return "redis:" + opts.Addr, nil
	}
	return "embedded:" + c.path(c.Store.Path), nil
}

// runCheck is `gateway check`: exit status 0 and the tool table when the
// config is valid, 1 and the error otherwise.
func runCheck(_ context.Context, inv invocation) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, inv, "check", checkUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("check: want -config FILE and nothing else (usage: gateway check %s)", checkUsage)
	}
	report, err := Check(*configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(inv.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.writeText(inv.stdout)
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
	if r.Tenants > 0 {
		auth = fmt.Sprintf("%d tenants", r.Tenants)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "config\t%s: OK\n", r.Config)
	fmt.Fprintf(tw, "listen\t%s (%s)\n", r.Listen, scheme)
	fmt.Fprintf(tw, "store\t%s\n", r.Store)
	fmt.Fprintf(tw, "key_mode\t%s\n", r.KeyMode)
	fmt.Fprintf(tw, "auth\t%s\n", auth)
	fmt.Fprintf(tw, "admin\t%s\n", admin)
	fmt.Fprintf(tw, "tools\t%d\n", len(r.Tools))
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

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
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
