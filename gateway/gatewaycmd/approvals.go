package gatewaycmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/notify"
)

// The configuration of decisions: each tool's `decide` rules, the
// top-level `mode` and the `approvals` section (docs/approvals.md). The
// rules are compiled here, at load, so `gateway check`, start-up and a
// reload refuse a rule that does not compile, naming the tool and the
// rule's index with CEL's message.

// ApprovalsConfig is the approvals section.
type ApprovalsConfig struct {
	// Timeout is how long an approval may stay pending (default 24h).
	Timeout Duration `yaml:"timeout"`
	// UseWithin is how long an approved call may wait for its caller's
	// next call (default 1h).
	UseWithin Duration `yaml:"use_within"`
	// Notify, when set, pushes each new pending approval to a webhook.
	Notify *NotifyConfig `yaml:"notify"`
}

// NotifyConfig is approvals.notify: where new pending approvals are
// POSTed, signed with a secret read from the environment (never from the
// file).
type NotifyConfig struct {
	URL string `yaml:"url"`
	// SecretEnv names the environment variable holding the HMAC secret.
	SecretEnv string `yaml:"secret_env"`
	// ConsoleBaseURL, when set, makes each notification link the
	// approval's console page.
	ConsoleBaseURL string `yaml:"console_base_url"`
}

// buildDecisions compiles every tool's decide rules and reads mode and
// the approvals section.
func (c *Config) buildDecisions() (map[string]*decide.Policy, decide.Mode, callpath.ApprovalSettings, error) {
	var approvals callpath.ApprovalSettings
	mode, err := decide.ParseMode(c.Mode)
	if err != nil {
		return nil, "", approvals, fmt.Errorf("mode: %w", err)
	}
	decisions := make(map[string]*decide.Policy)
	for i, t := range c.Tools {
		if len(t.Decide) == 0 {
			continue
		}
		p, err := decide.Compile(t.Name, t.Decide)
		if err != nil {
			return nil, "", approvals, fmt.Errorf("tools[%d].decide: %w", i, err)
		}
		decisions[t.Name] = p
	}
	err = c.mcpToolSettings(func(e MCPServerEntry, tool, field string, s MCPToolSettings) error {
		if len(s.Decide) == 0 {
			return nil
		}
		name := e.Prefix + tool
		p, err := decide.Compile(name, s.Decide)
		if err != nil {
			return fmt.Errorf("%s.decide: %w", field, err)
		}
		decisions[name] = p
		return nil
	})
	if err != nil {
		return nil, "", approvals, err
	}
	approvals = callpath.ApprovalSettings{Timeout: time.Duration(c.Approvals.Timeout), UseWithin: time.Duration(c.Approvals.UseWithin)}
	if err := c.checkNotify(); err != nil {
		return nil, "", approvals, err
	}
	return decisions, mode, approvals, nil
}

// checkNotify checks approvals.notify: an http(s) URL and a secret found
// in the environment.
func (c *Config) checkNotify() error {
	n := c.Approvals.Notify
	if n == nil {
		return nil
	}
	if u, err := url.Parse(n.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("approvals.notify.url: %q: want an http(s) URL", n.URL)
	}
	if n.ConsoleBaseURL != "" {
		if u, err := url.Parse(n.ConsoleBaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("approvals.notify.console_base_url: %q: want an http(s) URL", n.ConsoleBaseURL)
		}
	}
	switch {
	case n.SecretEnv == "":
		return errors.New("approvals.notify.secret_env: name the environment variable that holds the signing secret")
	case c.notifySecret == "":
		return fmt.Errorf("approvals.notify.secret_env: the environment variable %s is empty or unset", n.SecretEnv)
	}
	return nil
}

// approvalNotifier starts the notifier of approvals.notify (nil without
// one); the caller closes it after the drain.
func (c *Config) approvalNotifier(log *slog.Logger) (*notify.Notifier, error) {
	n := c.Approvals.Notify
	if n == nil {
		return nil, nil
	}
	notifier, err := notify.New(notify.Config{URL: n.URL, Secret: []byte(c.notifySecret), ConsoleBaseURL: n.ConsoleBaseURL, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("approvals.notify: %w", err)
	}
	return notifier, nil
}
