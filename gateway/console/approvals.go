package console

import (
	"github.com/toolgateway/toolgateway/gateway/principal"

	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// approvalView is one approval as the page lays it out.
type approvalView struct {
	ID, Tool, Tenant, Session, Step string
	State                           string
	RequestedAt, ExpiresAt          time.Time
	Age                             string
	Rule                            string
	Reason                          string
	Arguments                       []byte
	DecidedBy, Note                 string
	DecidedAt                       time.Time
}

// approvalsView is the Approvals page: the pending page (oldest first),
// the recently decided, and a message after a refused decision.
type approvalsView struct {
	Pending    []approvalView
	NextCursor string
	Decided    []approvalView
	Message    string
	Error      string
}

// decidedShown is how many decided approvals of each kind the page shows.
const decidedShown = 20

func toApprovalView(rec idempotency.Record, now time.Time) approvalView {
	v := approvalView{Tool: rec.Scope.Tool, Tenant: rec.Scope.Tenant, State: string(rec.State), Arguments: rec.CanonicalArguments}
	if rec.Step != nil {
		v.Session, v.Step = rec.Step.SessionID, fmt.Sprint(rec.Step.Index)
	}
	if a := rec.Approval; a != nil {
		v.ID, v.RequestedAt, v.ExpiresAt, v.Age = a.ID, a.RequestedAt, a.ExpiresAt, age(a.RequestedAt, now)
		v.Rule, v.Reason = fmt.Sprintf("decide[%d]", a.Rule), a.Reason
		v.DecidedBy, v.DecidedAt, v.Note = a.DecidedBy, a.DecidedAt, a.Note
		if a.ClaimedBy != "" { // the admin token's holder: the name given, then the principal
			v.DecidedBy = a.ClaimedBy + " (" + a.DecidedBy + ")"
		}
	}
	return v
}

// pending reads one page of pending approvals with their arguments,
// oldest first within the page. Work is bounded by the page size: one
// list and one get per approval shown.
func (c *Console) pending(r *http.Request) ([]approvalView, string, error) {
	page, err := c.backend.ListApprovals(r.Context(), idempotency.ApprovalFilter{
		State: idempotency.StateAwaitingApproval, Limit: c.opts.PageSize, Cursor: r.URL.Query().Get("cursor"),
	})
	if err != nil {
		return nil, "", err
	}
	views := make([]approvalView, 0, len(page.Records))
	for _, rec := range page.Records {
		if rec.Approval == nil {
			continue
		}
		full, err := c.backend.GetApproval(r.Context(), rec.Approval.ID)
		if errors.Is(err, idempotency.ErrNotFound) {
			continue // decided and consumed since the list
		}
		if err != nil {
			return nil, "", err
		}
		views = append(views, toApprovalView(full, c.opts.Now()))
	}
	slices.SortStableFunc(views, func(a, b approvalView) int { return a.RequestedAt.Compare(b.RequestedAt) })
	return views, page.Cursor, nil
}

// decided reads the most recent approved and denied approvals.
func (c *Console) decided(r *http.Request) ([]approvalView, error) {
	var views []approvalView
	for _, state := range []idempotency.State{idempotency.StateApproved, idempotency.StateDenied} {
		page, err := c.backend.ListApprovals(r.Context(), idempotency.ApprovalFilter{State: state, Limit: decidedShown})
		if err != nil {
			return nil, err
		}
		for _, rec := range page.Records {
			views = append(views, toApprovalView(rec, c.opts.Now()))
		}
	}
	slices.SortStableFunc(views, func(a, b approvalView) int { return b.DecidedAt.Compare(a.DecidedAt) })
	return views, nil
}

func (c *Console) approvalsView(r *http.Request) (approvalsView, error) {
	var v approvalsView
	var err error
	if v.Pending, v.NextCursor, err = c.pending(r); err != nil {
		return v, err
	}
	v.Decided, err = c.decided(r)
	return v, err
}

// handleApprovals shows the Approvals page.
func (c *Console) handleApprovals(w http.ResponseWriter, r *http.Request) {
	v, err := c.approvalsView(r)
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.pages.render(w, http.StatusOK, "approvals", pageFor(r, "Approvals", "approvals", v))
}

// handlePendingFragment is the pending list alone, polled by the page so a
// new approval shows within a second or two without a reload.
func (c *Console) handlePendingFragment(w http.ResponseWriter, r *http.Request) {
	views, cursor, err := c.pending(r)
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.pages.renderFragment(w, "approvals", "pending", pageFor(r, "", "", approvalsView{Pending: views, NextCursor: cursor}))
}

// handleDecide approves or denies one approval as the signed-in operator.
// An approval someone else decided first is not changed: the page says
// who decided it and when.
func (c *Console) handleDecide(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	action := r.PostForm.Get("action")
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if action != "approve" && action != "deny" {
		c.approvalsMessage(w, r, http.StatusBadRequest, "", "Choose approve or deny.")
		return
	}
	if err := idempotency.CheckNote(action == "approve", note); err != nil {
		msg := fmt.Sprintf("The note is longer than %d bytes; nothing changed.", idempotency.MaxNoteBytes)
		if errors.Is(err, idempotency.ErrNoteRequired) {
			msg = "A deny needs a note: the reason the caller is shown. Nothing changed."
		}
		c.approvalsMessage(w, r, http.StatusBadRequest, "", msg)
		return
	}
	s := sessionFrom(r.Context())
	by := principal.FromContext(r.Context()).ID
	rec, err := c.backend.DecideApproval(r.Context(), id, idempotency.ApprovalDecision{Approve: action == "approve", By: by, ClaimedBy: s.claimedBy(), Note: note})
	var notPending *idempotency.ApprovalNotPendingError
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		c.approvalsMessage(w, r, refused.Status, "", refused.Message+" Nothing changed.")
		return
	case errors.As(err, &notPending):
		c.approvalsMessage(w, r, http.StatusConflict, "", notPendingText(notPending))
		return
	case errors.Is(err, idempotency.ErrNotFound):
		c.approvalsMessage(w, r, http.StatusNotFound, "", "No such approval (it may have been used and removed already); nothing changed.")
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	c.opts.Log.InfoContext(r.Context(), "console: approval decided", "approval_id", id, "action", action, "by", by, "tool", rec.Scope.Tool, "tenant", rec.Scope.Tenant)
	http.Redirect(w, r, Base+"/approvals", http.StatusSeeOther)
}

// notPendingText is the "already approved by X at T" message.
func notPendingText(e *idempotency.ApprovalNotPendingError) string {
	verb := map[idempotency.State]string{
		idempotency.StateApproved: "approved", idempotency.StateDenied: "denied", idempotency.StateExpired: "expired",
	}[e.State]
	if verb == "" {
		verb = strings.ToLower(string(e.State))
	}
	who := e.DecidedBy
	if e.ClaimedBy != "" {
		who = e.ClaimedBy + " (" + e.DecidedBy + ")"
	}
	switch {
	case e.DecidedBy != "":
		return fmt.Sprintf("Already %s by %s at %s; nothing changed.", verb, who, e.DecidedAt.UTC().Format("2006-01-02 15:04:05Z"))
	case !e.DecidedAt.IsZero():
		return fmt.Sprintf("Already %s at %s; nothing changed.", verb, e.DecidedAt.UTC().Format("2006-01-02 15:04:05Z"))
	}
	return fmt.Sprintf("Already %s; nothing changed.", verb)
}

// approvalsMessage shows the Approvals page with a message.
func (c *Console) approvalsMessage(w http.ResponseWriter, r *http.Request, status int, message, problem string) {
	v, err := c.approvalsView(r)
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	v.Message, v.Error = message, problem
	c.pages.render(w, status, "approvals", pageFor(r, "Approvals", "approvals", v))
}

// storeFailed answers 503 when the store did not answer; the error is
// logged, not shown (it may name internals). A page link whose cursor the
// store did not hand out is the link's fault, not the store's: 400.
func (c *Console) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, idempotency.ErrInvalidCursor) {
		http.Error(w, "400: that page link is not one this console made; start again from the first page", http.StatusBadRequest)
		return
	}
	c.opts.Log.ErrorContext(r.Context(), "console: store failed", "error", err)
	http.Error(w, "503: the store did not answer; try again in a moment", http.StatusServiceUnavailable)
}
