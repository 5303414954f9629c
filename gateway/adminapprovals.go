package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/wire"
)

// The approval states as the approvals API names them. A record waiting
// for a decision is AWAITING_APPROVAL in the records API; an approval is
// PENDING.
const (
	ApprovalPending  = "PENDING"
	ApprovalApproved = "APPROVED"
	ApprovalDenied   = "DENIED"
	ApprovalExpired  = "EXPIRED"
	// ApprovalConsumed is an approval the call it approved ran on.
	ApprovalConsumed = "CONSUMED"
)

// approvalStates maps the API's approval states to the records'.
var approvalStates = map[string]idempotency.State{
	ApprovalPending:  idempotency.StateAwaitingApproval,
	ApprovalApproved: idempotency.StateApproved,
	ApprovalDenied:   idempotency.StateDenied,
	ApprovalExpired:  idempotency.StateExpired,
	ApprovalConsumed: idempotency.StateConsumed,
}

// approvalStateName is the API's name of a record state (the state itself
// for one that is not an approval's).
func approvalStateName(s idempotency.State) string {
	if s == idempotency.StateAwaitingApproval {
		return ApprovalPending
	}
	return string(s)
}

// Bounds of a decision's text: by names a person or a tenant; a note is a
// sentence or two (a deny's reason), shown to operators and callers.
const (
	maxDecisionBy = 256
	// maxDecisionBody bounds the whole body of a decision.
	maxDecisionBody = 8 << 10
)

// AdminApproval is an approval as the approvals API shows it (GET
// /admin/v1/approvals/{id}, each listed approval, and the answer of a
// decision); the gateway admin command decodes it.
type AdminApproval struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Tenant, Tool and Key are the scope of the call's record; SessionID
	// and StepIndex its agent step, when it had one. The tenant and
	// session say who asked.
	Tenant      string  `json:"tenant"`
	Tool        string  `json:"tool"`
	Key         string  `json:"key"`
	SessionID   string  `json:"session_id,omitempty"`
	StepIndex   *uint64 `json:"step_index,omitempty"`
	Fingerprint string  `json:"fingerprint"`
	// CanonicalArguments are the call's arguments (JCS text): what
	// approving lets run. Shown for one approval, not in listings.
	CanonicalArguments *string `json:"canonical_arguments,omitempty"`
	// Rule is the index of the deciding rule in the tool's decide list;
	// Reason its reason; Approver who may decide (operator or caller).
	Rule     int    `json:"rule"`
	Reason   string `json:"reason,omitempty"`
	Approver string `json:"approver"`
	// RequestedAt is when the call asked; ExpiresAt when the approval
	// expires (pending: unless decided; approved: unless used).
	RequestedAt string `json:"requested_at"`
	ExpiresAt   string `json:"expires_at"`
	// Requester is the call's principal (gateway/principal): who asked.
	Requester string `json:"requester,omitempty"`
	// Quorum is how many distinct principals must approve (1 unless the
	// rule says more); ApprovedBy who approved so far, in order.
	Quorum     int      `json:"quorum"`
	ApprovedBy []string `json:"approved_by"`
	// DecidedBy (the decider's principal), ClaimedBy (the name typed with
	// the admin token beside decided_by token:admin), DecidedAt and Note
	// are set once decided.
	DecidedBy string `json:"decided_by,omitempty"`
	ClaimedBy string `json:"claimed_by,omitempty"`
	DecidedAt string `json:"decided_at,omitempty"`
	Note      string `json:"note,omitempty"`
}

// adminApprovalList is the answer of GET /admin/v1/approvals.
type adminApprovalList struct {
	Approvals  []AdminApproval `json:"approvals"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// adminTime is a time as the admin API writes it.
func adminTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// toAdminApproval renders a record carrying an approval; withArguments
// adds its canonical arguments.
func toAdminApproval(rec idempotency.Record, withArguments bool) AdminApproval {
	a := rec.Approval
	if a == nil { // every store returns approval records with their approval
		a = &idempotency.Approval{}
	}
	out := AdminApproval{
		ID: a.ID, State: approvalStateName(rec.State),
		Tenant: rec.Scope.Tenant, Tool: rec.Scope.Tool, Key: rec.Scope.Key, Fingerprint: rec.Fingerprint,
		Rule: a.Rule, Reason: a.Reason, Approver: string(a.Approver.OrDefault()),
		RequestedAt: adminTime(a.RequestedAt), ExpiresAt: adminTime(a.ExpiresAt),
		Requester: a.Requester, Quorum: a.Needed(), ApprovedBy: append([]string{}, a.ApprovedBy...),
		DecidedBy: a.DecidedBy, ClaimedBy: a.ClaimedBy, DecidedAt: adminTime(a.DecidedAt), Note: a.Note,
	}
	if rec.Step != nil {
		index := rec.Step.Index
		out.SessionID, out.StepIndex = rec.Step.SessionID, &index
	}
	if withArguments && rec.CanonicalArguments != nil {
		text := string(rec.CanonicalArguments)
		out.CanonicalArguments = &text
	}
	return out
}

// approvalStore returns the store's approvals side, or answers 501 when
// the store has none.
func (s *Server) approvalStore(w http.ResponseWriter) (idempotency.Approvals, bool) {
	a, ok := s.opts.Store.(idempotency.Approvals)
	if !ok {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this idempotency store keeps no approvals"))
	}
	return a, ok
}

// approvalFilter reads the query of GET /admin/v1/approvals.
func approvalFilter(r *http.Request) (idempotency.ApprovalFilter, error) {
	q := r.URL.Query()
	if err := checkListParams(q, "state", "tenant", "tool", "requester", "session", "since", "until", "limit", "cursor"); err != nil {
		return idempotency.ApprovalFilter{}, err
	}
	f := idempotency.ApprovalFilter{Tenant: q.Get("tenant"), Tool: q.Get("tool"), Cursor: q.Get("cursor"), Limit: DefaultAdminListLimit,
		Requester: q.Get("requester"), SessionID: q.Get("session")}
	if f.Requester != "" {
		if err := principal.Validate(f.Requester); err != nil {
			return idempotency.ApprovalFilter{}, fmt.Errorf("requester: %w", err)
		}
	}
	if len(f.SessionID) > 256 || !utf8.ValidString(f.SessionID) {
		return idempotency.ApprovalFilter{}, errors.New("session: at most 256 bytes of text")
	}
	for name, at := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return idempotency.ApprovalFilter{}, fmt.Errorf("%s: want an RFC 3339 time: %w", name, err)
			}
			*at = t
		}
	}
	if v := q.Get("state"); v != "" {
		state, ok := approvalStates[v]
		if !ok {
			return idempotency.ApprovalFilter{}, fmt.Errorf("state %q: want PENDING, APPROVED, DENIED or EXPIRED", v)
		}
		f.State = state
	}
	if err := checkListNames(f.Tenant, f.Tool); err != nil {
		return idempotency.ApprovalFilter{}, err
	}
	var err error
	if f.Limit, err = listLimit(q, DefaultAdminListLimit, idempotency.MaxListLimit); err != nil {
		return idempotency.ApprovalFilter{}, err
	}
	return f, nil
}

// handleAdminApprovals lists approvals, one page per request, each page
// oldest request first (the order a queue of pending approvals is worked
// in; across pages the order is the store's listing order).
func (s *Server) handleAdminApprovals(w http.ResponseWriter, r *http.Request) {
	filter, err := approvalFilter(r)
	if err != nil {
		badAdminRequest(w, err.Error())
		return
	}
	store, ok := s.approvalStore(w)
	if !ok {
		return
	}
	page, err := store.ListApprovals(r.Context(), filter)
	if s.adminStoreError(w, r, err) {
		return
	}
	out := adminApprovalList{Approvals: make([]AdminApproval, 0, len(page.Records)), NextCursor: page.Cursor}
	for _, rec := range page.Records {
		// The requester, session and time filters are applied to each
		// page the store lists (a page may come back short, with a cursor).
		if filter.Keeps(&rec) {
			out.Approvals = append(out.Approvals, toAdminApproval(rec, false))
		}
	}
	slices.SortStableFunc(out.Approvals, func(a, b AdminApproval) int {
		return strings.Compare(a.RequestedAt, b.RequestedAt)
	})
	writeJSON(w, http.StatusOK, out)
}

// approvalID reads and checks the {id} of an approvals path: the gateway
// mints ULIDs, so anything long or unprintable names no approval.
func approvalID(r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	return id, id != "" && len(id) <= maxExecutionIDLen && printableASCII(id)
}

// approvalNotFound answers 404 for an approval id no live record carries.
func approvalNotFound(w http.ResponseWriter) {
	callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no approval of that id (never requested, or its record was consumed, deleted or swept)"))
}

// handleAdminApproval shows one approval with its canonical arguments.
func (s *Server) handleAdminApproval(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		badAdminRequest(w, "an approval takes no query parameters")
		return
	}
	id, ok := approvalID(r)
	if !ok {
		approvalNotFound(w)
		return
	}
	store, ok := s.approvalStore(w)
	if !ok {
		return
	}
	rec, err := store.GetApproval(r.Context(), id)
	if s.approvalError(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, toAdminApproval(rec, true))
}

// approvalError writes the problem for a failed approvals call; false if
// err is nil.
func (s *Server) approvalError(w http.ResponseWriter, r *http.Request, err error) bool {
	var notPending *idempotency.ApprovalNotPendingError
	switch {
	case err == nil:
		return false
	case errors.Is(err, idempotency.ErrNotFound):
		approvalNotFound(w)
	case errors.As(err, &notPending):
		callpath.WriteProblem(w, approvalNotPending(notPending))
	default:
		return s.adminStoreError(w, r, err)
	}
	return true
}

// approvalNotPending is the 409 of deciding an approval that is decided or
// expired, saying who decided it and when.
func approvalNotPending(e *idempotency.ApprovalNotPendingError) *callpath.Problem {
	state := approvalStateName(e.State)
	detail := "the approval is " + state
	if e.DecidedBy != "" {
		detail += " by " + e.DecidedBy + " at " + adminTime(e.DecidedAt)
	}
	p := callpath.NewProblem(wire.CodeApprovalNotPending, detail)
	p.State, p.DecidedBy, p.DecidedAt = state, e.DecidedBy, adminTime(e.DecidedAt)
	return p
}

// decisionRequest is the body of a decision: a name the admin token's
// holder gives (kept as claimed_by beside token:admin, never as the
// decider), and a note (a deny's reason, required for a deny). The
// caller's endpoint takes no By: the token's principal decides.
type decisionRequest struct {
	By   string `json:"by"`
	Note string `json:"note"`
}

// readDecision reads a decision: the approval id of its path (404 when
// there is none) and its body (JSON, bounded, no unknown members); an
// empty body is an empty decision when allowEmpty. It answers the problem
// itself and reports false on a bad request.
func (s *Server) readDecision(w http.ResponseWriter, r *http.Request, allowEmpty bool) (id string, in decisionRequest, ok bool) {
	id, ok = approvalID(r)
	if !ok {
		approvalNotFound(w)
		return "", in, false
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDecisionBody))
	if err != nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodePayloadTooLarge, fmt.Sprintf("a decision is at most %d bytes", maxDecisionBody)))
		return "", in, false
	}
	if len(raw) == 0 && allowEmpty {
		return id, in, true
	}
	if ct := r.Header.Get("Content-Type"); !isJSONMediaType(ct) {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeUnsupportedMediaType, "send the decision as application/json"))
		return "", in, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		detail := "the body is not a JSON object of by and note"
		if err != nil {
			detail += ": " + err.Error()
		}
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeInvalidJSON, detail))
		return "", in, false
	}
	return id, in, true
}

// checkClaimedBy bounds the name given with the admin token: visible
// text a console can show on one line.
func checkClaimedBy(by string) error {
	if len(by) > maxDecisionBy || !utf8.ValidString(by) || strings.IndexFunc(by, unicode.IsControl) >= 0 {
		return fmt.Errorf(`"by" must be at most %d bytes of text without control characters`, maxDecisionBy)
	}
	return nil
}

// handleAdminDecide approves (approve) or denies a pending approval as an
// operator.
func (s *Server) handleAdminDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.Query()) > 0 {
			badAdminRequest(w, "a decision takes no query parameters")
			return
		}
		id, in, ok := s.readDecision(w, r, false)
		if !ok {
			return
		}
		if strings.TrimSpace(in.By) == "" {
			badAdminRequest(w, `"by" is required: who decides (kept as claimed_by; the decision is token:admin's)`)
			return
		}
		if err := checkClaimedBy(in.By); err != nil {
			badAdminRequest(w, err.Error())
			return
		}
		s.decideApproval(w, r, id, callpath.ApprovalDecision{Approve: approve, Decider: principal.Admin, ClaimedBy: in.By, Note: in.Note})
	}
}

// decideApproval records decision on approval id (Engine.DecideApproval:
// approvers, four eyes, quorum, note, receipt) and answers the approval
// as decided (still PENDING while a quorum is not reached).
func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request, id string, decision callpath.ApprovalDecision) {
	rec, err := s.DecideApproval(r.Context(), id, decision)
	var refused *callpath.DecisionRefused
	if errors.As(err, &refused) {
		callpath.WriteProblem(w, refused.Problem)
		return
	}
	if s.approvalError(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, toAdminApproval(rec, true))
}
