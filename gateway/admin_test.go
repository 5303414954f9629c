package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestAdminAPIIsScopedByTenant: the admin API addresses a record by tenant,
// shows only that tenant's record, deletes only it, and accepts neither
// tenant tokens nor path segments that are not names.
func TestAdminAPIIsScopedByTenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		h := newHarness(t, kind, []tools.Tool{tool}, withTenants(twoTenants), withAdmin("tok-admin"))
		call := callSpec{tool: "provision", session: "sess", step: 1, args: `{"x":1}`, token: "tok-acme"}
		key := derivedKey(t, "sess", 1, "provision", call.args)
		h.do(call)

		acmePath := "/admin/v1/records/acme/provision/" + key
		globexPath := "/admin/v1/records/globex/provision/" + key
		r := h.get(acmePath, "tok-admin")
		if r.status != 200 {
			t.Fatalf("admin get acme: %d %s", r.status, r.body)
		}
		if rec := mustJSON(t, r.body); rec["tenant"] != "acme" || rec["key"] != key || rec["state"] != "COMPLETED" {
			t.Fatalf("admin record %v", rec)
		}
		wantProblem(t, h.get(globexPath, "tok-admin"), 404, wire.CodeRecordNotFound)

		other := call
		other.token = "tok-globex"
		h.do(other)
		if r := h.send(http.MethodDelete, acmePath, "tok-admin"); r.status != 204 {
			t.Fatalf("admin delete: %d %s", r.status, r.body)
		}
		wantProblem(t, h.get(acmePath, "tok-admin"), 404, wire.CodeRecordNotFound)
		if r := h.get(globexPath, "tok-admin"); r.status != 200 || mustJSON(t, r.body)["tenant"] != "globex" {
			t.Fatalf("deleting acme's record touched globex's: %d %s", r.status, r.body)
		}
		if r := h.do(call); r.header.Get("Idempotent-Replayed") != "false" {
			t.Fatal("acme's call did not run again after the delete")
		}
		if r := h.do(other); r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("globex's record was lost")
		}

		// Tenant tokens do not open the admin API; the admin token does not
		// open the tool API.
		for _, tok := range []string{"tok-acme", "tok-globex", "", "tok-admin2"} {
			wantProblem(t, h.get(globexPath, tok), 401, wire.CodeUnauthorized)
			wantProblem(t, h.send(http.MethodDelete, globexPath, tok), 401, wire.CodeUnauthorized)
		}
		adminAsTenant := call
		adminAsTenant.token = "tok-admin"
		wantProblem(t, h.do(adminAsTenant), 401, wire.CodeUnauthorized)
		// Path segments that are not tenant or tool names never reach the store.
		for _, p := range []string{
			"/admin/v1/records/ac%3Ame/provision/" + key,
			"/admin/v1/records/ACME/provision/" + key,
			"/admin/v1/records/acme%0A/provision/" + key,
			"/admin/v1/records/acme/pr%D0%BEvision/" + key,
		} {
			wantProblem(t, h.get(p, "tok-admin"), 404, wire.CodeRecordNotFound)
		}
	})
}

// TestContractAdminRecords checks the admin record JSON for each state,
// response_status only for COMPLETED, expiry after the tool's replay_ttl
// (UNKNOWN included), 204/404/401, and no admin API without its token.
func TestContractAdminRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		const replayTTL = 3 * time.Hour
		done := newTestTool("done")
		slow := newTestTool("slow")
		release := make(chan struct{})
		slow.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			<-release
			return tools.JSON(200, map[string]any{})
		}
		pay := newTestTool("pay")
		h := newHarness(t, kind, []tools.Tool{done, slow, pay}, withAdmin("adm"),
			withPolicy("done", gateway.ToolPolicy{ReplayTTL: replayTTL}),
			withPolicy("pay", gateway.ToolPolicy{ReplayTTL: replayTTL, LeaseExpiry: idempotency.LeaseExpiryUnknown}))
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock)
		members := "created_at,execution_id,expires_at,fencing_token,fingerprint,key,response_status,state,tenant,tool"

		// COMPLETED.
		r := h.do(callSpec{tool: "done", session: "adm", step: 1, args: `{"a":1}`})
		key := derivedKey(t, "adm", 1, "done", `{"a":1}`)
		path := "/admin/v1/records/anonymous/done/" + key
		_, rec := adminRecord(t, h, path, "adm")
		if got := strings.Join(keysOf(t, mustRaw(t, rec)), ","); got != members {
			t.Fatalf("COMPLETED record members %s, want %s", got, members)
		}
		wantString(t, rec, "tenant", gateway.AnonymousTenant)
		wantString(t, rec, "tool", "done")
		wantString(t, rec, "key", key)
		wantString(t, rec, "state", "COMPLETED")
		wantString(t, rec, "fingerprint", fingerprintOf(t, `{"a":1}`))
		wantString(t, rec, "execution_id", r.header.Get("Tool-Execution-Id"))
		if string(rec["response_status"]) != "200" {
			t.Fatalf("response_status %s", rec["response_status"])
		}
		if fence, err := strconv.ParseInt(string(rec["fencing_token"]), 10, 64); err != nil || fence <= 0 {
			t.Fatalf("fencing_token %s must be a positive number", rec["fencing_token"])
		}
		created, expires := rfc3339(t, rec["created_at"]), rfc3339(t, rec["expires_at"])
		if d := expires.Sub(created); d < replayTTL-5*time.Second || d > replayTTL+5*time.Second {
			t.Fatalf("COMPLETED expires %v after creation, want the tool's replay_ttl %v", d, replayTTL)
		}

		// IN_PROGRESS: no response_status.
		go func() { _, _ = h.try(callSpec{tool: "slow", session: "adm", step: 2, args: `{}`}) }()
		eventually(t, 2*time.Second, "the slow tool to start", func() bool { return slow.total.Load() == 1 })
		_, rec = adminRecord(t, h, "/admin/v1/records/anonymous/slow/"+derivedKey(t, "adm", 2, "slow", `{}`), "adm")
		wantString(t, rec, "state", "IN_PROGRESS")
		if _, present := rec["response_status"]; present {
			t.Fatal("IN_PROGRESS record has response_status")
		}
		unblock()

		// UNKNOWN: a dead gateway's claim on a lease_expiry: unknown tool.
		payKey := derivedKey(t, "adm", 3, "pay", `{}`)
		_, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "pay", Key: payKey},
			Fingerprint: fingerprintOf(t, `{}`), Step: &idempotency.Step{SessionID: "adm", Index: 3}, StepGuard: true,
			ExecutionID: ulid.Make().String(), Owner: "dead", LockTTL: 300 * time.Millisecond,
			ReplayTTL: replayTTL, LeaseExpiry: idempotency.LeaseExpiryUnknown,
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		wantContractProblem(t, h.do(callSpec{tool: "pay", session: "adm", step: 3, args: `{}`}), 409, wire.CodeOutcomeUnknown, false)
		payPath := "/admin/v1/records/anonymous/pay/" + payKey
		_, rec = adminRecord(t, h, payPath, "adm")
		wantString(t, rec, "state", "UNKNOWN")
		if _, present := rec["response_status"]; present {
			t.Fatal("UNKNOWN record has response_status")
		}
		if left := time.Until(rfc3339(t, rec["expires_at"])); left < replayTTL-5*time.Second || left > replayTTL+5*time.Second {
			t.Fatalf("UNKNOWN expires in %v, want the tool's replay_ttl %v", left, replayTTL)
		}

		// Auth, delete, missing.
		wantContractProblem(t, h.get(payPath, ""), 401, wire.CodeUnauthorized, false)
		wantContractProblem(t, h.get(payPath, "wrong"), 401, wire.CodeUnauthorized, false)
		wantContractProblem(t, h.send(http.MethodDelete, payPath, "wrong"), 401, wire.CodeUnauthorized, false)
		del := h.send(http.MethodDelete, payPath, "adm")
		if del.status != 204 || len(del.body) != 0 {
			t.Fatalf("DELETE: %d %q", del.status, del.body)
		}
		wantContractProblem(t, h.send(http.MethodDelete, payPath, "adm"), 404, wire.CodeRecordNotFound, false)
		wantContractProblem(t, h.get(payPath, "adm"), 404, wire.CodeRecordNotFound, false)
		if r := h.do(callSpec{tool: "pay", session: "adm", step: 3, args: `{}`}); r.status != 200 || pay.total.Load() != 1 {
			t.Fatalf("after DELETE the next call must run the tool: %d runs=%d", r.status, pay.total.Load())
		}
	})
	t.Run("no admin API without its token", func(t *testing.T) {
		h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
		r := h.get("/admin/v1/records/anonymous/echo/k", "anything")
		if r.status != 404 {
			t.Fatalf("admin API without admin.token_sha256: %d", r.status)
		}
		wantRequestID(t, r.header)
	})
}
