package oidcauth

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// Config is the `auth.oidc` section of the gateway's configuration.
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document is at
	// Issuer + "/.well-known/openid-configuration" and every token's iss
	// must equal it.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Audience must be one of every token's aud values: the gateway's
	// resource identifier (for MCP hosts, the URL of its /mcp endpoint).
	Audience string `yaml:"audience" json:"audience"`
	// TenantClaim names the claim whose value is the caller's tenant
	// (e.g. org_id). Exactly one of TenantClaim and Tenant is set.
	TenantClaim string `yaml:"tenant_claim" json:"tenant_claim,omitempty"`
	// Tenant is the fixed tenant of every token of this issuer.
	Tenant string `yaml:"tenant" json:"tenant,omitempty"`
	// Resource is the resource identifier the protected resource metadata
	// names (default: Audience).
	Resource string `yaml:"resource" json:"resource,omitempty"`
	// Scopes are the scopes the metadata lists as supported (optional).
	Scopes []string `yaml:"scopes" json:"scopes,omitempty"`
}

// tenantPattern is the tenant name rule of the gateway (a tenant name is
// part of every record's scope and every log line).
var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidTenant reports whether name is a tenant name the gateway accepts.
func ValidTenant(name string) bool { return tenantPattern.MatchString(name) }

// Validate refuses a configuration the gateway could not enforce. Errors
// start with the field's name below `auth.oidc`.
func (c Config) Validate() error {
	if err := absoluteURL(c.Issuer); err != nil {
		return fmt.Errorf("issuer: %w", err)
	}
	if c.Audience == "" {
		return errors.New("audience: required (the gateway's resource identifier, e.g. https://gateway.example.com/mcp)")
	}
	switch {
	case c.TenantClaim == "" && c.Tenant == "":
		return errors.New("tenant_claim or tenant: one is required")
	case c.TenantClaim != "" && c.Tenant != "":
		return errors.New("tenant_claim and tenant: set one, not both")
	case c.Tenant != "" && !ValidTenant(c.Tenant):
		return fmt.Errorf("tenant: %q must match %s", c.Tenant, tenantPattern)
	}
	if c.Resource != "" {
		if err := absoluteURL(c.Resource); err != nil {
			return fmt.Errorf("resource: %w", err)
		}
	}
	return nil
}

// resource is the resource identifier the metadata names.
func (c Config) resource() string {
	if c.Resource != "" {
		return c.Resource
	}
	return c.Audience
}

func absoluteURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return nil
}

// Defaults of [Options].
const (
	DefaultMaxTokenBytes      = 16 << 10
	DefaultMinRefreshInterval = time.Second
	DefaultRediscoverInterval = 5 * time.Second
	DefaultExpirySkew         = 30 * time.Second
	DefaultCacheEntries       = 10000
)
