package oidctest

import (
	"context"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Person is a user of the provider besides the example OP's own: they
// sign in at its login page with Username and Password, and their ID
// token and userinfo carry a `groups` claim with Groups, as an operator's
// provider (Keycloak, Okta, Entra ID) adds the groups a person is in.
type Person struct {
	Subject  string   `json:"subject"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Name     string   `json:"name"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
}

// GroupsClaim is the claim that lists a person's groups, what an
// approvers expression reads (`"finance" in claims.groups`).
const GroupsClaim = "groups"

// People are the provider's people with groups: two approvers in finance
// and one person outside it, so tests can have a requester, approvers
// who make a quorum and a non-approver, each signing in for themselves.
var People = []Person{
	{Subject: "ada", Username: "ada", Password: "ada-password", Name: "Ada Lovelace", Email: "ada@finance.example", Groups: []string{"finance"}},
	{Subject: "bob", Username: "bob", Password: "bob-password", Name: "Bob Okafor", Email: "bob@finance.example", Groups: []string{"finance", "audit"}},
	{Subject: "carol", Username: "carol", Password: "carol-password", Name: "Carol Diaz", Email: "carol@support.example", Groups: []string{"support"}},
}

// people is the example OP's user store with [People] added.
type people struct {
	storage.UserStore
	added map[string]*storage.User
}

func withPeople(base storage.UserStore) people {
	p := people{UserStore: base, added: map[string]*storage.User{}}
	for _, person := range People {
		first, last, _ := strings.Cut(person.Name, " ")
		p.added[person.Subject] = &storage.User{
			ID: person.Subject, Username: person.Username, Password: person.Password,
			FirstName: first, LastName: last, Email: person.Email, EmailVerified: true,
			PreferredLanguage: language.English,
		}
	}
	return p
}

func (p people) GetUserByID(id string) *storage.User {
	if u := p.added[id]; u != nil {
		return u
	}
	return p.UserStore.GetUserByID(id)
}

func (p people) GetUserByUsername(username string) *storage.User {
	for _, u := range p.added {
		if u.Username == username {
			return u
		}
	}
	return p.UserStore.GetUserByUsername(username)
}

// groupsOf returns the groups of the person with subject sub (nil for
// the example OP's own users).
func groupsOf(sub string) []string {
	i := slices.IndexFunc(People, func(p Person) bool { return p.Subject == sub })
	if i < 0 {
		return nil
	}
	return People[i].Groups
}

// SetUserinfoFromRequest puts the person's groups in their ID token (the
// example OP fills the rest).
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	if groups := groupsOf(req.GetSubject()); groups != nil {
		info.AppendClaims(GroupsClaim, groups)
	}
	return nil
}

// SetUserinfoFromToken puts the person's groups in their userinfo too.
func (s *store) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	if groups := groupsOf(subject); groups != nil {
		info.AppendClaims(GroupsClaim, groups)
	}
	return nil
}
