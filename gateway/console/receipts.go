package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// receiptsView is the Receipts page: the filter, one page of the chosen
// tenant's timeline and every chain's verification state.
type receiptsView struct {
	Off                               bool
	Chains                            []ChainState
	Tenant, Tool, Event, Since, Until string
	Events                            []receipts.Event
	Receipts                          []receipts.Receipt
	Next                              int64
	Error                             string
}

var allEvents = []receipts.Event{
	receipts.EventExecuted, receipts.EventDenied, receipts.EventApprovalRequested, receipts.EventApprovalGranted,
	receipts.EventApprovalDenied, receipts.EventApprovalExpired, receipts.EventEffectConflict, receipts.EventMadeUnknown,
	receipts.EventResolved, receipts.EventDeleted,
}

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

// handleReceipts shows one page of a tenant's receipts, filtered.
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
	f.After, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	switch {
	case errSince != nil || errUntil != nil:
		v.Error = "Since and until take a date and time (2026-01-31T14:00, UTC)."
	case v.Tenant != "":
		v.Receipts, v.Next, err = c.backend.Receipts(r.Context(), f)
		if err != nil {
			c.storeFailed(w, r, err)
			return
		}
	}
	c.pages.render(w, http.StatusOK, "receipts", pageFor(r, "Receipts", "receipts", v))
}
