package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/buildinfo"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// TestRecordsGauge: gateway_records{state,tool} counts, from the store,
// an UNKNOWN record that no client ever retries (the counter of 409
// outcome_unknown answers never moves for it) and a live IN_PROGRESS
// claim and a call waiting for approval; every tool that keeps records
// has its 0 series; resolving the
// record brings the gauge back to 0. On every store.
func TestRecordsGauge(t *testing.T) {
	for _, kind := range allStores {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			pay, other := newTestTool("pay"), newTestTool("other")
			h := newHarness(t, kind, []tools.Tool{pay, other}, withAdmin("adm"), withLockTTL(300*time.Millisecond),
				withPolicy("pay", tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown}),
				func(o *callpath.Options) { o.RecordsSampleInterval = 50 * time.Millisecond })
			ctx := context.Background()
			claim := func(key string, ttl time.Duration, owner string) idempotency.Decision {
				t.Helper()
				d, err := h.store.Claim(ctx, idempotency.ClaimRequest{
					Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: key},
					Fingerprint: fingerprintOf(t, `{}`), ExecutionID: ulid.Make().String(), Owner: owner,
					LockTTL: ttl, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
				})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			// A gateway died holding this claim, and nobody called since:
			// still IN_PROGRESS in the store, abandoned for the gauge.
			claim("k-abandoned", 100*time.Millisecond, "dead-too")
			// A gateway died holding a lease_expiry: unknown claim; the
			// next claim (say, a sweep of another replica's caller) made
			// it UNKNOWN. No client asks for it again.
			claim("k-unknown", 300*time.Millisecond, "dead")
			time.Sleep(400 * time.Millisecond)
			if d := claim("k-unknown", time.Minute, "next"); d.Outcome != idempotency.OutcomeUnknown {
				t.Fatalf("second claim: outcome %v, want unknown", d.Outcome)
			}
			// A call running now.
			claim("k-running", time.Minute, "live")
			// A call waiting for a human's approval.
			if d, err := h.store.Claim(ctx, idempotency.ClaimRequest{
				Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: "k-pending"},
				Fingerprint: fingerprintOf(t, `{}`), ExecutionID: ulid.Make().String(), Owner: "asker",
				LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
				Approval: &idempotency.ApprovalClaim{ID: ulid.Make().String(), Timeout: time.Hour, UseWithin: time.Hour},
			}); err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
				t.Fatalf("pending approval: %v %v", d.Outcome, err)
			}

			want := map[string]float64{"UNKNOWN/pay": 1, "IN_PROGRESS/pay": 2, "UNKNOWN/other": 0, "IN_PROGRESS/other": 0,
				"AWAITING_APPROVAL/pay": 1, "AWAITING_APPROVAL/other": 0}
			// k-abandoned's lease ended over a lock_ttl ago; k-running's is alive.
			eventually(t, 5*time.Second, "gauge counts the records", func() bool {
				v := gaugeValues(h, "gateway_records_abandoned")
				return gaugeEquals(h, want) && v["/pay"] == 1 && v["/other"] == 0 && len(v) == 2
			})
			if n := h.counter("pay", "outcome_unknown"); n != 0 {
				t.Fatalf("outcome_unknown counter %v: no client asked, the gauge alone shows the record", n)
			}
			if v := gaugeValues(h, "gateway_records_truncated"); v["UNKNOWN/"] != 0 || v["IN_PROGRESS/"] != 0 {
				t.Fatalf("truncated: %v", v)
			}

			// The operator resolves it: the gauge comes back to 0.
			admin := h.store.(idempotency.Admin)
			if _, err := admin.Resolve(ctx, idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: "k-unknown"},
				idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.Resolve(ctx, idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: "k-abandoned"},
				idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}, time.Hour); err != nil {
				t.Fatal(err)
			}
			want["UNKNOWN/pay"], want["IN_PROGRESS/pay"] = 0, 1
			eventually(t, 5*time.Second, "gauge back to 0 after resolve", func() bool {
				return gaugeEquals(h, want) && gaugeValues(h, "gateway_records_abandoned")["/pay"] == 0
			})

			// Drain stops the sampler: nothing samples afterwards.
			if err := h.gw.Drain(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gaugeEquals reports whether gateway_records holds exactly want
// ("STATE/tool" → value).
func gaugeEquals(h *harness, want map[string]float64) bool {
	got := gaugeValues(h, "gateway_records")
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

// gaugeValues reads a gauge with a state label (and maybe a tool label) as
// "STATE/tool" → value.
func gaugeValues(h *harness, name string) map[string]float64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[fmt.Sprintf("%s/%s", labels["state"], labels["tool"])] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestOneVersionEverywhere: the MCP endpoint's serverInfo and the
// gateway_build_info metric report buildinfo.Version(), the version
// `gateway -version` prints.
func TestOneVersionEverywhere(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")})
	cs := h.mcpSession(mcpClientOptions{})
	if got := cs.InitializeResult().ServerInfo.Version; got != buildinfo.Version() {
		t.Fatalf("MCP serverInfo.version %q, want %q", got, buildinfo.Version())
	}
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, f := range families {
		if f.GetName() == "gateway_build_info" {
			for _, m := range f.GetMetric() {
				versions = append(versions, m.GetLabel()[0].GetValue())
			}
		}
	}
	if len(versions) != 1 || versions[0] != buildinfo.Version() {
		t.Fatalf("gateway_build_info versions %v, want [%s]", versions, buildinfo.Version())
	}
}
