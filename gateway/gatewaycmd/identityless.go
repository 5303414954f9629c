package gatewaycmd

import (
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/mcpserver"
)

// identitylessOptions converts mcp.identityless, mcp.dedupe_window and
// each tool's identityless and dedupe_window (contract section 21).
//
// The default keeps every existing config working: fingerprint only
// where a person can be named (auth.oidc configured), refuse (today's
// -32602) otherwise. Fingerprint set explicitly where no person can ever
// be named (static tokens only, or no auth) is refused: one static token
// stands for whoever holds it, so keyed on it, two people's identical
// calls would be one call.
func (c *Config) identitylessOptions(o *mcpserver.Options) error {
	persons := c.Auth != nil && c.Auth.OIDC != nil
	mode := c.MCP.Identityless
	switch {
	case mode == "" && persons:
		mode = mcpserver.IdentitylessFingerprint
	case mode == "":
		mode = mcpserver.IdentitylessRefuse
	default:
		if err := mode.Validate(); err != nil {
			return fmt.Errorf("mcp.identityless: %w", err)
		}
		if err := fingerprintNeedsPersons("mcp.identityless", mode, persons); err != nil {
			return err
		}
	}
	o.Identityless = mcpserver.Identityless{Mode: mode, Window: time.Duration(c.MCP.DedupeWindow)}
	if c.MCP.DedupeWindow != 0 && time.Duration(c.MCP.DedupeWindow) < time.Second {
		return fmt.Errorf("mcp.dedupe_window: %s: at least 1s", time.Duration(c.MCP.DedupeWindow))
	}
	for i, t := range c.Tools {
		if t.Identityless == "" && t.DedupeWindow == 0 {
			continue
		}
		field := fmt.Sprintf("tools[%d] (%s)", i, t.Name)
		if t.Identityless != "" {
			if err := t.Identityless.Validate(); err != nil {
				return fmt.Errorf("%s.identityless: %w", field, err)
			}
			if err := fingerprintNeedsPersons(field+".identityless", t.Identityless, persons); err != nil {
				return err
			}
		}
		if t.DedupeWindow != 0 && time.Duration(t.DedupeWindow) < time.Second {
			return fmt.Errorf("%s.dedupe_window: %s: at least 1s", field, time.Duration(t.DedupeWindow))
		}
		if o.ToolIdentityless == nil {
			o.ToolIdentityless = make(map[string]mcpserver.Identityless)
		}
		o.ToolIdentityless[t.Name] = mcpserver.Identityless{Mode: t.Identityless, Window: time.Duration(t.DedupeWindow)}
	}
	return nil
}

// fingerprintNeedsPersons refuses fingerprint where no caller can be a
// person.
func fingerprintNeedsPersons(field string, mode mcpserver.IdentitylessMode, persons bool) error {
	if mode != mcpserver.IdentitylessFingerprint || persons {
		return nil
	}
	return fmt.Errorf("%s: fingerprint needs callers that are persons, signed in through auth.oidc; "+
		"with static tokens only (or no auth) one token stands for everyone who holds it, so two people's identical calls would be one call: configure auth.oidc, or use refuse", field)
}
