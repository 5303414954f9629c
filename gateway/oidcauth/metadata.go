package oidcauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// WellKnownPath is where RFC 9728 puts protected resource metadata; a
// resource with a path (https://gw.example.com/mcp) has its own below it
// (/.well-known/oauth-protected-resource/mcp).
const WellKnownPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the RFC 9728 protected resource metadata document.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata returns the document this gateway serves: the resource, and the
// issuer as its one authorization server.
func (a *Authenticator) Metadata() ResourceMetadata {
	return ResourceMetadata{
		Resource:               a.cfg.resource(),
		AuthorizationServers:   []string{a.cfg.Issuer},
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        a.cfg.Scopes,
		ResourceName:           "toolgateway",
	}
}

// MetadataURL is the URL of the metadata of the configured resource, as
// RFC 9728 section 3.1 forms it: the well-known path inserted between the
// resource's host and its path. It is built from the configuration, never
// from a request's Host header.
func (a *Authenticator) MetadataURL() string {
	u, err := url.Parse(a.cfg.resource())
	if err != nil { // Validate parsed it
		return ""
	}
	u.Path = WellKnownPath + strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// MetadataHandler serves [Authenticator.Metadata] as JSON.
func (a *Authenticator) MetadataHandler() http.Handler {
	body, _ := json.Marshal(a.Metadata())
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(body)
	})
}

// Challenge is the WWW-Authenticate value of a 401: Bearer, with the
// metadata URL so MCP hosts find where to sign in, and error="invalid_token"
// when a token was sent and refused (RFC 6750 section 3.1). It carries no
// description: the reason goes to the log, not to the caller.
func Challenge(metadataURL string, err error) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="toolgateway"`)
	if metadataURL != "" {
		b.WriteString(`, resource_metadata="` + metadataURL + `"`)
	}
	if errors.Is(err, ErrInvalidToken) {
		b.WriteString(`, error="invalid_token"`)
	}
	return b.String()
}
