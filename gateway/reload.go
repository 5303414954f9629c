package gateway

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// Settings are the parts of a running Server's Options that Reload can
// change: who may call (tenants and their tokens, the admin token), the
// tenants' limits, and the tools' execution policies. Everything else of
// Options is fixed for the Server's life.
type Settings struct {
	// Tenants replaces Options.Tenants. A Server built without tenants
	// (no auth) must stay without, and one built with them must keep at
	// least one: turning auth on or off changes the tenant, hence the
	// record scope, of every caller, which is a restart's decision.
	Tenants []Tenant
	// AdminTokenSHA256 replaces Options.AdminTokenSHA256 (a rotation). It
	// must stay nil when it was nil, and non-nil when it was not: the admin
	// routes are mounted once.
	AdminTokenSHA256 *[sha256.Size]byte
	// Policies replaces Options.Policies. A policy may name a tool the
	// registry does not hold (yet): it applies when the tool appears, which
	// lets the caller install a new tool's policy before the tool itself.
	Policies map[string]tools.Policy
	// ReplayTTL replaces Options.ReplayTTL (0: the default).
	ReplayTTL time.Duration
}

// settings is one immutable snapshot of the reloadable state. The call path
// loads it once per use with one atomic load; Reload publishes a new one
// with one atomic store, so a request sees the old settings or the new
// ones, never a mix, and a call in flight keeps what it already read (its
// claim carries its policy).
type settings struct {
	// tenants are checked by authenticate, in order.
	tenants []Tenant
	admin   *[sha256.Size]byte
	// limits holds the tenants that have limits, by name.
	limits    map[string]TenantLimits
	policies  map[string]tools.Policy
	replayTTL time.Duration
}

// newSettings checks set and builds its snapshot (copies, so the caller may
// reuse what it passed).
func newSettings(set Settings) (*settings, error) {
	if err := ValidateAuth(set.Tenants, set.AdminTokenSHA256); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := checkTenantLimits(set.Tenants); err != nil {
		return nil, err
	}
	for name, p := range set.Policies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("gateway: tool %q: %w", name, err)
		}
	}
	var admin *[sha256.Size]byte
	if set.AdminTokenSHA256 != nil {
		sum := *set.AdminTokenSHA256
		admin = &sum
	}
	return &settings{
		tenants:   slices.Clone(set.Tenants),
		admin:     admin,
		limits:    tenantLimits(set.Tenants),
		policies:  maps.Clone(set.Policies),
		replayTTL: orDefault(set.ReplayTTL, DefaultReplayTTL),
	}, nil
}

// Reload replaces the Server's reloadable settings in one atomic step, or
// changes nothing and returns why. Requests that have not authenticated yet
// see the new tenants; calls that already claimed their record finish with
// the policy they claimed with. Limiter state is kept per tenant name: a
// tenant whose rate changed continues from its current state under the new
// rate, and in-flight slots taken before the reload are given back as usual.
func (s *Server) Reload(set Settings) error {
	next, err := newSettings(set)
	if err != nil {
		return err
	}
	// authenticate and the admin routes were wired at NewServer.
	cur := s.settings.Load()
	switch {
	case (len(cur.tenants) > 0) != (len(next.tenants) > 0):
		return errors.New("gateway: reload: auth cannot be turned on or off at run time (restart the gateway)")
	case (cur.admin != nil) != (next.admin != nil):
		return errors.New("gateway: reload: the admin API cannot be enabled or disabled at run time (restart the gateway)")
	}
	s.settings.Store(next)
	return nil
}
