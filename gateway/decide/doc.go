// Package decide takes a tool's per-call decision: allow, approve (a human
// says yes first) or deny, from an ordered list of rules whose conditions
// are CEL expressions (github.com/google/cel-go, the policy language of
// Kubernetes and Envoy).
//
// A tool's rules are compiled once, when the configuration is loaded, by
// [Compile]; the returned [Policy] is then asked once per call by
// [Policy.Decide]:
//
//   - The first rule whose `when` is true decides; a rule without `when`
//     is always true. A rule after a rule without `when` could never decide:
//     [Compile] refuses it rather than warn, because a catch-all placed too
//     early is a configuration mistake that silently changes what runs.
//   - No rules: every call is allowed. Rules, and none matches: denied.
//   - Rules see `args` (the call's canonical arguments, a JSON object;
//     integral numbers are CEL ints, others doubles, and ints and doubles
//     compare with each other), `tool`, `tenant`, `session` (a string, ""
//     when the call carries none), `step` (an int, -1 when the call carries
//     none) and `api` ("rest" or "mcp").
//   - Evaluation is cost-bounded ([CostLimit]) and cancellable through the
//     context. An evaluation error (a missing key read without `has()`, a
//     type mismatch, the cost limit) is a deny: fail closed. [Policy.Decide]
//     returns that deny together with the error, which names the tool and
//     the rule's index, for the caller's log.
//
// [Mode] carries the configuration's `mode`: in [ModeObserve] every decision
// is taken and reported but not enforced ([Verdict.Enforced] is false and
// [Verdict.Effective] is [Allow]).
//
// [Policy.Digest] is the SHA-256 of the tool's decision configuration that
// receipts carry as `policy`.
package decide
