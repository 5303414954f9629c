package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// registry builds an isolated registry from a fresh Set, the way gateway
// tests are meant to.
func registry(t *testing.T) (*Set, *tools.Registry) {
	t.Helper()
	set := NewSet()
	r, err := tools.NewRegistryOf(set.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return set, r
}

func call(t *testing.T, r *tools.Registry, name string, req *tools.Request) *tools.Response {
	t.Helper()
	e, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	args, err := tools.DecodeArguments(req.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	if v := e.Validate(args); v != nil {
		t.Fatalf("%s: arguments %s invalid: %+v", name, req.Arguments, v)
	}
	resp, err := e.Tool.Call(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return resp
}

func decode(t *testing.T, resp *tools.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(resp.Body, &m); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return m
}

func TestRegisteredFromInit(t *testing.T) {
	byName := map[string]tools.Tool{}
	for _, tl := range tools.Registered() {
		byName[tl.Spec().Name] = tl
	}
	for _, name := range []string{EchoName, ProvisionInfraName, LookupResourceName} {
		if byName[name] == nil {
			t.Fatalf("%s not registered", name)
		}
	}
	r, err := tools.NewRegistryOf(tools.Registered()...)
	if err != nil {
		t.Fatalf("registered tools do not make a registry: %v", err)
	}
	lookup, _ := r.Lookup(LookupResourceName)
	provision, _ := r.Lookup(ProvisionInfraName)
	echo, _ := r.Lookup(EchoName)
	if !lookup.Spec.ReadOnly || provision.Spec.ReadOnly || echo.Spec.ReadOnly {
		t.Fatal("only lookup-resource is read-only")
	}
	// The global counters outlive one run (go test -count=N): a fresh key.
	key := "registered-" + t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	before := Executions(EchoName)
	if _, err := echo.Tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`), IdempotencyKey: key}); err != nil {
		t.Fatal(err)
	}
	if got := Executions(EchoName) - before; got != 1 {
		t.Fatalf("Executions(echo) grew by %d, want 1", got)
	}
	if got := ExecutionsForKey(EchoName, key); got != 1 {
		t.Fatalf("ExecutionsForKey = %d, want 1", got)
	}
}

func TestEchoReturnsTheExactBytes(t *testing.T) {
	set, r := registry(t)
	args := []byte(`{ "b": [1, 2.50],  "a": "\u00e9" }`)
	resp := call(t, r, EchoName, &tools.Request{Arguments: args, IdempotencyKey: "k1"})
	if resp.Status != 200 || resp.ContentType != "application/json" || string(resp.Body) != string(args) {
		t.Fatalf("response = %d %q %q", resp.Status, resp.ContentType, resp.Body)
	}
	resp = call(t, r, EchoName, &tools.Request{Arguments: []byte(`{"status": 503}`), IdempotencyKey: "k1"})
	if resp.Status != 503 {
		t.Fatalf("status = %d, want 503", resp.Status)
	}
	resp = call(t, r, EchoName, &tools.Request{Arguments: []byte(`{"status": 429.0}`), IdempotencyKey: "k2"})
	if resp.Status != 429 {
		t.Fatalf("status = %d, want 429", resp.Status)
	}
	if set.ExecutionsForKey(EchoName, "k1") != 2 || set.ExecutionsForKey(EchoName, "k2") != 1 || set.Executions(EchoName) != 3 {
		t.Fatalf("counts: k1=%d k2=%d total=%d", set.ExecutionsForKey(EchoName, "k1"), set.ExecutionsForKey(EchoName, "k2"), set.Executions(EchoName))
	}
}

func TestEchoRejectsBadControlsAtTheSchema(t *testing.T) {
	_, r := registry(t)
	e, _ := r.Lookup(EchoName)
	args, _ := tools.DecodeArguments([]byte(`{"status": 99, "delay_ms": -1}`))
	got := e.Validate(args)
	if len(got) != 2 || got[0].Location != "/delay_ms" || got[1].Location != "/status" {
		t.Fatalf("violations = %+v", got)
	}
}

func TestEchoDelayHonoursTheContext(t *testing.T) {
	_, r := registry(t)
	e, _ := r.Lookup(EchoName)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := e.Tool.Call(ctx, &tools.Request{Arguments: []byte(`{"delay_ms": 30000}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

const provisionArgsJSON = `{"name": "web", "region": "eu-west-1", "cpus": 2, "disks": [{"size": 20}, {"size": 100, "type": "hdd"}]}`

func TestProvisionAllocatesAndLookupFinds(t *testing.T) {
	set, r := registry(t)
	resp := call(t, r, ProvisionInfraName, &tools.Request{
		Arguments: []byte(provisionArgsJSON), Tenant: "acme", IdempotencyKey: "key-a", FencingToken: 1, ExecutionID: "01EXEC",
	})
	if resp.Status != 201 {
		t.Fatalf("status = %d, body %s", resp.Status, resp.Body)
	}
	created := decode(t, resp)
	id, _ := created["resource_id"].(string)
	if !strings.HasPrefix(id, "res_") || len(id) != 30 {
		t.Fatalf("resource_id = %q", id)
	}
	if created["memory_gb"] != 4.0 || created["execution_id"] != "01EXEC" {
		t.Fatalf("resource = %s", resp.Body)
	}
	disks := created["disks"].([]any)
	if disks[0].(map[string]any)["type"] != "ssd" || disks[1].(map[string]any)["type"] != "hdd" {
		t.Fatalf("disks = %v", disks)
	}

	found := call(t, r, LookupResourceName, &tools.Request{Arguments: []byte(`{"resource_id": "` + id + `"}`), Tenant: "acme"})
	if found.Status != 200 || decode(t, found)["resource_id"] != id {
		t.Fatalf("lookup = %d %s", found.Status, found.Body)
	}
	// Another tenant does not see it; an unknown id is 404 too.
	other := call(t, r, LookupResourceName, &tools.Request{Arguments: []byte(`{"resource_id": "` + id + `"}`), Tenant: "globex"})
	missing := call(t, r, LookupResourceName, &tools.Request{Arguments: []byte(`{"resource_id": "res_00000000000000000000000000"}`), Tenant: "acme"})
	for _, resp := range []*tools.Response{other, missing} {
		if resp.Status != 404 || decode(t, resp)["error"] != "resource_not_found" {
			t.Fatalf("lookup = %d %s, want 404", resp.Status, resp.Body)
		}
	}
	if set.Executions(LookupResourceName) != 3 || set.Executions(ProvisionInfraName) != 1 {
		t.Fatalf("counts: lookup=%d provision=%d", set.Executions(LookupResourceName), set.Executions(ProvisionInfraName))
	}
}

func TestProvisionRefusesAStaleFencingToken(t *testing.T) {
	set, r := registry(t)
	req := func(token int64) *tools.Request {
		return &tools.Request{Arguments: []byte(provisionArgsJSON), Tenant: "acme", IdempotencyKey: "key-f", FencingToken: token}
	}
	// The takeover (token 2) ran first; the old owner (token 1) arrives late.
	first := call(t, r, ProvisionInfraName, req(2))
	if first.Status != 201 {
		t.Fatalf("token 2: %d %s", first.Status, first.Body)
	}
	stale := call(t, r, ProvisionInfraName, req(1))
	if stale.Status != 409 {
		t.Fatalf("token 1 after 2: status %d, want 409", stale.Status)
	}
	body := decode(t, stale)
	if body["error"] != "stale_fencing_token" || body["fencing_token"] != 1.0 || body["highest_seen"] != 2.0 {
		t.Fatalf("409 body = %s", stale.Body)
	}
	// A newer claim of the same key gets the resource already made, not a
	// second one.
	again := call(t, r, ProvisionInfraName, req(3))
	if again.Status != 200 || decode(t, again)["resource_id"] != decode(t, first)["resource_id"] {
		t.Fatalf("token 3: %d %s, want 200 with the first resource", again.Status, again.Body)
	}
	if set.Inventory().Len() != 1 {
		t.Fatalf("%d resources, want 1", set.Inventory().Len())
	}
	// After token 3, token 2 is stale too.
	if resp := call(t, r, ProvisionInfraName, req(2)); resp.Status != 409 {
		t.Fatalf("token 2 after 3: status %d", resp.Status)
	}
	if got := set.ExecutionsForKey(ProvisionInfraName, "key-f"); got != 4 {
		t.Fatalf("ExecutionsForKey = %d, want 4", got)
	}
}

func TestFencingIsPerTenantAndKey(t *testing.T) {
	set, r := registry(t)
	call(t, r, ProvisionInfraName, &tools.Request{Arguments: []byte(provisionArgsJSON), Tenant: "acme", IdempotencyKey: "k", FencingToken: 5})
	for _, req := range []*tools.Request{
		{Arguments: []byte(provisionArgsJSON), Tenant: "globex", IdempotencyKey: "k", FencingToken: 1},
		{Arguments: []byte(provisionArgsJSON), Tenant: "acme", IdempotencyKey: "other", FencingToken: 1},
	} {
		if resp := call(t, r, ProvisionInfraName, req); resp.Status != 201 {
			t.Fatalf("%s/%s: %d %s", req.Tenant, req.IdempotencyKey, resp.Status, resp.Body)
		}
	}
	if set.Inventory().Len() != 3 {
		t.Fatalf("%d resources, want 3", set.Inventory().Len())
	}
}

func TestConcurrentClaimsOfOneKeyMakeOneResource(t *testing.T) {
	set, r := registry(t)
	e, _ := r.Lookup(ProvisionInfraName)
	const callers = 16
	var wg sync.WaitGroup
	statuses := make(chan int, callers)
	for token := int64(1); token <= callers; token++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.Tool.Call(context.Background(), &tools.Request{
				Arguments: []byte(provisionArgsJSON), Tenant: "acme", IdempotencyKey: "contended", FencingToken: token,
			})
			if err != nil {
				t.Error(err)
				return
			}
			statuses <- resp.Status
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[201] != 1 || counts[200]+counts[409] != callers-1 {
		t.Fatalf("statuses = %v, want exactly one 201", counts)
	}
	if set.Inventory().Len() != 1 {
		t.Fatalf("%d resources, want 1", set.Inventory().Len())
	}
}

func TestProvisionWithoutKeyAllocatesEachTime(t *testing.T) {
	set, r := registry(t)
	for i := 0; i < 2; i++ {
		if resp := call(t, r, ProvisionInfraName, &tools.Request{Arguments: []byte(provisionArgsJSON), Tenant: "acme"}); resp.Status != 201 {
			t.Fatalf("status %d", resp.Status)
		}
	}
	if set.Inventory().Len() != 2 {
		t.Fatalf("%d resources, want 2", set.Inventory().Len())
	}
}

func TestProvisionSchemaViolations(t *testing.T) {
	_, r := registry(t)
	e, _ := r.Lookup(ProvisionInfraName)
	args, _ := tools.DecodeArguments([]byte(`{"name": "Web", "region": "mars-1", "cpus": 0, "disks": [{"size": 1}, {"size": 0}]}`))
	got := e.Validate(args)
	var locs []string
	for _, v := range got {
		locs = append(locs, v.Location)
	}
	if strings.Join(locs, ",") != "/cpus,/disks/1/size,/name,/region" {
		t.Fatalf("locations = %v (%+v)", locs, got)
	}
}
