package gateway

import "github.com/toolgateway/toolgateway/gateway/callpath"

// The engine's names as this package has always offered them, so a custom
// binary (examples/plugin) and the packages that wire a gateway keep
// building: each is defined once, in gateway/callpath.

// Configuration.
type (
	// Options configure a Server ([callpath.Options]).
	Options = callpath.Options
	// Settings are what Server.Reload changes ([callpath.Settings]).
	Settings = callpath.Settings
	// Tenant is one caller allowed in ([callpath.Tenant]).
	Tenant = callpath.Tenant
	// TenantLimits are a tenant's rate and in-flight limits.
	TenantLimits = callpath.TenantLimits
	// TokenVerifier verifies the identity provider's access tokens.
	TokenVerifier = callpath.TokenVerifier
	// ApprovalSettings bound how long approvals live.
	ApprovalSettings = callpath.ApprovalSettings
	// ApprovalNotifier is told of each new pending approval.
	ApprovalNotifier = callpath.ApprovalNotifier
	// KeyMode is how Idempotency-Key values are checked.
	KeyMode = callpath.KeyMode
	// EffectKey is a compiled effect key template.
	EffectKey = callpath.EffectKey
	// Mount attaches routes over the engine ([callpath.Mount]).
	Mount = callpath.Mount
	// ReceiptHook hands events to the receipt writer.
	ReceiptHook = callpath.ReceiptHook
)

// A call and what became of it.
type (
	// API names the door a call came in by.
	API = callpath.API
	// Call is one tool call as a door hands it to the engine.
	Call = callpath.Call
	// Identity is a call's idempotency identity.
	Identity = callpath.Identity
	// Result is what the engine answers.
	Result = callpath.Result
	// ResultKind says what became of a call.
	ResultKind = callpath.ResultKind
	// Problem is an RFC 9457 problem with the contract's code.
	Problem = callpath.Problem
	// CallerApproval is an approval its caller may decide.
	CallerApproval = callpath.CallerApproval
	// MultiRoundTrip carries an MCP client's answers to input requests.
	MultiRoundTrip = callpath.MultiRoundTrip
)

// Constants of the contract and the engine (see gateway/callpath).
const (
	APIREST                      = callpath.APIREST
	APIMCP                       = callpath.APIMCP
	AnonymousTenant              = callpath.AnonymousTenant
	AdminCaller                  = callpath.AdminCaller
	KeyModeDerived               = callpath.KeyModeDerived
	KeyModeOpaque                = callpath.KeyModeOpaque
	DefaultLockTTL               = callpath.DefaultLockTTL
	DefaultReplayTTL             = callpath.DefaultReplayTTL
	DefaultMaxBodyBytes          = callpath.DefaultMaxBodyBytes
	DefaultToolTimeout           = callpath.DefaultToolTimeout
	DefaultApprovalTimeout       = callpath.DefaultApprovalTimeout
	DefaultApprovalUseWithin     = callpath.DefaultApprovalUseWithin
	DefaultReceiptRecoverAfter   = callpath.DefaultReceiptRecoverAfter
	DefaultRecordsSampleInterval = callpath.DefaultRecordsSampleInterval
	RecordsSamplePages           = callpath.RecordsSamplePages
	MaxPreferWait                = callpath.MaxPreferWait
	MinLockTTL                   = callpath.MinLockTTL
	ResultExecuted               = callpath.ResultExecuted
	ResultReplayed               = callpath.ResultReplayed
	ResultReadOnly               = callpath.ResultReadOnly
	ResultUnkeyed                = callpath.ResultUnkeyed
	ResultInProgress             = callpath.ResultInProgress
	ResultUnknown                = callpath.ResultUnknown
	ResultProblem                = callpath.ResultProblem
)

// ErrNotCallersApproval: the approval is not the caller's to decide.
var ErrNotCallersApproval = callpath.ErrNotCallersApproval

// Functions of the engine this package has offered.
var (
	NewProblem       = callpath.NewProblem
	WriteProblem     = callpath.WriteProblem
	ValidateAuth     = callpath.ValidateAuth
	CompileEffectKey = callpath.CompileEffectKey
	FixedChanges     = callpath.FixedChanges
	RequestIDFrom    = callpath.RequestIDFrom
)
