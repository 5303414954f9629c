package callpath

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/tools"
)

// Settings are the parts of a running gateway's Options that Reload can
// change: who may call (tenants and their tokens, the admin token), the
// tenants' limits, and the tools' execution policies. Everything else of
// Options is fixed for the gateway's life.
type Settings struct {
	// Tenants replaces Options.Tenants. A gateway built without tenants
	// (no auth) must stay without, and one built with them must keep at
	// least one: turning auth on or off changes the tenant, hence the
	// record scope, of every caller, which is a restart's decision.
	Tenants []Tenant
	// AdminTokenSHA256 replaces Options.AdminTokenSHA256 (a rotation). It
	// must stay nil when it was nil, and non-nil when it was not: the admin
	// routes are mounted once.
	AdminTokenSHA256 *[sha256.Size]byte
	// AdminPreviousTokenSHA256 replaces Options.AdminPreviousTokenSHA256:
	// the admin token being rotated out, still accepted (nil: none).
	AdminPreviousTokenSHA256 *[sha256.Size]byte
	// Policies replaces Options.Policies. A policy may name a tool the
	// registry does not hold (yet): it applies when the tool appears, which
	// lets the caller install a new tool's policy before the tool itself.
	Policies map[string]tools.Policy
	// ReplayTTL replaces Options.ReplayTTL (0: the default).
	ReplayTTL time.Duration
	// OIDC replaces Options.OIDC (auth with only an identity provider
	// counts as auth on: it must stay on).
	OIDC TokenVerifier
	// ProviderLimits replaces Options.ProviderLimits.
	ProviderLimits TenantLimits
	// Decisions replaces Options.Decisions; the next decision of every
	// call uses them, the consumption of an approval granted under the
	// old rules included.
	Decisions map[string]*decide.Policy
	// Budgets replaces Options.Budgets: a changed limit applies to the
	// next reservation; a removed budget releases nothing (what its
	// records hold stays held in the store until they are settled).
	Budgets *budgets.Set
	// Mode replaces Options.Mode.
	Mode decide.Mode
	// Approvals replaces Options.Approvals.
	Approvals ApprovalSettings
	// KeepArguments replaces Options.KeepArguments: calls claimed after
	// the reload follow it.
	KeepArguments bool
}

// settings is one immutable snapshot of the reloadable state. The call path
// loads it once per use with one atomic load; Reload publishes a new one
// with one atomic store, so a request sees the old settings or the new
// ones, never a mix, and a call in flight keeps what it already read (its
// claim carries its policy).
type settings struct {
	// tenants are checked by authenticate, in order.
	tenants []Tenant
	// admin holds the admin API's accepted token hashes: the current one
	// first, then the previous one during a rotation.
	admin []*[sha256.Size]byte
	// limits holds the tenants that have limits, by name.
	limits    map[string]TenantLimits
	policies  map[string]tools.Policy
	replayTTL time.Duration
	// oidc checks the identity provider's tokens (nil: none).
	oidc TokenVerifier
	// providerLimits are the limits of a provider's tenant that tenants
	// does not list; static names the tenants listed.
	providerLimits TenantLimits
	static         map[string]bool
	// decisions are the tools' decide rules (only tools that have some);
	// mode and approvals as Settings says (decide.go).
	decisions map[string]*decide.Policy
	mode      decide.Mode
	approvals ApprovalSettings
	// effectKeys are the policies' effect_key templates, compiled, by text.
	effectKeys map[string]*EffectKey
	// budgets are the budgets and the tools' charges (budget.go).
	budgets *budgets.Set
	// keepArguments: completed records keep their canonical arguments
	// (Lease.KeepArguments).
	keepArguments bool
}

// authOn reports whether callers must authenticate: static tenants, an
// identity provider, or both.
func authOn(s *settings) bool { return len(s.tenants) > 0 || s.oidc != nil }

// newSettings checks set and builds its snapshot (copies, so the caller may
// reuse what it passed).
func newSettings(set Settings) (*settings, error) {
	if err := ValidateAuth(set.Tenants, set.AdminTokenSHA256, set.AdminPreviousTokenSHA256); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := set.ProviderLimits.checkLimits(); err != nil {
		return nil, fmt.Errorf("gateway: auth.oidc.%w", err)
	}
	effectKeys := map[string]*EffectKey{}
	for name, p := range set.Policies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("gateway: tool %q: %w", name, err)
		}
		if p.EffectKey != "" {
			k, err := CompileEffectKey(p.EffectKey)
			if err != nil {
				return nil, fmt.Errorf("gateway: tool %q: effect_key: %w", name, err)
			}
			effectKeys[p.EffectKey] = k
		}
	}
	mode, err := decide.ParseMode(string(set.Mode))
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if set.Approvals.Timeout < 0 || set.Approvals.UseWithin < 0 {
		return nil, fmt.Errorf("gateway: approvals timeout %v and use-within %v must not be negative", set.Approvals.Timeout, set.Approvals.UseWithin)
	}
	var admin []*[sha256.Size]byte
	for _, h := range []*[sha256.Size]byte{set.AdminTokenSHA256, set.AdminPreviousTokenSHA256} {
		if h != nil {
			sum := *h
			admin = append(admin, &sum)
		}
	}
	live := &settings{
		tenants:   slices.Clone(set.Tenants),
		admin:     admin,
		limits:    tenantLimits(set.Tenants),
		policies:  maps.Clone(set.Policies),
		replayTTL: orDefault(set.ReplayTTL, DefaultReplayTTL),
		oidc:      set.OIDC,
		static:    staticNames(set.Tenants),
		decisions: withRules(set.Decisions),
		mode:      mode,
		approvals: set.Approvals.withDefaults(),
		budgets:   set.Budgets,
	}
	live.effectKeys = effectKeys
	live.keepArguments = set.KeepArguments
	live.providerLimits = set.ProviderLimits
	return live, nil
}

// Reload replaces the engine's reloadable settings in one atomic step, or
// changes nothing and returns why. Requests that have not authenticated yet
// see the new tenants; calls that already claimed their record finish with
// the policy they claimed with. Limiter state is kept per tenant name: a
// tenant whose rate changed continues from its current state under the new
// rate, and in-flight slots taken before the reload are given back as usual.
func (s *Engine) Reload(set Settings) error {
	next, err := newSettings(set)
	if err != nil {
		return err
	}
	cur := s.settings.Load()
	for _, c := range wiredAtStart {
		if c.on(cur) != c.on(next) {
			return errors.New("gateway: reload: " + c.refusal)
		}
	}
	s.settings.Store(next)
	return nil
}

// wiredAtStart are the settings Reload can change in value but not turn on
// or off: authenticate and the admin routes are wired when the server is built, and
// turning auth on or off changes the tenant, hence the record scope, of
// every caller, which is a restart's decision. The one list of these
// rules: Reload refuses by it, FixedChanges names by it.
var wiredAtStart = []struct {
	field   string // as the config file names it, with why
	refusal string
	on      func(*settings) bool
}{
	{"auth (turning auth on or off)", "auth cannot be turned on or off at run time (restart the gateway)",
		authOn},
	{"admin (enabling or disabling the admin API)", "the admin API cannot be enabled or disabled at run time (restart the gateway)",
		func(s *settings) bool { return len(s.admin) > 0 }},
}

// FixedChanges names what of next Reload would refuse over running (auth
// or the admin API turned on or off), so a program can report it with
// its own fixed fields before applying anything.
func FixedChanges(running, next Settings) []string {
	shape := func(set Settings) *settings {
		s := &settings{tenants: set.Tenants, oidc: set.OIDC}
		if set.AdminTokenSHA256 != nil {
			s.admin = []*[sha256.Size]byte{set.AdminTokenSHA256}
		}
		return s
	}
	cur, nxt := shape(running), shape(next)
	var out []string
	for _, c := range wiredAtStart {
		if c.on(cur) != c.on(nxt) {
			out = append(out, c.field)
		}
	}
	return out
}

// withRules keeps the policies that have rules, so a call to a tool
// without any finds nothing (and a gateway without any, an empty map).
func withRules(all map[string]*decide.Policy) map[string]*decide.Policy {
	out := make(map[string]*decide.Policy, len(all))
	for name, p := range all {
		if p.Rules() > 0 {
			out[name] = p
		}
	}
	return out
}
