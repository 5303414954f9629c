package console

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// receiptsView is the Receipts page: the filter, one page of the chosen
// tenant's timeline (newest first) and every chain's verification state.
type receiptsView struct {
	Off                               bool
	Chains                            []ChainState
	Tenant, Tool, Event, Since, Until string
	Events                            []receipts.Event
	Receipts                          []receipts.Receipt
	// Older is the "before" of the next (older) page; 0: none.
	Older int64
	Error string
}

// receiptView is one receipt's own page (/console/receipts/{tenant}/{seq}).
type receiptView struct {
	Receipt receipts.Receipt
}

var allEvents = []receipts.Event{
	receipts.EventExecuted, receipts.EventDenied, receipts.EventApprovalRequested, receipts.EventApprovalGranted,
	receipts.EventApprovalDenied, receipts.EventApprovalExpired, receipts.EventEffectConflict, receipts.EventMadeUnknown,
	receipts.EventResolved, receipts.EventDeleted,
	receipts.EventBudgetReserved, receipts.EventBudgetCommitted, receipts.EventBudgetReleased,
}

// headProbePages bounds how far past the verified head the timeline looks
// for receipts sealed since (pages of the console's page size).
const headProbePages = 4

// parseTime reads a filter time: RFC 3339, or the browser's
// datetime-local form (taken as UTC).
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02T15:04", s)
}

// handleReceipts shows one page of a tenant's receipts, filtered, newest
// first. The store lists in seq order after a cursor, so a page is the
// window of seqs just below "before" (the chain's head on the first
// page), read in one bounded List and shown reversed; a selective filter
// may leave a window with few receipts, or none, and an older page.
func (c *Console) handleReceipts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := receiptsView{Tenant: q.Get("tenant"), Tool: strings.TrimSpace(q.Get("tool")), Event: q.Get("event"),
		Since: q.Get("since"), Until: q.Get("until"), Events: allEvents}
	chains, err := c.backend.ReceiptChains(r.Context())
	if errors.Is(err, ErrReceiptsOff) {
		v.Off = true
		c.pages.render(w, http.StatusOK, "receipts", pageFor(r, "Receipts", "receipts", v))
		return
	}
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	v.Chains = chains
	if v.Tenant == "" && len(chains) > 0 {
		v.Tenant = chains[0].Tenant
	}
	f := receipts.Filter{Tenant: v.Tenant, Tool: v.Tool, Event: receipts.Event(v.Event), Limit: c.opts.PageSize}
	var errSince, errUntil error
	f.Since, errSince = parseTime(v.Since)
	f.Until, errUntil = parseTime(v.Until)
	before, errBefore := strconv.ParseInt(q.Get("before"), 10, 64)
	switch {
	case errSince != nil || errUntil != nil:
		v.Error = "Since and until take a date and time (2026-01-31T14:00, UTC)."
	case q.Get("before") != "" && (errBefore != nil || before < 1):
		v.Error = "That page link is not one this console made; start again from the first page."
	case v.Tenant != "":
		if before == 0 {
			if before, err = c.newestSeq(r, chains, v.Tenant); err != nil {
				c.storeFailed(w, r, err)
				return
			}
			before++
		}
		f.After = max(0, before-1-int64(f.Limit))
		page, _, err := c.backend.Receipts(r.Context(), f)
		if err != nil {
			c.storeFailed(w, r, err)
			return
		}
		for _, rc := range page {
			if rc.Seq < before {
				v.Receipts = append(v.Receipts, rc)
			}
		}
		slices.Reverse(v.Receipts)
		if f.After > 0 {
			v.Older = f.After + 1
		}
	}
	status := http.StatusOK
	if v.Error != "" {
		status = http.StatusBadRequest
	}
	c.pages.render(w, status, "receipts", pageFor(r, "Receipts", "receipts", v))
}

// newestSeq is the seq of tenant's newest receipt: its verified head, or
// a receipt sealed since, looked for in a few bounded pages.
func (c *Console) newestSeq(r *http.Request, chains []ChainState, tenant string) (int64, error) {
	var seq int64
	for _, ch := range chains {
		if ch.Tenant == tenant {
			seq = ch.Head
		}
	}
	for range headProbePages {
		page, next, err := c.backend.Receipts(r.Context(), receipts.Filter{Tenant: tenant, After: seq, Limit: c.opts.PageSize})
		if err != nil {
			return 0, err
		}
		if n := len(page); n > 0 {
			seq = max(seq, page[n-1].Seq)
		}
		if next == 0 {
			break
		}
		seq = max(seq, next)
	}
	return seq, nil
}

// handleReceipt shows one receipt, every field of it, with links to its
// call's record.
func (c *Console) handleReceipt(w http.ResponseWriter, r *http.Request) {
	tenant := chi.URLParam(r, "tenant")
	seq, err := strconv.ParseInt(chi.URLParam(r, "seq"), 10, 64)
	if err != nil || seq < 1 {
		http.Error(w, "400: a receipt is named by its tenant and its seq, a number from 1", http.StatusBadRequest)
		return
	}
	page, _, err := c.backend.Receipts(r.Context(), receipts.Filter{Tenant: tenant, After: seq - 1, Limit: 1})
	switch {
	case errors.Is(err, ErrReceiptsOff):
		http.Error(w, "404: this gateway keeps no receipts", http.StatusNotFound)
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	if len(page) == 0 || page[0].Seq != seq {
		http.Error(w, "404: no receipt with that seq in that tenant's chain (it may have expired)", http.StatusNotFound)
		return
	}
	c.pages.render(w, http.StatusOK, "receipt", pageFor(r, "Receipt", "receipts", receiptView{Receipt: page[0]}))
}
