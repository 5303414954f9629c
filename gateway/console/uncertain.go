package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// recordView is one uncertain record as the pages show it. It never holds
// the idempotency key: the record is named by its execution id.
type recordView struct {
	ExecutionID, Tool, Tenant, State, Session, Step string
	CreatedAt, LeaseExpiresAt                       time.Time
	Arguments                                       []byte
	// Reconciled is how many times reconciliation asked the tool's owner;
	// Attempts its latest answers, oldest first.
	Reconciled int
	Attempts   []idempotency.ReconcileAttempt
	LastAnswer string
}

// uncertainView is the Uncertain calls page.
type uncertainView struct {
	Unknown, Abandoned []recordView
	NextCursor         string
}

// resolveView is one record's page with its resolve form.
type resolveView struct {
	Record recordView
	// The form's values, kept when it is shown again with Error.
	Outcome, Status, ContentType, ResponseBody string
	Error                                      string
}

func toRecordView(rec idempotency.Record) recordView {
	v := recordView{ExecutionID: rec.ExecutionID, Tool: rec.Scope.Tool, Tenant: rec.Scope.Tenant, State: string(rec.State),
		CreatedAt: rec.CreatedAt, LeaseExpiresAt: rec.LeaseExpiresAt, Arguments: rec.CanonicalArguments}
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
	var v uncertainView
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
	v := resolveView{Record: toRecordView(rec), Outcome: "committed", Status: "200", ContentType: "application/json"}
	if !uncertain(rec, c.opts.Now()) {
		v.Error = fmt.Sprintf("This record is %s: only an UNKNOWN record, or an IN_PROGRESS one whose lease expired, can be resolved.", rec.State)
	}
	c.pages.render(w, http.StatusOK, "record", pageFor(r, "Uncertain call", "uncertain", v))
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
		v.Error = msg
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
	http.Redirect(w, r, Base+"/uncertain", http.StatusSeeOther)
}
