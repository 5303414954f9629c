package console

import (
	"github.com/toolgateway/toolgateway/gateway/principal"

	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// approvalView is one approval as the pages lay it out.
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
	// Requester is the call's principal id (who asked); ClaimedBy the name
	// typed beside token:admin; Approver who decides (operator, caller).
	Requester, ClaimedBy, Approver string
	// ApprovedBy are the principals who approved so far, of Needed.
	ApprovedBy []string
	Needed     int
	// KeyHash names the call's record for its deep link
	// (/console/records/{tool}/{key-hash}); Ran is true once the approved
	// call ran (the record left the approval states), ExecutionID its id.
	KeyHash, ExecutionID string
	Ran                  bool
	// RuleWhen and RuleApprovers are the rule's text as configured now
	// ("" when the tool has no such rule now, or its rules changed since
	// the approval was asked: RuleChanged).
	RuleWhen, RuleApprovers string
	RuleChanged             bool
}

// approvalsView is the Approvals page: the pending page (oldest first),
// the history under the filter (newest first), and a message after a
// refused decision.
type approvalsView struct {
	Pending    []approvalView
	NextCursor string
	// Filter is the history's filter as the form shows it; History one
	// page of it and HistoryCursor the next page's cursor.
	Filter        historyFilter
	States        []string
	History       []approvalView
	HistoryCursor string
	Message       string
	Error         string
}

// approvalView is one approval's own page (/console/approvals/{id}).
type approvalPage struct {
	Approval approvalView
	// Pending is true while it can be decided; Done is the decision this
	// signed-in person just took (the confirmation).
	Pending bool
	Done    string
	Note    string
	Error   string
}

// historyFilter is the history form: the state shown by its wire name
// (PENDING for AWAITING_APPROVAL), the rest as typed.
type historyFilter struct {
	State, Tool, Tenant, Requester, Session, Since, Until string
}

// pendingState is the history's name for idempotency.StateAwaitingApproval,
// the contract's name for it (section 19).
const pendingState = "PENDING"

// historyStates are the states the history filter offers.
var historyStates = []string{pendingState, string(idempotency.StateApproved), string(idempotency.StateDenied), string(idempotency.StateExpired),
	string(idempotency.StateConsumed)}

func toApprovalView(rec idempotency.Record, now time.Time) approvalView {
	v := approvalView{Tool: rec.Scope.Tool, Tenant: rec.Scope.Tenant, State: string(rec.State), Arguments: rec.CanonicalArguments,
		ExecutionID: rec.ExecutionID}
	if rec.Scope.Key != "" {
		v.KeyHash = receipts.KeyHash(rec.Scope.Key)
	}
	if rec.State == idempotency.StateAwaitingApproval {
		v.State = pendingState
	}
	v.Ran = rec.State == idempotency.StateConsumed || (rec.State != "" && !rec.State.IsApproval())
	if rec.Step != nil {
		v.Session, v.Step = rec.Step.SessionID, fmt.Sprint(rec.Step.Index)
	}
	if a := rec.Approval; a != nil {
		v.ID, v.RequestedAt, v.ExpiresAt, v.Age = a.ID, a.RequestedAt, a.ExpiresAt, age(a.RequestedAt, now)
		v.Rule, v.Reason = fmt.Sprintf("decide[%d]", a.Rule), a.Reason
		v.DecidedBy, v.DecidedAt, v.Note = a.DecidedBy, a.DecidedAt, a.Note
		v.Requester, v.ClaimedBy, v.Approver = a.Requester, a.ClaimedBy, string(a.Approver)
		v.ApprovedBy, v.Needed = a.ApprovedBy, a.Needed()
		if a.ClaimedBy != "" { // the admin token's holder: the name given, then the principal
			v.DecidedBy = a.ClaimedBy + " (" + a.DecidedBy + ")"
		}
	}
	return v
}

// withRule adds the text of the rule that asked for the approval, so
// the person deciding reads what the rule says, not only its index.
func (c *Console) withRule(v approvalView, rec idempotency.Record) approvalView {
	if rec.Approval == nil {
		return v
	}
	r := c.backend.ApprovalRule(rec.Scope.Tool, rec.Approval.Rule, rec.Approval.Binding)
	v.RuleChanged = r.Changed
	if !r.Found || r.Changed { // the rule at that index now is not the one that asked
		return v
	}
	v.RuleWhen = cmp.Or(r.Rule.When, "always (the rule has no when)")
	if r.Rule.Approvers.Expr != "" {
		v.RuleApprovers = r.Rule.Approvers.Expr
	} else {
		v.RuleApprovers = strings.Join(r.Rule.Approvers.IDs, ", ")
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
		views = append(views, c.withRule(toApprovalView(full, c.opts.Now()), full))
	}
	slices.SortStableFunc(views, func(a, b approvalView) int { return a.RequestedAt.Compare(b.RequestedAt) })
	return views, page.Cursor, nil
}

// errBadFilter is a history filter the console cannot read; the page
// says so and lists nothing.
var errBadFilter = errors.New("console: bad filter")

// historyFilterOf reads the history form from the query and returns the
// store's filter for it.
func (c *Console) historyFilterOf(q url.Values) (historyFilter, idempotency.ApprovalFilter, error) {
	h := historyFilter{State: strings.ToUpper(strings.TrimSpace(q.Get("state"))), Tool: strings.TrimSpace(q.Get("tool")),
		Tenant: strings.TrimSpace(q.Get("tenant")), Requester: strings.TrimSpace(q.Get("requester")), Session: strings.TrimSpace(q.Get("session")),
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until"))}
	f := idempotency.ApprovalFilter{Tool: h.Tool, Tenant: h.Tenant, Requester: h.Requester, SessionID: h.Session,
		Limit: c.opts.PageSize, Cursor: q.Get("hcursor")}
	switch {
	case h.State == "":
	case h.State == pendingState:
		f.State = idempotency.StateAwaitingApproval
	case slices.Contains(historyStates, h.State):
		f.State = idempotency.State(h.State)
	default:
		return h, f, fmt.Errorf("%w: state %q is not one of %s", errBadFilter, h.State, strings.Join(historyStates, ", "))
	}
	var errSince, errUntil error
	f.Since, errSince = parseTime(h.Since)
	f.Until, errUntil = parseTime(h.Until)
	if errSince != nil || errUntil != nil {
		return h, f, fmt.Errorf("%w: since and until take a date and time (2026-01-31T14:00, UTC)", errBadFilter)
	}
	return h, f, nil
}

// history reads one page of the approvals the filter selects, newest
// first (pending ones oldest first, as the admin API lists them).
func (c *Console) history(r *http.Request, f idempotency.ApprovalFilter) ([]approvalView, string, error) {
	page, err := c.backend.ListApprovals(r.Context(), f)
	if err != nil {
		return nil, "", err
	}
	views := make([]approvalView, 0, len(page.Records))
	for _, rec := range page.Records {
		// Keeps is the filter's own test of requester, session and time:
		// a store that applies it already loses nothing here.
		if !f.Keeps(&rec) {
			continue
		}
		views = append(views, toApprovalView(rec, c.opts.Now()))
	}
	if f.State == idempotency.StateAwaitingApproval {
		slices.SortStableFunc(views, func(a, b approvalView) int { return a.RequestedAt.Compare(b.RequestedAt) })
	} else {
		slices.SortStableFunc(views, func(a, b approvalView) int { return b.RequestedAt.Compare(a.RequestedAt) })
	}
	return views, page.Cursor, nil
}

func (c *Console) approvalsView(r *http.Request) (approvalsView, error) {
	v := approvalsView{States: historyStates}
	var err error
	if v.Pending, v.NextCursor, err = c.pending(r); err != nil {
		return v, err
	}
	h, f, err := c.historyFilterOf(r.URL.Query())
	v.Filter = h
	if err != nil {
		v.Error = strings.TrimPrefix(err.Error(), errBadFilter.Error()+": ")
		return v, nil
	}
	v.History, v.HistoryCursor, err = c.history(r, f)
	return v, err
}

// handleApprovals shows the Approvals page.
func (c *Console) handleApprovals(w http.ResponseWriter, r *http.Request) {
	v, err := c.approvalsView(r)
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	status := http.StatusOK
	if v.Error != "" {
		status = http.StatusBadRequest
	}
	c.pages.render(w, status, "approvals", pageFor(r, "Approvals", "approvals", v))
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

// handleApproval shows one approval: the page the notification's
// console_url opens, and where a decision lands with its confirmation.
func (c *Console) handleApproval(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	rec, err := c.backend.GetApproval(r.Context(), id)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		c.pages.render(w, http.StatusNotFound, "approval", pageFor(r, "Approval", "approvals",
			approvalPage{Approval: approvalView{ID: id}, Error: "No approval with that id: it was never requested, or its record was used and removed."}))
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	v := approvalPage{Approval: c.withRule(toApprovalView(rec, c.opts.Now()), rec), Pending: rec.State == idempotency.StateAwaitingApproval}
	if done := r.URL.Query().Get("done"); done == "approve" || done == "deny" {
		v.Done = done
	}
	c.pages.render(w, http.StatusOK, "approval", pageFor(r, "Approval", "approvals", v))
}

// handleDecide approves or denies one approval as the signed-in operator
// and lands on the approval's page with a confirmation. An approval
// someone else decided first is not changed: the page says who decided
// it and when. A deny needs a note (its reason, which the agent sees).
func (c *Console) handleDecide(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	action := r.PostForm.Get("action")
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if action != "approve" && action != "deny" {
		c.approvalMessage(w, r, http.StatusBadRequest, id, note, "Choose approve or deny; nothing changed.")
		return
	}
	if err := idempotency.CheckNote(action == "approve", note); err != nil {
		msg := fmt.Sprintf("The note is longer than %d bytes; nothing changed.", idempotency.MaxNoteBytes)
		if errors.Is(err, idempotency.ErrNoteRequired) {
			msg = "A deny needs a note: the reason the caller is shown. Nothing changed."
		}
		c.approvalMessage(w, r, http.StatusBadRequest, id, note, msg)
		return
	}
	s := sessionFrom(r.Context())
	by := principal.FromContext(r.Context()).ID
	rec, err := c.backend.DecideApproval(r.Context(), id, idempotency.ApprovalDecision{Approve: action == "approve", By: by, ClaimedBy: s.claimedBy(), Note: note})
	var notPending *idempotency.ApprovalNotPendingError
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		c.approvalMessage(w, r, refused.Status, id, note, sentence(refused.Message)+" Nothing changed.")
		return
	case errors.As(err, &notPending):
		c.approvalMessage(w, r, http.StatusConflict, id, note, notPendingText(notPending))
		return
	case errors.Is(err, idempotency.ErrNotFound):
		c.approvalMessage(w, r, http.StatusNotFound, id, note, "No such approval (it may have been used and removed already); nothing changed.")
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	c.opts.Log.InfoContext(r.Context(), "console: approval decided", "approval_id", id, "action", action, "by", by, "tool", rec.Scope.Tool, "tenant", rec.Scope.Tenant)
	http.Redirect(w, r, Base+"/approvals/"+url.PathEscape(id)+"?done="+action, http.StatusSeeOther)
}

// sentence makes a refusal's detail (an API problem's, which ends
// without a full stop) a sentence the page can follow with another.
func sentence(detail string) string {
	detail = strings.TrimSpace(detail)
	if detail == "" || strings.HasSuffix(detail, ".") {
		return detail
	}
	return strings.ToUpper(detail[:1]) + detail[1:] + "."
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

// approvalMessage shows the approval's page with a refused decision's
// message and the note as typed (so it is not lost).
func (c *Console) approvalMessage(w http.ResponseWriter, r *http.Request, status int, id, note, problem string) {
	v := approvalPage{Approval: approvalView{ID: id}, Note: note, Error: problem}
	rec, err := c.backend.GetApproval(r.Context(), id)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
	case err != nil:
		c.storeFailed(w, r, err)
		return
	default:
		v.Approval, v.Pending = c.withRule(toApprovalView(rec, c.opts.Now()), rec), rec.State == idempotency.StateAwaitingApproval
	}
	c.pages.render(w, status, "approval", pageFor(r, "Approval", "approvals", v))
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
