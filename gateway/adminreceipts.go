package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// GET /admin/v1/receipts answers receipts as JSON lines (each line one
// receipt, exactly as stored and hashed), each tenant's chain in seq
// order, tenants in name order. Filters: tenant, since and until (RFC
// 3339; since inclusive, until exclusive), tool, event; limit (1 … 1000,
// default 100) bounds a page. A page that is not the last carries a
// Link header with rel="next" whose URL holds the cursor.

// receiptsContentType is the media type of JSON lines.
const receiptsContentType = "application/jsonl"

// receiptsPageReads bounds the store reads of one page: a selective filter
// may read many receipts and keep none, so a page ends early (with its
// next link) rather than scanning a whole chain in one request.
const receiptsPageReads = 20

// receiptsQuery is a parsed GET /admin/v1/receipts.
type receiptsQuery struct {
	filter receipts.Filter // Tenant empty: every tenant
	// from is where the page starts: the tenant, and the seq after which
	// (the cursor "<tenant>:<seq>").
	from      string
	fromAfter int64
}

// receiptEvents are the events a query may name.
var receiptEvents = []receipts.Event{receipts.EventExecuted, receipts.EventDenied, receipts.EventApprovalRequested,
	receipts.EventApprovalGranted, receipts.EventApprovalDenied, receipts.EventApprovalExpired,
	receipts.EventEffectConflict, receipts.EventMadeUnknown, receipts.EventResolved, receipts.EventDeleted,
	receipts.EventToolPinned, receipts.EventToolAccepted,
	receipts.EventBudgetReserved, receipts.EventBudgetCommitted, receipts.EventBudgetReleased}

// parseReceiptsQuery reads the query; its error names what is wrong.
func parseReceiptsQuery(q url.Values) (receiptsQuery, error) {
	if err := checkListParams(q, "tenant", "since", "until", "tool", "event", "limit", "cursor"); err != nil {
		return receiptsQuery{}, err
	}
	f := receipts.Filter{Tenant: q.Get("tenant"), Tool: q.Get("tool"), Event: receipts.Event(q.Get("event")), Limit: receipts.DefaultLimit}
	// The tools' own chain (pins, accepted changes) is named like no tenant.
	tenant := f.Tenant
	if tenant == receipts.ToolsChain {
		tenant = ""
	}
	if err := checkListNames(tenant, f.Tool); err != nil {
		return receiptsQuery{}, err
	}
	if f.Event != "" && !knownEvent(f.Event) {
		return receiptsQuery{}, fmt.Errorf("event %q: not a receipt event (want one of %s)", string(f.Event), eventList())
	}
	var err error
	if f.Since, err = queryTime(q, "since"); err != nil {
		return receiptsQuery{}, err
	}
	if f.Until, err = queryTime(q, "until"); err != nil {
		return receiptsQuery{}, err
	}
	if f.Limit, err = listLimit(q, receipts.DefaultLimit, receipts.MaxLimit); err != nil {
		return receiptsQuery{}, err
	}
	rq := receiptsQuery{filter: f, from: f.Tenant}
	if v := q.Get("cursor"); v != "" {
		tenant, seq, ok := strings.Cut(v, ":")
		n, err := strconv.ParseInt(seq, 10, 64)
		if !ok || err != nil || n < 0 || !tools.ValidName(tenant) || (f.Tenant != "" && tenant != f.Tenant) {
			return receiptsQuery{}, fmt.Errorf("cursor %q: not one this endpoint gave", v)
		}
		rq.from, rq.fromAfter = tenant, n
	}
	return rq, nil
}

// queryTime parses the RFC 3339 time of parameter name (zero if absent).
func queryTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", name, v)
	}
	return t, nil
}

func knownEvent(e receipts.Event) bool {
	for _, k := range receiptEvents {
		if k == e {
			return true
		}
	}
	return false
}

func eventList() string {
	names := make([]string, len(receiptEvents))
	for i, e := range receiptEvents {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// handleAdminReceipts answers one page of receipts.
func (s *Server) handleAdminReceipts(w http.ResponseWriter, r *http.Request) {
	if s.ReceiptStore() == nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this gateway keeps no receipts (receipts.enabled is false)"))
		return
	}
	q, err := parseReceiptsQuery(r.URL.Query())
	if err != nil {
		badAdminRequest(w, err.Error())
		return
	}
	page, cursor, err := s.receiptsPage(r.Context(), q)
	if err != nil {
		s.Logger().ErrorContext(r.Context(), "admin: receipts store failed", "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "the receipts store is unreachable").WithRetryAfter(1))
		return
	}
	var body []byte
	for _, rc := range page {
		line, err := receipts.Encode(rc)
		if err != nil {
			s.Logger().ErrorContext(r.Context(), "admin: receipt not encodable", "tenant", rc.Tenant, "seq", rc.Seq, "error", err)
			callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "a stored receipt could not be encoded"))
			return
		}
		body = append(append(body, line...), '\n')
	}
	if cursor != "" {
		next := r.URL.Query()
		next.Set("cursor", cursor)
		w.Header().Set("Link", "<"+r.URL.Path+"?"+next.Encode()+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", receiptsContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// receiptsPage reads up to the query's limit of receipts, tenant after
// tenant from the cursor's, and returns the next page's cursor ("" when
// this page is the last).
func (s *Server) receiptsPage(ctx context.Context, q receiptsQuery) ([]receipts.Receipt, string, error) {
	tenants := []string{q.filter.Tenant}
	if q.filter.Tenant == "" {
		all, err := s.ReceiptStore().Tenants(ctx)
		if err != nil {
			return nil, "", err
		}
		tenants = all
	}
	var out []receipts.Receipt
	reads := 0
	for _, tenant := range tenants {
		if tenant < q.from {
			continue
		}
		f := q.filter
		f.Tenant, f.After = tenant, 0
		if tenant == q.from {
			f.After = q.fromAfter
		}
		for {
			f.Limit = q.filter.Limit - len(out)
			if f.Limit == 0 || reads == receiptsPageReads {
				return out, tenant + ":" + strconv.FormatInt(f.After, 10), nil
			}
			page, next, err := s.ReceiptStore().List(ctx, f)
			reads++
			if err != nil {
				return nil, "", err
			}
			out = append(out, page...)
			if next == 0 {
				break
			}
			f.After = next
		}
	}
	return out, "", nil
}
