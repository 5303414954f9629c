package gatewaycmd

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/console"
)

// ConsoleConfig is the console section: the console itself is on whenever
// an admin token is (admin_listen's /console/).
type ConsoleConfig struct {
	// OIDC adds sign-in through the identity provider.
	OIDC *ConsoleOIDCConfig `yaml:"oidc"`
}

// ConsoleOIDCConfig is console.oidc: the console as a confidential client
// of the provider (authorization code + PKCE).
type ConsoleOIDCConfig struct {
	// Issuer defaults to auth.oidc.issuer.
	Issuer   string `yaml:"issuer"`
	ClientID string `yaml:"client_id"`
	// ClientSecretEnv names the environment variable holding the secret.
	ClientSecretEnv string `yaml:"client_secret_env"`
	// RedirectURL is https://<admin host>/console/oidc/callback, as
	// registered at the provider.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes asked for besides openid (default profile, email).
	Scopes []string `yaml:"scopes"`
	// Allow lists who may sign in: subjects or verified emails; empty
	// lets in every user of the issuer.
	Allow []string `yaml:"allow"`
}

// consoleOIDC checks console.oidc and returns the console's sign-in
// through the provider (nil without it).
func (c *Config) consoleOIDC() (*console.OIDC, error) {
	o := c.Console.OIDC
	if o == nil {
		return nil, nil
	}
	issuer := o.Issuer
	if issuer == "" && c.Auth != nil && c.Auth.OIDC != nil {
		issuer = c.Auth.OIDC.Issuer
	}
	if u, err := url.Parse(issuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("console.oidc.issuer: %q: want the provider's http(s) issuer URL (or set auth.oidc.issuer)", issuer)
	}
	if o.ClientID == "" {
		return nil, errors.New("console.oidc.client_id: name the console's client at the identity provider")
	}
	switch {
	case o.ClientSecretEnv == "":
		return nil, errors.New("console.oidc.client_secret_env: name the environment variable that holds the client secret")
	case c.consoleSecret == "":
		return nil, fmt.Errorf("console.oidc.client_secret_env: the environment variable %s is empty or unset", o.ClientSecretEnv)
	}
	if u, err := url.Parse(o.RedirectURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != console.Base+"/oidc/callback" {
		return nil, fmt.Errorf("console.oidc.redirect_url: %q: want http(s)://<admin host>%s/oidc/callback", o.RedirectURL, console.Base)
	}
	for i, a := range o.Allow {
		if strings.TrimSpace(a) == "" {
			return nil, fmt.Errorf("console.oidc.allow[%d]: empty: give a subject or an email", i)
		}
	}
	if c.Admin.TokenSHA256 == "" {
		return nil, errors.New("console.oidc: the console needs admin.token_sha256: the console is served only with an admin token, which signs its sessions")
	}
	return &console.OIDC{Issuer: issuer, ClientID: o.ClientID, ClientSecret: c.consoleSecret, RedirectURL: o.RedirectURL, Scopes: o.Scopes, Allow: o.Allow}, nil
}
