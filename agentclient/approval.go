package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// ApprovalPendingError is what Call returns when the tool's decide rules
// hold the call for a human's approval (409 approval_pending): nothing ran,
// and the same call (same session, step, tool and arguments) runs once
// after the approval is granted. Use errors.As to get it; errors.As to
// *Error gets the problem itself.
//
// Call returns it at once, although the gateway marks approval_pending
// retryable: a human answers in minutes or hours, so retrying inside Call
// would only hold the agent's turn and the connection. The runtime pauses
// instead (a checkpoint, an interrupt) and makes the same call again once
// the human answered; ApprovalID names the approval to show them, and, for
// a rule with approver: caller, to answer with [Client.Approve] or
// [Client.Deny].
type ApprovalPendingError struct {
	// ApprovalID is the approval's id (a ULID).
	ApprovalID string
	// ExpiresAt is when the approval expires if nobody decides (zero when
	// the gateway did not say).
	ExpiresAt time.Time
	// Problem is the gateway's answer, with its Retry-After.
	Problem *Error
}

// Error implements error.
func (e *ApprovalPendingError) Error() string {
	return fmt.Sprintf("agentclient: the call waits for a human's approval %s (expires %s); nothing ran: make the same call again once it is decided",
		e.ApprovalID, e.ExpiresAt.Format(time.RFC3339))
}

// Unwrap returns the problem, so that errors.As finds the *Error too.
func (e *ApprovalPendingError) Unwrap() error { return e.Problem }

// asApprovalPending turns an approval_pending problem into its typed error;
// any other problem is returned as it is.
func asApprovalPending(problem *Error) error {
	if problem.Code != wire.CodeApprovalPending {
		return problem
	}
	pending := &ApprovalPendingError{ApprovalID: problem.ApprovalID, Problem: problem}
	if at, err := time.Parse(time.RFC3339, problem.ApprovalExpiresAt); err == nil {
		pending.ExpiresAt = at
	}
	return pending
}

// DecisionOption changes how [Client.Approve] and [Client.Deny] send a
// decision.
type DecisionOption func(*decisionOptions)

type decisionOptions struct {
	token string
}

// DecidedBy sends the decision with token, the deciding person's own
// bearer token (their OIDC access token at the gateway's provider), instead
// of the client's. approver: caller means a person: the gateway refuses an
// agent's static token (403 not_an_approver), so an agent cannot approve
// its own calls.
func DecidedBy(token string) DecisionOption {
	return func(o *decisionOptions) { o.token = token }
}

// Approve approves the approval id for the caller's own human: the answer
// to an approval of a rule with approver: caller, sent to POST
// /api/tools/v1/approvals/{id}/approve with the person's token given with
// [DecidedBy] (the client's token without it, which the gateway refuses:
// 403 not_an_approver, an *Error). note is optional. The gateway answers
// 403 not_an_approver for a decider who is no person or not one of the
// rule's approvers, 403 approval_not_yours for an approval an operator
// decides or another tenant's, and 409 approval_not_pending for one decided
// already. Approving runs nothing: the runtime's next Call of the same step
// runs the call, once.
func (c *Client) Approve(ctx context.Context, id, note string, opts ...DecisionOption) error {
	return c.decide(ctx, id, "approve", note, opts)
}

// Deny denies the approval id for the caller's own human, as [Client.Approve]
// approves it; note is required (the gateway answers 400 without one), and
// the call then answers 403 approval_denied with note as its reason.
func (c *Client) Deny(ctx context.Context, id, note string, opts ...DecisionOption) error {
	return c.decide(ctx, id, "deny", note, opts)
}

// Approve is [Client.Approve] through the session's client.
func (s *Session) Approve(ctx context.Context, id, note string, opts ...DecisionOption) error {
	return s.client.Approve(ctx, id, note, opts...)
}

// Deny is [Client.Deny] through the session's client.
func (s *Session) Deny(ctx context.Context, id, note string, opts ...DecisionOption) error {
	return s.client.Deny(ctx, id, note, opts...)
}

// decide posts one decision. It is sent once: a decision is not
// idempotent in its answer (a second one is approval_not_pending), so a
// lost answer is the caller's to check rather than this method's to retry.
func (c *Client) decide(ctx context.Context, id, decision, note string, opts []DecisionOption) error {
	if c.err != nil {
		return c.err
	}
	options := decisionOptions{token: c.token}
	for _, opt := range opts {
		opt(&options)
	}
	if err := checkToken(options.token); err != nil {
		return fmt.Errorf("agentclient: %s approval: %w", decision, err)
	}
	if id == "" {
		return fmt.Errorf("agentclient: %s: empty approval id", decision)
	}
	body, err := json.Marshal(struct {
		Note string `json:"note,omitempty"`
	}{note})
	if err != nil {
		return fmt.Errorf("agentclient: %s approval: %w", decision, err)
	}
	target := c.baseURL + "/api/tools/v1/approvals/" + url.PathEscape(id) + "/" + decision
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("agentclient: %s approval: %w", decision, err)
	}
	req.Header.Set("Content-Type", wire.MediaTypeJSON)
	req.Header.Set("Accept", wire.MediaTypeJSON+", "+wire.MediaTypeProblem)
	if options.token != "" {
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+options.token)
	}
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("agentclient: %s approval %s: %w", decision, id, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("agentclient: %s approval %s: read response: %w", decision, id, err)
	}
	if resp.StatusCode >= 300 {
		return newError(resp, answer)
	}
	return nil
}
