package gatewaycmd

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/verify"
	"github.com/toolgateway/toolgateway/tools"
)

// v4Config has every v4 feature on its tools: decide rules, an effect_key,
// lease_expiry unknown with reconciliation, and two tenants.
func v4Config(t *testing.T) string {
	t.Helper()
	return writeConfig(t, `listen: 127.0.0.1:0
store:
  path: `+filepath.Join(t.TempDir(), "gw.db")+`
auth:
  tenants:
    - name: acme
      token_sha256: 96a325371892126d14e88b8534a4f7f3e99156f1abe3c08aa29634c40682dd26
    - name: globex
      token_sha256: 7716235111c68b0290240bc3f9a24e0ca0cea34982440b0cafb5a3548497d2df
tools:
  - name: refund
    http: {url: "http://127.0.0.1:1/refund"}
    lease_expiry: unknown
    effect_key: "refund:{/txn_id}"
    input_schema:
      type: object
      required: [txn_id, amount]
      properties:
        txn_id: {type: string}
        amount: {type: integer, minimum: 1}
    decide:
      - when: "args.amount <= 100"
        decision: allow
      - when: "args.amount <= 100000"
        decision: approve
        reason: "finance approves"
      - decision: deny
        reason: "too large"
    reconcile:
      http: {url: "http://127.0.0.1:1/status"}
  - name: search
    read_only: true
    http: {url: "http://127.0.0.1:1/search"}
`)
}

// runVerifyCmd runs `gateway verify` with args and returns its output.
func runVerifyCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	err := RunIO(context.Background(), append([]string{"gateway", "verify"}, args...), envOf(nil), strings.NewReader(""), &out)
	return out.String(), err
}

// verdicts maps "tool/guarantee" to the verdict of each result line.
func verdicts(t *testing.T, results []verify.Result) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range results {
		m[r.Tool+"/"+r.Guarantee] = r.Verdict
	}
	return m
}

func TestVerifyPassesOnTheExampleConfig(t *testing.T) {
	out, err := runVerifyCmd(t, "-config", exampleConfigPath)
	if err != nil {
		t.Fatalf("verify of the documented example: %v\n%s", err, out)
	}
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "PASS  charge-card") {
		t.Fatalf("want passes and no FAIL, got:\n%s", out)
	}
	if !strings.Contains(out, "N/A   get-invoice") || !strings.Contains(out, "get-invoice is read_only") {
		t.Fatalf("want the read-only tool N/A with its reason, got:\n%s", out)
	}
}

func TestVerifyPassesOnAConfigWithEveryV4Feature(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "verify.xml")
	out, err := runVerifyCmd(t, "-config", v4Config(t), "-json", "-junit", junit)
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	var results []verify.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	got := verdicts(t, results)
	for _, g := range verify.Guarantees() {
		if v := got["refund/"+g]; v != verify.Pass {
			t.Errorf("refund / %s: %s, want PASS (%s)", g, v, out)
		}
		if v := got["search/"+g]; v != verify.NA {
			t.Errorf("search / %s: %s, want N/A", g, v)
		}
	}
	if v := got[verify.StoreColumn+"/"+verify.LayoutGuarantee]; v != verify.Pass {
		t.Errorf("%s / %s: %s, want PASS", verify.StoreColumn, verify.LayoutGuarantee, v)
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct { // the JUnit XML CI systems read
		XMLName  xml.Name   `xml:"testsuite"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Cases    []struct{} `xml:"testcase"`
	}
	if err := xml.Unmarshal(raw, &suite); err != nil {
		t.Fatalf("junit: %v\n%s", err, raw)
	}
	notApplicable := 0
	for _, r := range results {
		if r.Verdict == verify.NA {
			notApplicable++
		}
	}
	if suite.Tests != len(results) || suite.Failures != 0 || suite.Skipped != notApplicable || len(suite.Cases) != len(results) {
		t.Fatalf("junit suite %d tests, %d failures, %d skipped, %d cases; want %d, 0, %d, %d", suite.Tests, suite.Failures, suite.Skipped, len(suite.Cases), len(results), notApplicable, len(results))
	}
}

// releasingStore is a broken store: it releases a record it is told to mark
// UNKNOWN, so a retry runs the tool again.
type releasingStore struct {
	*boltstore.Store // every optional store interface too (effect keys, approvals)
}

func (s releasingStore) MarkUnknown(ctx context.Context, lease idempotency.Lease, _ time.Duration) error {
	return s.Release(ctx, lease)
}

// Verify itself can fail: against the broken store (a deliberately broken
// stand-in that releases what it should mark UNKNOWN) it says which
// guarantee failed, on which tool, how many times the tool ran, and the
// exit status is not 0.
func TestVerifyFailsAgainstAStoreThatReleasesUnknownRecords(t *testing.T) {
	wrap := func(s idempotency.Store) idempotency.Store { return releasingStore{s.(*boltstore.Store)} }
	results, err := verifyConfig(context.Background(), v4Config(t), envOf(nil), verifyRun{storeMode: verifyStoreScratch, wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	var failed []verify.Result
	for _, r := range results {
		if r.Verdict == verify.Fail {
			failed = append(failed, r)
		}
	}
	// The guarantees that need an UNKNOWN record fail; all others pass.
	needsUnknown := map[string]bool{"uncertain outcome is not rerun": true, "reconciliation completes a record it is told committed": true}
	for _, f := range failed {
		if f.Tool != "refund" || !needsUnknown[f.Guarantee] {
			t.Errorf("unexpected FAIL %+v", f)
		}
	}
	for _, f := range failed {
		if !strings.Contains(f.Detail, "refund's stand-in ran ") {
			t.Errorf("FAIL %+v does not name the executions it saw", f)
		}
	}
	if len(failed) != 2 || failed[0].Guarantee != "uncertain outcome is not rerun" || !strings.Contains(failed[0].Detail, "ran the tool again") {
		t.Fatalf("want refund / uncertain outcome is not rerun FAILED saying the tool ran again, got %+v", failed)
	}
	exit := verifyExit(results)
	var status *ExitStatus
	if exit == nil || errors.As(exit, &status) || !strings.Contains(exit.Error(), "2 of") {
		t.Fatalf("exit: %v, want exit status 1 naming 2 failures", exit)
	}
}

func TestVerifyOfAConfigThatDoesNotLoadSaysWhatCheckSays(t *testing.T) {
	path := writeConfig(t, "listen: 127.0.0.1:0\ntools:\n  - name: charge\n    http: {url: \"http://127.0.0.1:1/c\"}\n    lease_expiry: never\n")
	_, verifyErr := runVerifyCmd(t, "-config", path)
	checkErr := RunIO(context.Background(), []string{"gateway", "check", "-config", path}, envOf(nil), strings.NewReader(""), &strings.Builder{})
	if verifyErr == nil || checkErr == nil {
		t.Fatalf("verify: %v, check: %v; want both to refuse", verifyErr, checkErr)
	}
	if strings.TrimPrefix(verifyErr.Error(), "verify: ") != strings.TrimPrefix(checkErr.Error(), "check: ") || !strings.Contains(verifyErr.Error(), "lease_expiry") {
		t.Fatalf("verify says %q, check %q: want the same message", verifyErr, checkErr)
	}
	var status *ExitStatus
	if errors.As(verifyErr, &status) {
		t.Fatalf("exit status %d, want 1", status.Code)
	}
}

func TestVerifyWithNothingApplicableExits2(t *testing.T) {
	config := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\ntools:\n  - name: search\n    read_only: true\n    http: {url: \"http://127.0.0.1:1/s\"}\n"
	for _, p := range tools.Registered() { // this test binary's compiled-in plugins, made read-only too
		config += "  - name: " + p.Spec().Name + "\n    read_only: true\n"
	}
	path := writeConfig(t, config)
	out, err := runVerifyCmd(t, "-config", path)
	var status *ExitStatus
	if !errors.As(err, &status) || status.Code != 2 {
		t.Fatalf("verify: %v, want exit status 2\n%s", err, out)
	}
	if strings.Contains(out, "PASS") || !strings.Contains(out, "search is read_only") {
		t.Fatalf("want only N/A lines with the reason, got:\n%s", out)
	}
}
