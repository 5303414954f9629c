package verify

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
	"github.com/toolgateway/toolgateway/tools"
)

// embeddedScratch is a Scratch of two embedded stores in dir, with
// receipts, as a program would hand it over.
func embeddedScratch(dir string) Scratch {
	path, newer := filepath.Join(dir, "verify.db"), filepath.Join(dir, "newer.db")
	return Scratch{
		Name: "embedded:" + dir,
		Kind: "embedded",
		Open: func(context.Context) (idempotency.Store, error) {
			return boltstore.Open(path, boltstore.Options{ReceiptOutbox: true})
		},
		Receipts: func(_ context.Context, store idempotency.Store) (receipts.Store, error) {
			return boltreceipts.New(store.(*boltstore.Store).DB(), nil)
		},
		MarkNewerLayout: func(context.Context) error {
			s, err := boltstore.Open(newer, boltstore.Options{})
			if err != nil {
				return err
			}
			if err := s.Close(); err != nil {
				return err
			}
			return boltstore.MarkNewerLayout(newer)
		},
		OpenNewer: func(context.Context) (idempotency.Store, error) {
			return boltstore.Open(newer, boltstore.Options{NoMigrate: true})
		},
	}
}

// The harness runs on what a Program gives it, with no config file and no
// command line: the guarantees that apply pass on the scratch store, the
// ones that do not say why, and the configured tool itself never runs
// (its stand-in does).
func TestVerifyRunsAProgramWithoutTheCommand(t *testing.T) {
	configured := &standIn{spec: tools.Spec{Name: "charge",
		InputSchema: json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"}}}`)}}
	registry := tools.NewRegistry()
	if err := registry.Add(configured); err != nil {
		t.Fatal(err)
	}
	results, err := Run(t.Context(), Program{Options: callpath.Options{Tools: registry}, Scratch: embeddedScratch(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range results {
		got[r.Tool+"/"+r.Guarantee] = r
	}
	for _, g := range []string{"replay runs once", "racing identical calls run once", "reused key with other arguments is refused",
		"step guard refuses a changed step", "altered receipt is detected"} {
		if r := got["charge/"+g]; r.Verdict != Pass {
			t.Errorf("charge / %s: %+v, want PASS", g, r)
		}
	}
	if r := got["charge/tenants never see each other's records"]; r.Verdict != NA || !strings.Contains(r.Detail, "fewer than 2 tenants") {
		t.Errorf("charge / tenants: %+v, want N/A for want of tenants", r)
	}
	if r := got[StoreColumn+"/"+LayoutGuarantee]; r.Verdict != Pass || !strings.Contains(r.Detail, "(embedded)") {
		t.Errorf("%s / %s: %+v, want PASS on embedded", StoreColumn, LayoutGuarantee, r)
	}
	if err := Status(results); err != nil {
		t.Errorf("status: %v\n%+v", err, results)
	}
	if n := configured.runs.Load(); n != 0 {
		t.Fatalf("the configured tool ran %d times, want none: verify runs stand-ins", n)
	}
}
