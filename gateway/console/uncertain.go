package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// recordView is one uncertain record as the pages show it. It never holds
// the idempotency key: the record is named by its execution id.
type recordView struct {
	ExecutionID, Tool, Tenant, State, Session, Step string
	// Identity says which identity keyed the call (idempotency.RecordIdentity).
	Identity                  string
	CreatedAt, LeaseExpiresAt time.Time
	Arguments                 []byte
	// Reconciled is how many times reconciliation asked the tool's owner;
	// Attempts its latest answers, oldest first.
	Reconciled int
	Attempts   []idempotency.ReconcileAttempt
	LastAnswer string
	// KeyHash names the record in its deep link
	// (/console/records/{tool}/{key-hash}).
	KeyHash string
	// Response is the outcome of a completed record; ResolvedBy says who
	// resolved it when it was resolved rather than run.
	Response   *idempotency.StoredResponse
	ResolvedBy string
	ApprovalID string
}

// uncertainView is the Uncertain calls page.
type uncertainView struct {
	Unknown, Abandoned []recordView
	NextCursor         string
	// Done is "not_executed" after the operator removed a record.
	Done string
}

// resolveView is one record's page with its resolve form.
type resolveView struct {
	Record recordView
	// Resolvable is true while the record is uncertain: only then is the
	// resolve form shown.
	Resolvable bool
	// Done is the outcome the signed-in operator just resolved it as.
	Done string
	// The form's values, kept when it is shown again with Error.
	Outcome, Status, ContentType, ResponseBody string
	Error                                      string
}

func toRecordView(rec idempotency.Record) recordView {
	v := recordView{ExecutionID: rec.ExecutionID, Tool: rec.Scope.Tool, Tenant: rec.Scope.Tenant, State: string(rec.State),
		CreatedAt: rec.CreatedAt, LeaseExpiresAt: rec.LeaseExpiresAt, Arguments: rec.CanonicalArguments,
		Response: rec.Response, ResolvedBy: rec.ResolvedBy, Identity: idempotency.IdentityOfRecord(rec).String()}
	if rec.Scope.Key != "" {
		v.KeyHash = receipts.KeyHash(rec.Scope.Key)
	}
	if rec.Approval != nil {
		v.ApprovalID = rec.Approval.ID
	}
	if rec.Step != nil {
		v.Session, v.Step = rec.Step.SessionID, strconv.FormatUint(rec.Step.Index, 10)
	}
	if r := rec.Reconciliation; r != nil {
		v.Reconciled, v.Attempts = r.Count, r.Attempts
		if n := len(r.Attempts); n > 0 {
			v.LastAnswer = r.Attempts[n-1].Outcome
		}
	}
	return v
}

// uncertain reports whether an operator may resolve rec: UNKNOWN, or
// IN_PROGRESS whose lease expired (abandoned by a gateway that died).
func uncertain(rec idempotency.Record, now time.Time) bool {
	return rec.State == idempotency.StateUnknown ||
		(rec.State == idempotency.StateInProgress && !rec.LeaseExpiresAt.IsZero() && !now.Before(rec.LeaseExpiresAt))
}

// handleUncertain lists UNKNOWN records and abandoned IN_PROGRESS ones,
// one bounded page of each.
func (c *Console) handleUncertain(w http.ResponseWriter, r *http.Request) {
	v := uncertainView{Done: r.URL.Query().Get("done")}
	unknown, err := c.backend.ListRecords(r.Context(), idempotency.ListFilter{State: idempotency.StateUnknown, Limit: c.opts.PageSize, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	for _, rec := range unknown.Records {
		v.Unknown = append(v.Unknown, toRecordView(rec))
	}
	v.NextCursor = unknown.Cursor
	running, err := c.backend.ListRecords(r.Context(), idempotency.ListFilter{State: idempotency.StateInProgress, Limit: c.opts.PageSize})
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	now := c.opts.Now()
	for _, rec := range running.Records {
		if uncertain(rec, now) {
			v.Abandoned = append(v.Abandoned, toRecordView(rec))
		}
	}
	c.pages.render(w, http.StatusOK, "uncertain", pageFor(r, "Uncertain calls", "uncertain", v))
}

// uncertainRecord reads the record of the path's execution id.
func (c *Console) uncertainRecord(w http.ResponseWriter, r *http.Request) (idempotency.Record, bool) {
	rec, err := c.backend.FindExecution(r.Context(), chi.URLParam(r, "execution_id"))
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		http.Error(w, "404: no record with that execution id (it may have been resolved or removed)", http.StatusNotFound)
		return rec, false
	case err != nil:
		c.storeFailed(w, r, err)
		return rec, false
	}
	return rec, true
}

// handleUncertainRecord shows one record, its arguments and the resolve
// form.
func (c *Console) handleUncertainRecord(w http.ResponseWriter, r *http.Request) {
	rec, ok := c.uncertainRecord(w, r)
	if !ok {
		return
	}
	c.showRecord(w, r, rec)
}

// showRecord renders a record's page: the resolve form while it is
// uncertain, its outcome once it is not.
func (c *Console) showRecord(w http.ResponseWriter, r *http.Request, rec idempotency.Record) {
	v := resolveView{Record: toRecordView(rec), Resolvable: uncertain(rec, c.opts.Now()), Outcome: "committed", Status: "200", ContentType: "application/json"}
	if d := r.URL.Query().Get("done"); d == "committed" {
		v.Done = d
	}
	c.pages.render(w, http.StatusOK, "record", pageFor(r, "Call", "uncertain", v))
}

// handleRecord shows the record of a tool's call named by its key's hash
// (/console/records/{tool}/{key-hash}), in any state.
func (c *Console) handleRecord(w http.ResponseWriter, r *http.Request) {
	tool, keyHash := chi.URLParam(r, "tool"), chi.URLParam(r, "key_hash")
	if !isKeyHash(keyHash) {
		http.Error(w, "400: a record is named by the SHA-256 (64 hex digits) of its idempotency key", http.StatusBadRequest)
		return
	}
	rec, err := c.backend.FindRecord(r.Context(), tool, keyHash)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		http.Error(w, "404: no record of that tool with that key (it may have expired or been removed)", http.StatusNotFound)
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	c.showRecord(w, r, rec)
}

// isKeyHash reports whether s is a lower-case hex SHA-256.
func isKeyHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, ch := range s {
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
			return false
		}
	}
	return true
}

// handleResolve resolves one record as committed (with the response the
// tool gave, validated by the gateway before anything changes) or as not
// executed (the record is removed, so the agent's retry runs the tool).
func (c *Console) handleResolve(w http.ResponseWriter, r *http.Request) {
	rec, ok := c.uncertainRecord(w, r)
	if !ok {
		return
	}
	f := r.PostForm
	v := resolveView{Record: toRecordView(rec), Outcome: f.Get("outcome"), Status: strings.TrimSpace(f.Get("status")),
		ContentType: strings.TrimSpace(f.Get("content_type")), ResponseBody: f.Get("body")}
	fail := func(status int, msg string) {
		v.Error, v.Resolvable = msg, uncertain(rec, c.opts.Now())
		c.pages.render(w, status, "record", pageFor(r, "Uncertain call", "uncertain", v))
	}
	if !uncertain(rec, c.opts.Now()) {
		fail(http.StatusConflict, fmt.Sprintf("This record is %s now; nothing changed.", rec.State))
		return
	}
	by := sessionFrom(r.Context()).By
	switch v.Outcome {
	case "not_executed":
		if err := c.backend.Delete(r.Context(), rec, by); err != nil && !errors.Is(err, idempotency.ErrNotFound) {
			c.storeFailed(w, r, err)
			return
		}
	case "committed":
		status, err := strconv.Atoi(v.Status)
		if err != nil {
			fail(http.StatusBadRequest, "The status must be a number from 200 to 499; nothing changed.")
			return
		}
		_, err = c.backend.Resolve(r.Context(), rec.Scope, Resolution{Status: status, ContentType: v.ContentType, Body: v.ResponseBody, By: by})
		switch {
		case errors.Is(err, ErrInvalidResolution):
			fail(http.StatusBadRequest, strings.TrimPrefix(err.Error(), ErrInvalidResolution.Error()+": ")+"; nothing changed.")
			return
		case errors.Is(err, idempotency.ErrNotResolvable), errors.Is(err, idempotency.ErrNotFound):
			fail(http.StatusConflict, "The record is no longer uncertain; nothing changed.")
			return
		case err != nil:
			c.storeFailed(w, r, err)
			return
		}
	default:
		fail(http.StatusBadRequest, "Choose committed or not executed; nothing changed.")
		return
	}
	c.opts.Log.InfoContext(r.Context(), "console: record resolved", "execution_id", rec.ExecutionID, "outcome", v.Outcome, "by", by)
	if v.Outcome == "committed" {
		// The record stays, completed: its page shows the outcome.
		http.Redirect(w, r, Base+"/records/"+url.PathEscape(rec.Scope.Tool)+"/"+receipts.KeyHash(rec.Scope.Key)+"?done=committed", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Base+"/uncertain?done=not_executed", http.StatusSeeOther)
}
