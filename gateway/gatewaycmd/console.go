package gatewaycmd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/console"
)

// ConsoleConfig is the console section: the console itself is on whenever
// an admin token is (admin_listen's /console/).
type ConsoleConfig struct {
	// OIDC adds sign-in through the identity provider.
	OIDC *ConsoleOIDCConfig `yaml:"oidc"`
	// SessionKeyFile holds the keys that sign the console's sessions and
	// CSRF tokens, one per line (console.ParseSessionKeys); relative to
	// the config file. TOOLGATEWAY_CONSOLE_SESSION_KEY may hold them
	// instead. Neither: a random key per process.
	SessionKeyFile string `yaml:"session_key_file"`
	// SecureCookies marks the console's cookies Secure on plain HTTP too
	// (TLS terminated by a proxy in front of the gateway).
	SecureCookies bool `yaml:"secure_cookies"`
	// TokenSignIn offers sign-in with the admin token; default true
	// without console.oidc, false with it.
	TokenSignIn *bool `yaml:"token_sign_in"`
}

// consoleOptions are the console's settings from the console section
// (and its key file or variable).
func (c *Config) consoleOptions() (gateway.ConsoleOptions, error) {
	oidc, err := c.consoleOIDC()
	if err != nil {
		return gateway.ConsoleOptions{}, err
	}
	keys, err := c.consoleSessionKeys()
	if err != nil {
		return gateway.ConsoleOptions{}, err
	}
	tokenSignIn, err := c.consoleTokenSignIn()
	if err != nil {
		return gateway.ConsoleOptions{}, err
	}
	return gateway.ConsoleOptions{OIDC: oidc, SessionKeys: keys, SecureCookies: c.Console.SecureCookies, TokenSignInOff: !tokenSignIn}, nil
}

// consoleSessionKeys reads the console's session keys from
// console.session_key_file or TOOLGATEWAY_CONSOLE_SESSION_KEY (nil when
// neither is set). A reload reads the file again.
func (c *Config) consoleSessionKeys() ([][]byte, error) {
	file, env := c.Console.SessionKeyFile, c.consoleSessionKeyEnv
	switch {
	case file != "" && env != "":
		return nil, fmt.Errorf("console.session_key_file and %s are both set: give the keys in one place", gateway.ConsoleSessionKeyEnv)
	case env != "":
		keys, err := console.ParseSessionKeys(env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gateway.ConsoleSessionKeyEnv, err)
		}
		return keys, nil
	case file != "":
		raw, err := os.ReadFile(c.path(file))
		if err != nil && c.secretsOptional && errors.Is(err, fs.ErrNotExist) {
			c.missingSecrets = append(c.missingSecrets, "console.session_key_file "+c.path(file)+" does not exist here; the gateway needs it to start")
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("console.session_key_file: %w", err)
		}
		keys, err := console.ParseSessionKeys(string(raw))
		if err != nil {
			return nil, fmt.Errorf("console.session_key_file %s: %w", c.path(file), err)
		}
		return keys, nil
	}
	return nil, nil
}

// consoleTokenSignIn reports whether the console offers the admin-token
// sign-in: console.token_sign_in, by default on only without console.oidc.
func (c *Config) consoleTokenSignIn() (bool, error) {
	on := c.Console.OIDC == nil
	if c.Console.TokenSignIn != nil {
		on = *c.Console.TokenSignIn
	}
	if !on && c.Console.OIDC == nil {
		return false, errors.New("console.token_sign_in: false without console.oidc leaves no way to sign in to the console: configure console.oidc or remove token_sign_in")
	}
	return on, nil
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
	case c.consoleSecret == "" && c.secretsOptional:
		c.missingSecrets = append(c.missingSecrets, "console.oidc.client_secret_env: "+o.ClientSecretEnv+" is empty or unset here; the gateway needs it to start")
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
		return nil, errors.New("console.oidc: the console needs admin.token_sha256: the console is served only with an admin token")
	}
	return &console.OIDC{Issuer: issuer, ClientID: o.ClientID, ClientSecret: c.consoleSecret, RedirectURL: o.RedirectURL, Scopes: o.Scopes, Allow: o.Allow}, nil
}
