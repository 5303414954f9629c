// Package console is the operator console: a server-rendered web UI on the
// admin listener (/console/) for the people who answer approvals, resolve
// uncertain calls, read receipts and watch tools. It ships inside the
// binary (templates, CSS and a few lines of plain JavaScript embedded), and
// talks to the gateway only through [Backend], an interface it defines and
// the gateway implements over its store and its own validation.
package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// Backend is what the console reads and changes. The gateway implements it
// over its idempotency store (approvals, records), its receipts store and
// its own counters; every call is bounded (one page at a time).
type Backend interface {
	// ListApprovals, GetApproval and DecideApproval are the store's
	// [idempotency.Approvals].
	ListApprovals(ctx context.Context, filter idempotency.ApprovalFilter) (idempotency.Page, error)
	GetApproval(ctx context.Context, id string) (idempotency.Record, error)
	// DecideApproval decides as the principal of ctx (principal.FromContext,
	// with its claims); decision.By is its id. A decision the rules refuse
	// is a *RefusedError.
	DecideApproval(ctx context.Context, id string, decision idempotency.ApprovalDecision) (idempotency.Record, error)
	// ListRecords is the store's [idempotency.Admin.List].
	ListRecords(ctx context.Context, filter idempotency.ListFilter) (idempotency.Page, error)
	// FindRecord returns the record of tool whose idempotency key hashes
	// to keyHash ([receipts.KeyHash]), with its response when completed and
	// its canonical arguments while it has them; [idempotency.ErrNotFound]
	// when there is none.
	FindRecord(ctx context.Context, tool, keyHash string) (idempotency.Record, error)
	// FindExecution returns the record of an execution id, with its
	// canonical arguments while it has them.
	FindExecution(ctx context.Context, executionID string) (idempotency.Record, error)
	// Resolve completes an uncertain record with res after validating it
	// exactly as the admin API does; a resolution that does not validate
	// is an error wrapping [ErrInvalidResolution] and changes nothing.
	Resolve(ctx context.Context, scope idempotency.Scope, res Resolution) (idempotency.Record, error)
	// Delete removes a record (resolved as not executed: the next call
	// runs the tool).
	Delete(ctx context.Context, rec idempotency.Record, by string) error
	// Receipts lists one page of a tenant's receipts ([receipts.Store.List]);
	// [ErrReceiptsOff] when the gateway keeps none.
	Receipts(ctx context.Context, filter receipts.Filter) ([]receipts.Receipt, int64, error)
	// ReceiptChains names every tenant's chain and its verification state;
	// [ErrReceiptsOff] when the gateway keeps none.
	ReceiptChains(ctx context.Context) ([]ChainState, error)
	// Tools reports every configured tool's policy and counters.
	Tools(ctx context.Context) ([]ToolStats, error)
	// ToolChange returns an MCP upstream tool's pinned and current
	// definitions; [pins.ErrUnknownTool] when no pinned tool has that name.
	ToolChange(ctx context.Context, tool string) (pins.Change, error)
	// AcceptTool pins tool's current definition, if its hash is sha256
	// (the one the operator reviewed), by by, and leaves a tool_accepted
	// receipt as the admin API's accept does; the errors of
	// [pins.Keeper.Accept].
	AcceptTool(ctx context.Context, tool, sha256, by string) (pins.Status, error)
	// ApprovalRule returns the decide rule an approval was asked by (the
	// tool's rule at index), as the tool is configured now; binding is the
	// approval's ([idempotency.Approval.Binding]).
	ApprovalRule(tool string, index int, binding string) ApprovalRule
}

// ApprovalRule is the rule that asked for an approval, as configured now.
type ApprovalRule struct {
	// Rule is the rule; Found is false when the tool has no such rule now.
	Rule  decide.Rule
	Found bool
	// Changed: the tool's decide rules are no longer those the approval
	// was asked under, so Rule may not be the one that asked, and an
	// approval given now is void at use (approval_stale). False when the
	// store keeps no binding to tell.
	Changed bool
}

// Resolution is an operator's resolve-as-committed form: the response the
// tool gave, as the admin API's resolve body takes it (Body is JSON text
// for a JSON content type, plain text otherwise).
type Resolution struct {
	Status      int
	ContentType string
	Body        string
	// By is the signed-in operator, for the record's receipt.
	By string
}

// ChainState is one tenant's receipt chain as the console shows it.
type ChainState struct {
	Tenant string
	// Head is the seq of the chain's last verified receipt: where the
	// newest-first timeline starts looking.
	Head int64
	// Receipts is how many receipts were verified; Verified is true when
	// the chain is intact, else Problem names the first bad receipt.
	Receipts int64
	Verified bool
	Problem  string
	// Checkpoint is the chain's latest signed checkpoint, verified with
	// the gateway's public keys and against the chain (Seq 0: none);
	// AnchoredAt is when a TSA stamped it (zero: not anchored).
	// Unverifiable: the chain has checkpoints but the gateway has no
	// public key to check them with.
	Checkpoint   receipts.Checkpoint
	AnchoredAt   time.Time
	Unverifiable bool
}

// ToolStats is one tool as the Tools page shows it, from the gateway's
// own counters since it started.
type ToolStats struct {
	Name string
	// Policy is the tool's policy laid out as lines ("timeout: 30s").
	Policy []string
	// Decisions counts enforced decisions by kind (allow, approve, deny);
	// Observed the decisions of mode: observe (not enforced: the call ran
	// as allowed).
	Decisions, Observed map[string]float64
	// Executions counts the tool's runs, once per time it was called
	// (a retry that replays or is refused adds none), UNKNOWN outcomes
	// included: ExecutionsUnknown of them were left UNKNOWN. Replays
	// counts the calls answered from a record.
	Executions, ExecutionsUnknown, Replays float64
	// P50 and P99 are latency quantiles of its calls (zero: no calls).
	P50, P99 time.Duration
	// Pin is an MCP upstream tool's pin (nil for other tools).
	Pin *pins.Status
}

// Errors a [Backend] returns that the console shows as such.
var (
	// ErrInvalidResolution: a resolution that does not validate.
	ErrInvalidResolution = errors.New("console: invalid resolution")
	// ErrReceiptsOff: the gateway keeps no receipts.
	ErrReceiptsOff = errors.New("console: receipts are not enabled")
)

// Options configure the console.
type Options struct {
	// Authenticate checks a submitted admin token; true when it is one the
	// gateway accepts now (rotation included).
	Authenticate func(token string) bool
	// SessionKeys returns the keys that sign session cookies, the OIDC
	// attempt cookie and (through the session) the CSRF tokens: the first
	// signs, every one is accepted. They must come from a secret nothing
	// in the configuration file derives (console.session_key_file): a key
	// derived from the admin token's hash would let anyone who reads the
	// file forge a session. Replicas that share the keys accept each
	// other's cookies. It is called per request, so a reload takes effect
	// at once.
	SessionKeys func() [][]byte
	// SessionTTL is how long a sign-in lasts; 0 means 8 hours.
	SessionTTL time.Duration
	// Secure marks cookies Secure even on plain HTTP (TLS terminated in
	// front of the gateway: console.secure_cookies); on a TLS connection
	// they always are.
	Secure bool
	// TokenSignInOff turns the admin-token sign-in off: the page offers
	// only the identity provider, and a POST of the form signs nobody in.
	TokenSignInOff bool
	// PageSize bounds every list the console shows; 0 means 50.
	PageSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives the console's errors; nil discards them.
	Log *slog.Logger
	// OIDC, when set, adds sign-in through the identity provider beside
	// the admin token.
	OIDC *OIDC
}

// Base is the path the console is mounted at.
const Base = "/console"

// Console serves the console's pages.
type Console struct {
	backend Backend
	opts    Options
	pages   *pages
	// oidc is the identity provider's client; nil without [Options.OIDC].
	oidc *oidcClient
	// throttle limits sign-in attempts per client address.
	throttle *throttle
}

// New returns the console's handler, to be mounted at [Base] on the admin
// listener.
func New(backend Backend, opts Options) http.Handler {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 8 * time.Hour
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 50
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Console{backend: backend, opts: opts, pages: mustParsePages(), throttle: newThrottle()}
	if opts.OIDC != nil {
		c.oidc = &oidcClient{cfg: *opts.OIDC}
		if c.oidc.cfg.HTTPClient == nil {
			c.oidc.cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
		}
	}
	routes := c.routes()
	// The console routes on the full path wherever it is mounted: drop a
	// router context the mounting router left, so its own starts fresh.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		routes.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, nil)))
	})
}

// routes wires the pages: sign-in is open, everything else needs a
// session, and every POST needs its CSRF token.
func (c *Console) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	r.Handle(Base+"/static/*", http.StripPrefix(Base, http.FileServerFS(assetFS)))
	r.Get(Base+"/signin", c.handleSignInPage)
	r.Post(Base+"/signin", c.handleSignIn)
	if c.oidc != nil {
		r.Get(Base+"/oidc/start", c.handleOIDCStart)
		r.Get(Base+"/oidc/callback", c.handleOIDCCallback)
	}
	r.Group(func(r chi.Router) {
		r.Use(c.requireSession)
		r.Get(Base, redirectTo(Base+"/approvals"))
		r.Get(Base+"/", redirectTo(Base+"/approvals"))
		r.Post(Base+"/signout", c.handleSignOut)
		r.Get(Base+"/approvals", c.handleApprovals)
		r.Get(Base+"/approvals/pending", c.handlePendingFragment)
		r.Get(Base+"/approvals/{id}", c.handleApproval)
		r.Post(Base+"/approvals/{id}/decide", c.handleDecide)
		r.Get(Base+"/records/{tool}/{key_hash}", c.handleRecord)
		r.Get(Base+"/uncertain", c.handleUncertain)
		r.Get(Base+"/uncertain/{execution_id}", c.handleUncertainRecord)
		r.Post(Base+"/uncertain/{execution_id}/resolve", c.handleResolve)
		r.Get(Base+"/receipts", c.handleReceipts)
		r.Get(Base+"/receipts/{tenant}/{seq}", c.handleReceipt)
		r.Get(Base+"/tools", c.handleTools)
		r.Get(Base+"/tools/{tool}", c.handleToolChange)
		r.Post(Base+"/tools/{tool}/accept", c.handleAcceptTool)
		r.Get(Base+"/budgets", c.handleBudgets)
	})
	return r
}

// securityHeaders keeps the pages in their own frame and origin: no
// framing (clickjacking), no inline script (the CSP allows only the
// console's own files), no referrer leaking paths.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func redirectTo(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, path, http.StatusSeeOther)
	}
}

// RefusedError is a decision the gateway refused before the store saw it
// (not an approver, self-approval, a bad note): the page shows Message
// with Status.
type RefusedError struct {
	Status  int
	Message string
}

// Error is the message.
func (e *RefusedError) Error() string { return e.Message }
