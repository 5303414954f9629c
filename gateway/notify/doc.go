// Package notify pushes new pending approvals to the operator's webhook
// (`approvals.notify`): one signed JSON POST per approval, retried, and never
// in the way of a call.
//
// # Body
//
// Each POST carries one JSON object, `Content-Type: application/json`:
//
//	{
//	  "type": "approval.pending",
//	  "approval_id": "01J...",            // ULID; receivers deduplicate retries by it
//	  "tool": "refund",
//	  "tenant": "acme",
//	  "session": "s-1",                   // omitted when the call carries none
//	  "step": 4,                          // omitted when the call carries none
//	  "canonical_arguments": {"amount": 2000},  // the JCS arguments, as JSON
//	  "rule": 1,                          // index of the rule that asked for approval
//	  "reason": "refunds above 1 000 need finance",  // omitted when the rule has none
//	  "requested_at": "2026-12-04T20:00:00Z",        // RFC 3339, UTC
//	  "expires_at": "2026-12-05T20:00:00Z",
//	  "console_url": "https://gw.example.com/console/approvals/01J..."  // omitted without a console base URL
//	}
//
// # Signature
//
// The `Toolgateway-Signature` header is `t=<unix seconds>,v1=<hex>`, where
// the hex is HMAC-SHA256(secret, t + "." + body) over the exact body bytes.
// A receiver checks it with [Verify] (or the same three lines in any
// language) and refuses a timestamp outside its tolerance, so a captured
// request cannot be replayed later. Each attempt is signed afresh.
//
// # Delivery
//
// [Notifier.Notify] only enqueues: it never waits for the receiver. A
// bounded queue ([Config.QueueSize]) is drained by a few workers; when it is
// full the new notification is dropped and counted ([Stats.Dropped]) rather
// than the oldest: the console lists every pending approval anyway, so a
// lost push delays a human, it loses nothing, and the notifications already
// queued keep their order. A failed attempt (a network error, 408, 429 or
// 5xx) is retried with exponential backoff and jitter up to
// [Config.MaxAttempts]; any other status is final. [Notifier.Close] stops
// accepting, lets the workers finish the queue until its context ends, and
// then cancels what is left.
package notify
