// Package principal names who is behind a tool call, an approval's
// decision or an operator's resolve: a person signed in through an
// identity provider, or a static token. Its ids are what records,
// approvals and receipts keep (contract section 19):
//
//   - oidc:<issuer host>:<sub> — a person signed in to the console through
//     its identity provider (console.oidc);
//   - host-user:<issuer host>:<sub> — a person signed in at an MCP host (or
//     any client) whose provider access token the tool API verified
//     (oidc: in gateway.yaml): the token was issued to the host on the
//     person's behalf, so the principal is the person, seen through the
//     host;
//   - token:<name> — a static token, named by its configuration name, never
//     its value or hash: a tenant's token is token:<tenant name> (tenant
//     tokens have no name of their own), the admin token is token:admin.
//
// Ids are compared whole: the issuer host may carry a port and a subject
// may hold ':', so an id is never split into host and subject again.
// The package imports nothing of the gateway: the engine, the doors, the
// console and the decision rules all use it alike.
package principal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is the kind of a principal, its id's prefix.
type Kind string

// The principal kinds.
const (
	// KindOIDC is a person signed in to the console through its provider.
	KindOIDC Kind = "oidc"
	// KindHostUser is a person whose provider access token an MCP host (or
	// another client) presented to the tool API.
	KindHostUser Kind = "host-user"
	// KindToken is a static token: a tenant's or the admin's.
	KindToken Kind = "token"
)

// AdminTokenName is the name of the admin token's principal (token:admin).
const AdminTokenName = "admin"

// MaxIDBytes bounds a principal id: ids are kept with records, approvals
// and receipts, and a provider's subject is at most 255 ASCII characters
// (OpenID Connect Core 1.0, section 2).
const MaxIDBytes = 1024

// Principal is who made a call or a decision.
type Principal struct {
	// ID is the principal's id (see the package comment): what is recorded
	// and compared.
	ID string
	// Name is the display name: a token's name, preferred_username or email
	// claim for a person; the token's name for a static token. Shown beside
	// the id, never compared.
	Name string
	// Kind is the id's kind.
	Kind Kind
	// Claims are the verified token's claims of a person (nil for a static
	// token): what a decide rule's approvers expression reads.
	Claims map[string]any
}

// Admin is the admin token's principal.
var Admin = Token(AdminTokenName)

// Token is the principal of the static token named name (a tenant's name,
// or AdminTokenName).
func Token(name string) Principal {
	return Principal{ID: string(KindToken) + ":" + name, Name: name, Kind: KindToken}
}

// OIDC is the principal of a person signed in to the console through the
// provider issuer, with subject sub; name is the display name, claims the
// verified ID token's claims.
func OIDC(issuer, sub, name string, claims map[string]any) (Principal, error) {
	return person(KindOIDC, issuer, sub, name, claims)
}

// HostUser is the principal of a person whose access token, issued by
// issuer for subject sub, a client presented to the tool API.
func HostUser(issuer, sub, name string, claims map[string]any) (Principal, error) {
	return person(KindHostUser, issuer, sub, name, claims)
}

func person(kind Kind, issuer, sub, name string, claims map[string]any) (Principal, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return Principal{}, fmt.Errorf("principal: issuer %q has no host", issuer)
	}
	if sub == "" {
		return Principal{}, errors.New("principal: the token has no sub")
	}
	p := Principal{ID: string(kind) + ":" + strings.ToLower(u.Host) + ":" + sub, Name: name, Kind: kind, Claims: claims}
	if err := Validate(p.ID); err != nil {
		return Principal{}, err
	}
	if p.Name == "" {
		p.Name = sub
	}
	return p, nil
}

// IsPerson reports whether p is a person (signed in through an identity
// provider), not a static token: only a person decides an approval whose
// rule says approver: caller.
func (p Principal) IsPerson() bool {
	return p.Kind == KindOIDC || p.Kind == KindHostUser
}

// IsZero reports whether p names no one (an unauthenticated request).
func (p Principal) IsZero() bool { return p.ID == "" }

// String is the principal's id.
func (p Principal) String() string { return p.ID }

// KindOf returns the kind of a principal id, checking it as Validate does.
func KindOf(id string) (Kind, error) {
	if err := Validate(id); err != nil {
		return "", err
	}
	k, _, _ := strings.Cut(id, ":")
	return Kind(k), nil
}

// Validate checks a principal id: a known kind, a non-empty rest (host and
// subject for a person), valid UTF-8 without control or format characters
// (an id is shown to operators), at most MaxIDBytes.
func Validate(id string) error {
	if len(id) > MaxIDBytes {
		return fmt.Errorf("principal: id above %d bytes", MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return errors.New("principal: id is not UTF-8")
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("principal: id holds the invisible character %U", r)
		}
	}
	kind, rest, ok := strings.Cut(id, ":")
	if !ok || rest == "" {
		return fmt.Errorf("principal: %q is not <kind>:<name>", id)
	}
	switch Kind(kind) {
	case KindToken:
		return nil
	case KindOIDC, KindHostUser:
		host, sub, ok := cutHost(rest)
		if !ok || host == "" || sub == "" {
			return fmt.Errorf("principal: %q is not %s:<issuer host>:<sub>", id, kind)
		}
		return nil
	}
	return fmt.Errorf("principal: unknown kind %q (want %s, %s or %s)", kind, KindOIDC, KindHostUser, KindToken)
}

// cutHost splits "<host>:<sub>" where host may carry a port: a port is
// all digits, so a host's second ':'-field of digits followed by a third
// field is the port.
func cutHost(rest string) (host, sub string, ok bool) {
	host, sub, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", false
	}
	if port, after, more := strings.Cut(sub, ":"); more && port != "" && strings.Trim(port, "0123456789") == "" {
		return host + ":" + port, after, true
	}
	return host, sub, true
}

// contextKey carries a Principal in a context.
type contextKey struct{}

// NewContext returns ctx carrying p: what an authenticating surface (the
// tool API's auth, the admin token's, the console's sign-in) tells what
// runs after it.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// FromContext returns the principal ctx carries (zero: none).
func FromContext(ctx context.Context) Principal {
	p, _ := ctx.Value(contextKey{}).(Principal)
	return p
}

// Same reports whether ids a and b name the same principal: equal ids, or
// the same person seen through the console (oidc:) and through an MCP host
// (host-user:) — same issuer host and subject — so a requester cannot
// approve their own call by signing in elsewhere.
func Same(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return a == b || personPart(a) != "" && personPart(a) == personPart(b)
}

// personPart is "<issuer host>:<sub>" of a person's id, "" otherwise.
func personPart(id string) string {
	kind, rest, _ := strings.Cut(id, ":")
	if Kind(kind) == KindOIDC || Kind(kind) == KindHostUser {
		return rest
	}
	return ""
}
