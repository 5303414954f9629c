package gateway_test

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// receiptLines decodes a JSON lines body.
func receiptLines(t testing.TB, body []byte) []receipts.Receipt {
	t.Helper()
	var out []receipts.Receipt
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		r, err := receipts.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestAdminReceiptsFiltersAndPages(t *testing.T) {
	h, _, rs := receiptsHarness(t, storeEmbedded)
	for step := range uint64(5) {
		if r := h.Do(refund("a", step, "5")); r.Status != http.StatusOK {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
	}
	gatewaytest.WantProblem(t, h.Do(refund("a", 9, "50000")), http.StatusForbidden, wire.CodeCallDenied)
	all := chainOf(t, rs, callpath.AnonymousTenant, 6)

	r := h.Send(http.MethodGet, "/admin/v1/receipts?event=denied", "tok-admin")
	if got := receiptLines(t, r.Body); r.Status != 200 || r.Header.Get("Content-Type") != "application/jsonl" || len(got) != 1 || got[0].Event != receipts.EventDenied {
		t.Fatalf("event filter: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	since := url.QueryEscape(all[2].Time.Format(time.RFC3339Nano))
	until := url.QueryEscape(all[4].Time.Format(time.RFC3339Nano))
	r = h.Send(http.MethodGet, "/admin/v1/receipts?tenant=anonymous&tool=refund&since="+since+"&until="+until, "tok-admin")
	if got := receiptLines(t, r.Body); len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("since/until: %s", r.Body)
	}

	// Pages of 4: the first has a next link, following it gives the rest;
	// the bytes of both pages together are an export that verifies.
	r = h.Send(http.MethodGet, "/admin/v1/receipts?limit=4", "tok-admin")
	link := r.Header.Get("Link")
	if len(receiptLines(t, r.Body)) != 4 || !strings.HasSuffix(link, `>; rel="next"`) {
		t.Fatalf("first page: %q %s", link, r.Body)
	}
	next := h.Send(http.MethodGet, strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`), "tok-admin")
	if got := receiptLines(t, next.Body); len(got) != 2 || got[0].Seq != 5 || next.Header.Get("Link") != "" {
		t.Fatalf("second page: %q %s", next.Header.Get("Link"), next.Body)
	}
	report, err := receipts.Verify(bytes.NewReader(append(r.Body, next.Body...)))
	if err != nil || !report.OK() || report.Tenants[0].Checked != 6 {
		t.Fatalf("verify pages: %v %+v", err, report)
	}
}

func TestAdminReceiptsBadQuery(t *testing.T) {
	h, _, _ := receiptsHarness(t, storeEmbedded)
	for query, names := range map[string]string{
		"since=yesterday":            `since "yesterday"`,
		"until=2026-13-01T00:00:00Z": `until "2026-13-01T00:00:00Z"`,
		"event=exploded":             `event "exploded"`,
		"limit=0":                    `limit "0"`,
		"colour=red":                 `"colour"`,
		"cursor=nope":                `cursor "nope"`,
	} {
		p := gatewaytest.WantProblem(t, h.Send(http.MethodGet, "/admin/v1/receipts?"+query, "tok-admin"), http.StatusBadRequest, wire.CodeInvalidAdminRequest)
		if detail, _ := p["detail"].(string); !strings.Contains(detail, names) {
			t.Errorf("%s: detail %q does not name %s", query, detail, names)
		}
	}
	gatewaytest.WantProblem(t, h.Send(http.MethodGet, "/admin/v1/receipts", ""), http.StatusUnauthorized, wire.CodeUnauthorized)
}

func TestAdminReceiptsOff(t *testing.T) {
	h := newHarness(t, storeEmbedded, nil, withAdmin("tok-admin"))
	gatewaytest.WantProblem(t, h.Send(http.MethodGet, "/admin/v1/receipts", "tok-admin"), http.StatusNotImplemented, wire.CodeAdminUnsupported)
}
