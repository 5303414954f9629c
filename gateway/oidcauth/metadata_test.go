package oidcauth_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
)

func TestMetadataNamesTheResourceAndItsIssuer(t *testing.T) {
	a, err := oidcauth.New(oidcauth.Config{
		Issuer: "https://login.example.com/", Audience: "https://gw.example.com/mcp", Tenant: "acme", Scopes: []string{"tools"},
	}, oidcauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.MetadataURL(), "https://gw.example.com/.well-known/oauth-protected-resource/mcp"; got != want {
		t.Fatalf("metadata URL %q, want %q (RFC 9728 section 3.1)", got, want)
	}
	rec := httptest.NewRecorder()
	a.MetadataHandler().ServeHTTP(rec, httptest.NewRequest("GET", oidcauth.WellKnownPath+"/mcp", nil))
	var got oidcauth.ResourceMetadata
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("metadata answer %q: %v", rec.Body, err)
	}
	if got.Resource != "https://gw.example.com/mcp" || len(got.AuthorizationServers) != 1 || got.AuthorizationServers[0] != "https://login.example.com/" ||
		fmt.Sprint(got.BearerMethodsSupported) != "[header]" || fmt.Sprint(got.ScopesSupported) != "[tools]" {
		t.Fatalf("metadata %+v", got)
	}
}

func ExampleChallenge() {
	url := "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
	fmt.Println(oidcauth.Challenge(url, nil))
	fmt.Println(oidcauth.Challenge(url, fmt.Errorf("%w: expired", oidcauth.ErrInvalidToken)))
	fmt.Println(oidcauth.Challenge(url, errors.New("store down")))
	// Output:
	// Bearer realm="toolgateway", resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"
	// Bearer realm="toolgateway", resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token"
	// Bearer realm="toolgateway", resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"
}
