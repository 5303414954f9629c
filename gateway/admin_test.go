package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/callpath"
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
			withPolicy("done", tools.Policy{ReplayTTL: replayTTL}),
			withPolicy("pay", tools.Policy{ReplayTTL: replayTTL, LeaseExpiry: idempotency.LeaseExpiryUnknown}))
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock)
		members := "created_at,execution_id,expires_at,fencing_token,fingerprint,identity,key,response_status,session_id,state,step_index,tenant,tool,upstream_key"

		// COMPLETED.
		r := h.do(callSpec{tool: "done", session: "adm", step: 1, args: `{"a":1}`})
		key := derivedKey(t, "adm", 1, "done", `{"a":1}`)
		path := "/admin/v1/records/anonymous/done/" + key
		_, rec := adminRecord(t, h, path, "adm")
		if got := strings.Join(keysOf(t, mustRaw(t, rec)), ","); got != members {
			t.Fatalf("COMPLETED record members %s, want %s", got, members)
		}
		wantString(t, rec, "tenant", callpath.AnonymousTenant)
		wantString(t, rec, "tool", "done")
		wantString(t, rec, "key", key)
		wantString(t, rec, "state", "COMPLETED")
		wantString(t, rec, "fingerprint", fingerprintOf(t, `{"a":1}`))
		wantString(t, rec, "execution_id", r.header.Get("Tool-Execution-Id"))
		if string(rec["response_status"]) != "200" {
			t.Fatalf("response_status %s", rec["response_status"])
		}
		// Operator context: the step, the key the upstream saw; a COMPLETED
		// record keeps no arguments, even when asked for them.
		wantString(t, rec, "session_id", "adm")
		if string(rec["identity"]) != `{"kind":"gateway"}` {
			t.Fatalf("identity %s, want the gateway's own", rec["identity"])
		}
		if string(rec["step_index"]) != "1" {
			t.Fatalf("step_index %s, want 1", rec["step_index"])
		}
		wantString(t, rec, "upstream_key", tools.ScopedKey(callpath.AnonymousTenant, "done", key))
		if _, rec := adminRecord(t, h, path+"?include=arguments", "adm"); rec["canonical_arguments"] != nil {
			t.Fatalf("COMPLETED record has canonical_arguments %s", rec["canonical_arguments"])
		}
		if fence, err := strconv.ParseInt(string(rec["fencing_token"]), 10, 64); err != nil || fence <= 0 {
			t.Fatalf("fencing_token %s must be a positive number", rec["fencing_token"])
		}
		created, expires := rfc3339(t, rec["created_at"]), rfc3339(t, rec["expires_at"])
		if d := expires.Sub(created); d < replayTTL-5*time.Second || d > replayTTL+5*time.Second {
			t.Fatalf("COMPLETED expires %v after creation, want the tool's replay_ttl %v", d, replayTTL)
		}

		// IN_PROGRESS: no response_status.
		// Its canonical arguments come with ?include=arguments (JCS: members
		// sorted, 1.0 written 1), and only then.
		slowArgs := `{"z":[1.0,"é"],"a":{"y":2,"x":1}}`
		go func() { _, _ = h.try(callSpec{tool: "slow", session: "adm", step: 2, args: slowArgs}) }()
		eventually(t, 2*time.Second, "the slow tool to start", func() bool { return slow.total.Load() == 1 })
		slowPath := "/admin/v1/records/anonymous/slow/" + derivedKey(t, "adm", 2, "slow", slowArgs)
		_, rec = adminRecord(t, h, slowPath, "adm")
		if rec["canonical_arguments"] != nil {
			t.Fatal("canonical_arguments without ?include=arguments")
		}
		_, rec = adminRecord(t, h, slowPath+"?include=arguments,response", "adm")
		wantString(t, rec, "canonical_arguments", `{"a":{"x":1,"y":2},"z":[1,"é"]}`)
		wantString(t, rec, "state", "IN_PROGRESS")
		if _, present := rec["response_status"]; present {
			t.Fatal("IN_PROGRESS record has response_status")
		}
		unblock()

		// UNKNOWN: a dead gateway's claim on a lease_expiry: unknown tool.
		payKey := derivedKey(t, "adm", 3, "pay", `{}`)
		_, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: payKey},
			Fingerprint: fingerprintOf(t, `{}`), Step: &idempotency.Step{SessionID: "adm", Index: 3}, StepGuard: true,
			ExecutionID: ulid.Make().String(), Owner: "dead", LockTTL: 300 * time.Millisecond,
			ReplayTTL: replayTTL, LeaseExpiry: idempotency.LeaseExpiryUnknown,
			CanonicalArguments: []byte(`{}`),
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
		_, rec = adminRecord(t, h, payPath+"?include=arguments", "adm")
		wantString(t, rec, "canonical_arguments", `{}`)
		wantString(t, rec, "upstream_key", tools.ScopedKey(callpath.AnonymousTenant, "pay", payKey))

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

// adminPost sends a JSON body to an admin path.
func adminPost(t *testing.T, h *harness, path, token, body string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// adminListing is the answer of GET /admin/v1/records.
type adminListing struct {
	Records []struct {
		Tenant, Tool, Key, State string
		ExecutionID              string `json:"execution_id"`
		ResponseStatus           int    `json:"response_status"`
	} `json:"records"`
	NextCursor *string `json:"next_cursor"`
}

func listRecords(t *testing.T, h *harness, query string) adminListing {
	t.Helper()
	r := h.get("/admin/v1/records"+query, "adm")
	if r.status != 200 {
		t.Fatalf("list %s: %d %s", query, r.status, r.body)
	}
	var l adminListing
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("list %s: %v: %s", query, err, r.body)
	}
	return l
}

// TestAdminListAndFind: records made by real calls are listed by filter
// and page by page, found by the execution id a client saw (with the
// stored response on request), and bad queries answer 400.
func TestAdminListAndFind(t *testing.T) {
	echo := newTestTool("echo")
	mail := newTestTool("mail")
	h := newHarness(t, storeEmbedded, []tools.Tool{echo, mail}, withTenants(twoTenants), withAdmin("adm"))
	execs := map[string]string{} // execution id → tenant
	for i, c := range []callSpec{
		{tool: "echo", session: "s1", step: 1, args: `{"n":1}`, token: "tok-acme"},
		{tool: "echo", session: "s1", step: 2, args: `{"n":2}`, token: "tok-acme"},
		{tool: "mail", session: "s2", step: 1, args: `{"n":3}`, token: "tok-acme"},
		{tool: "echo", session: "s1", step: 1, args: `{"n":4}`, token: "tok-globex"},
	} {
		r := h.do(c)
		if r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
		execs[r.header.Get("Tool-Execution-Id")] = strings.TrimPrefix(c.token, "tok-")
	}

	all := listRecords(t, h, "")
	if len(all.Records) != 4 || all.NextCursor != nil {
		t.Fatalf("list all: %+v", all)
	}
	for _, rec := range all.Records {
		// Listings carry no response, so no response_status either.
		if execs[rec.ExecutionID] != rec.Tenant || rec.State != "COMPLETED" || rec.ResponseStatus != 0 || len(rec.Key) != 64 {
			t.Errorf("listed record %+v does not match a call", rec)
		}
	}
	for query, want := range map[string]int{
		"?tenant=acme":                      3,
		"?tenant=globex":                    1,
		"?tool=echo":                        3,
		"?tenant=acme&tool=mail":            1,
		"?tenant=acme&session=s1":           2,
		"?tenant=globex&session=s2":         0,
		"?state=COMPLETED&tenant=acme":      3,
		"?state=UNKNOWN":                    0,
		"?state=IN_PROGRESS&limit=1000":     0,
		"?tenant=acme&tool=echo&session=s1": 2,
	} {
		if got := listRecords(t, h, query); len(got.Records) != want {
			t.Errorf("list %s: %d records, want %d", query, len(got.Records), want)
		}
	}
	// Pages of one visit every record once.
	seen := map[string]int{}
	query := "?limit=1"
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging did not end")
		}
		l := listRecords(t, h, query)
		if len(l.Records) > 1 {
			t.Fatalf("limit=1 page has %d records", len(l.Records))
		}
		for _, rec := range l.Records {
			seen[rec.ExecutionID]++
		}
		if l.NextCursor == nil {
			break
		}
		query = "?limit=1&cursor=" + url.QueryEscape(*l.NextCursor)
	}
	if len(seen) != 4 {
		t.Fatalf("paging saw %v, want the 4 executions once each", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("execution %s listed %d times", id, n)
		}
	}

	for _, q := range []string{"?state=DONE", "?state=unknown", "?limit=0", "?limit=1001", "?limit=x", "?session=s1",
		"?tenant=ACME", "?tool=a%2Fb", "?cursor=%21%21", "?stat=UNKNOWN", "?limit=1&limit=2"} {
		wantProblem(t, h.get("/admin/v1/records"+q, "adm"), 400, wire.CodeInvalidAdminRequest)
	}
	wantProblem(t, h.get("/admin/v1/records", "tok-acme"), 401, wire.CodeUnauthorized)
	wantProblem(t, h.get("/admin/v1/executions/x", ""), 401, wire.CodeUnauthorized)

	// Find by execution id, in any tenant, with the stored response.
	for id, tenant := range execs {
		r := h.get("/admin/v1/executions/"+id+"?include=response", "adm")
		if r.status != 200 {
			t.Fatalf("find %s: %d %s", id, r.status, r.body)
		}
		var rec struct {
			Tenant      string `json:"tenant"`
			ExecutionID string `json:"execution_id"`
			Response    struct {
				Status      int             `json:"status"`
				ContentType string          `json:"content_type"`
				Body        json.RawMessage `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal(r.body, &rec); err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Response.Body, &body); err != nil {
			t.Fatalf("response body is not the tool's JSON: %s", r.body)
		}
		if rec.Tenant != tenant || rec.ExecutionID != id || rec.Response.Status != 200 || body["execution_id"] != id {
			t.Errorf("find %s = %s", id, r.body)
		}
		if r := h.get("/admin/v1/executions/"+id, "adm"); r.status != 200 || bytes.Contains(r.body, []byte(`"response"`)) {
			t.Errorf("find without include: %d %s", r.status, r.body)
		}
	}
	if r := h.send(http.MethodPut, "/admin/v1/records/acme/echo/"+strings.Repeat("a", 64), "adm"); r.status != 405 || r.header.Get("Allow") != "GET, HEAD, POST, DELETE" {
		t.Errorf("PUT on a record path: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	wantProblem(t, h.get("/admin/v1/executions/01HZZZZZZZZZZZZZZZZZZZZZZZ", "adm"), 404, wire.CodeRecordNotFound)
	wantProblem(t, h.get("/admin/v1/executions/x?include=body", "adm"), 400, wire.CodeInvalidAdminRequest)
	key := derivedKey(t, "s2", 1, "mail", `{"n":3}`)
	if r := h.get("/admin/v1/records/acme/mail/"+key+"?include=response", "adm"); r.status != 200 || !bytes.Contains(r.body, []byte(`"response":{"status":200`)) {
		t.Errorf("get with include=response: %d %s", r.status, r.body)
	}
}

// TestAdminResolveEndToEnd: a call goes UNKNOWN (its gateway died holding
// a lease_expiry: unknown tool), the operator finds it in the UNKNOWN
// listing and resolves it with what really happened, and the agent's
// retry replays exactly that, marked replayed, without running the tool.
func TestAdminResolveEndToEnd(t *testing.T) {
	const replayTTL = 5 * time.Hour
	pay := newTestTool("pay")
	h := newHarness(t, storeEmbedded, []tools.Tool{pay}, withAdmin("adm"),
		withPolicy("pay", tools.Policy{ReplayTTL: replayTTL, LeaseExpiry: idempotency.LeaseExpiryUnknown}))
	call := callSpec{tool: "pay", session: "agent", step: 4, args: `{"amount":5}`}
	key := derivedKey(t, "agent", 4, "pay", call.args)
	deadExec := ulid.Make().String()
	// The gateway that ran the tool died before completing: its claim's
	// lease runs out.
	if _, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: key},
		Fingerprint: fingerprintOf(t, call.args), Step: &idempotency.Step{SessionID: "agent", Index: 4}, StepGuard: true,
		StepBoundKey: true, ExecutionID: deadExec, Owner: "dead", LockTTL: 300 * time.Millisecond,
		ReplayTTL: replayTTL, LeaseExpiry: idempotency.LeaseExpiryUnknown,
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	wantProblem(t, h.do(call), 409, wire.CodeOutcomeUnknown)

	// The operator lists UNKNOWN records.
	l := listRecords(t, h, "?state=UNKNOWN")
	if len(l.Records) != 1 || l.Records[0].Key != key || l.Records[0].ExecutionID != deadExec {
		t.Fatalf("UNKNOWN listing: %+v", l)
	}
	path := "/admin/v1/records/anonymous/pay/" + key + "/resolve"
	// Bad resolutions change nothing.
	for body, code := range map[string]string{
		`{"status":500,"body":{}}`: wire.CodeInvalidAdminRequest,
		`{"body":{}}`:              wire.CodeInvalidAdminRequest,
		`{"status":200,"content_type":"text/plain","body":{"a":1}}`: wire.CodeInvalidAdminRequest,
		`{"status":200,"body_base64":"%%%"}`:                        wire.CodeInvalidAdminRequest,
		`{"status":200,"body":1,"body_base64":"AA=="}`:              wire.CodeInvalidAdminRequest,
		`{"status":200,"bdy":{}}`:                                   wire.CodeInvalidJSON,
		`[1]`:                                                       wire.CodeInvalidJSON,
	} {
		wantProblem(t, adminPost(t, h, path, "adm", body), 400, code)
	}
	wantProblem(t, adminPost(t, h, path, "tok-wrong", `{"status":200}`), 401, wire.CodeUnauthorized)

	resolved := `{"charged": true, "id": "ch_1"}`
	r := adminPost(t, h, path, "adm", `{"status":201,"body":`+resolved+`}`)
	if r.status != 200 {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	rec := mustJSON(t, r.body)
	if rec["state"] != "COMPLETED" || rec["execution_id"] != deadExec || rec["response_status"] != 201.0 {
		t.Fatalf("resolved record: %s", r.body)
	}
	var expires time.Time
	if expires, _ = time.Parse(time.RFC3339, rec["expires_at"].(string)); time.Until(expires) < replayTTL-time.Minute || time.Until(expires) > replayTTL+time.Minute {
		t.Errorf("resolved record expires at %v, want the tool's replay_ttl %v from now", expires, replayTTL)
	}

	// The agent's retry replays the operator's outcome, byte for byte.
	retry := h.do(call)
	if retry.status != 201 || string(retry.body) != resolved || retry.header.Get("Idempotent-Replayed") != "true" ||
		retry.header.Get("Tool-Execution-Id") != deadExec || !strings.HasPrefix(retry.header.Get("Content-Type"), "application/json") {
		t.Fatalf("retry after resolve: %d %q %v", retry.status, retry.body, retry.header)
	}
	if pay.total.Load() != 0 {
		t.Fatalf("the tool ran %d times in this gateway, want 0 (it ran on the dead one)", pay.total.Load())
	}
	if n := listRecords(t, h, "?state=UNKNOWN"); len(n.Records) != 0 {
		t.Fatalf("still UNKNOWN after resolve: %+v", n)
	}
	// A COMPLETED record cannot be resolved again; a missing one is 404.
	wantProblem(t, adminPost(t, h, path, "adm", `{"status":200,"body":{}}`), 409, wire.CodeRecordNotResolvable)
	wantProblem(t, adminPost(t, h, "/admin/v1/records/anonymous/pay/"+strings.Repeat("0", 64)+"/resolve", "adm", `{"status":200}`), 404, wire.CodeRecordNotFound)
	wantProblem(t, adminPost(t, h, "/admin/v1/records/anonymous/pay/"+key, "adm", `{"status":200}`), 404, wire.CodeRecordNotFound)
}

// TestAdminResolveBodies: a text body is stored as its text and shown as a
// string; a binary body goes in and out as base64.
func TestAdminResolveBodies(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("pay")}, withAdmin("adm"))
	for i, tc := range []struct {
		resolve, show, replay string
	}{
		{`{"status":200,"content_type":"text/plain","body":"done ✓"}`, `"body":"done ✓"`, "done ✓"},
		{`{"status":202,"content_type":"application/octet-stream","body_base64":"AP8="}`, `"body_base64":"AP8="`, "\x00\xff"},
		{`{"status":204}`, `"body":""`, ""},
	} {
		key := fmt.Sprintf("%064d", i)
		_, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
			Scope: idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: key}, Fingerprint: "f",
			ExecutionID: ulid.Make().String(), Owner: "dead", LockTTL: 300 * time.Millisecond, ReplayTTL: time.Hour,
			LeaseExpiry: idempotency.LeaseExpiryUnknown,
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		r := adminPost(t, h, "/admin/v1/records/anonymous/pay/"+key+"/resolve", "adm", tc.resolve)
		if r.status != 200 || !strings.Contains(string(r.body), tc.show) {
			t.Errorf("resolve %s: %d %s, want %s", tc.resolve, r.status, r.body, tc.show)
		}
		rec, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: key})
		if err != nil || rec.Response == nil || string(rec.Response.Body) != tc.replay {
			t.Errorf("stored after %s: %+v %v", tc.resolve, rec.Response, err)
		}
	}
}

// TestAdminStoreWithoutSearch: a store that does not implement
// idempotency.Admin still serves get and delete; search and resolve
// answer 501 admin_unsupported.
func TestAdminStoreWithoutSearch(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")}, withAdmin("adm"),
		withStore(&hookStore{Store: newStore(t, storeEmbedded)}))
	call := callSpec{tool: "echo", session: "s", step: 1, args: `{}`}
	r := h.do(call)
	key := derivedKey(t, "s", 1, "echo", `{}`)
	if g := h.get("/admin/v1/records/anonymous/echo/"+key, "adm"); g.status != 200 {
		t.Fatalf("get: %d %s", g.status, g.body)
	}
	wantProblem(t, h.get("/admin/v1/records", "adm"), 501, wire.CodeAdminUnsupported)
	wantProblem(t, h.get("/admin/v1/executions/"+r.header.Get("Tool-Execution-Id"), "adm"), 501, wire.CodeAdminUnsupported)
	wantProblem(t, adminPost(t, h, "/admin/v1/records/anonymous/echo/"+key+"/resolve", "adm", `{"status":200}`), 501, wire.CodeAdminUnsupported)
}

// adminGet returns the admin record JSON as raw members.
func adminRecord(t *testing.T, h *harness, path, token string) (response, map[string]json.RawMessage) {
	t.Helper()
	r := h.get(path, token)
	if r.status != 200 {
		return r, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("admin record: %v: %s", err, r.body)
	}
	return r, m
}

func rfc3339(t *testing.T, raw json.RawMessage) time.Time {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("not a string: %s", raw)
	}
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("%q is not RFC 3339: %v", s, err)
	}
	return ts
}

func mustRaw(t *testing.T, m map[string]json.RawMessage) json.RawMessage {
	t.Helper()
	if m == nil {
		t.Fatal("no admin record")
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantString(t *testing.T, rec map[string]json.RawMessage, member, want string) {
	t.Helper()
	var got string
	if err := json.Unmarshal(rec[member], &got); err != nil || got != want {
		t.Fatalf("record %s = %s, want %q", member, rec[member], want)
	}
}
