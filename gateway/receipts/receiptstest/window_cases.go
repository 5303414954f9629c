package receiptstest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// The time-bounded export cases: `export -since -until` writes the stored
// lines of the window, never re-encoded, and the window verifies from
// the checkpoint of the receipt before it.
func windowCases() []testCase {
	return []testCase{
		{"TimeBoundedExportVerifiesFromACheckpoint", timeBoundedExport},
		{"TamperAmbiguousLineInATimeBoundedExport", tamperAmbiguousInWindow},
	}
}

// windowChain appends 10 receipts to acme a minute apart from an hour
// ago, checkpointed at seq 4 and 10, and answers the export of seq 5 to
// 8 by time.
func windowChain(t *testing.T, b Backend) (base time.Time, f receipts.Filter) {
	t.Helper()
	base = time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for i := range 10 {
		mustAppend(t, b.Replicas[i%2], "acme", event(i, "refund", receipts.EventExecuted, base.Add(time.Duration(i)*time.Minute)))
		if i == 3 {
			mustCheckpoint(t, b.Replicas[0], "acme")
		}
	}
	mustCheckpoint(t, b.Replicas[1], "acme")
	return base, receipts.Filter{Tenant: "acme", Since: base.Add(4 * time.Minute), Until: base.Add(8 * time.Minute)}
}

func exportWindow(t *testing.T, s receipts.Store, f receipts.Filter) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := receipts.ExportFiltered(t.Context(), s, &buf, f); err != nil {
		t.Fatalf("ExportFiltered: %v", err)
	}
	return buf.Bytes()
}

func timeBoundedExport(t *testing.T, b Backend) {
	_, f := windowChain(t, b)
	export := exportWindow(t, b.Replicas[1], f)
	stored, _, err := b.Replicas[0].Lines(t.Context(), "acme", 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	var receiptLines [][]byte
	for _, line := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
		if bytes.HasPrefix(line, []byte(`{"seq"`)) {
			receiptLines = append(receiptLines, line)
		}
	}
	if len(receiptLines) != 4 {
		t.Fatalf("the window exported %d receipts, want seq 5 to 8:\n%s", len(receiptLines), export)
	}
	for i, line := range receiptLines {
		if !bytes.Equal(line, bytes.TrimRight(stored[i], "\n")) {
			t.Fatalf("exported line %d is not the stored one:\n got %s\nwant %s", i, line, stored[i])
		}
	}
	rep, err := receipts.VerifyWith(bytes.NewReader(export), receipts.VerifyOptions{Keys: publicKeys()})
	if err != nil {
		t.Fatalf("VerifyWith: %v", err)
	}
	tr := tenantReport(t, rep, "acme")
	if tr.Failure != nil || !tr.Filtered || tr.First != 5 || tr.Last != 8 || tr.Checked != 4 || tr.Checkpoints != 2 || tr.Checkpointed != 8 {
		t.Fatalf("the window's report: %+v", tr)
	}
}

// tamperAmbiguousInWindow: a stored line inside the window given a
// second status member differing by case is refused, as in a whole
// export (a re-encoded window would have hidden it).
func tamperAmbiguousInWindow(t *testing.T, b Backend) {
	_, f := windowChain(t, b)
	stored, _, err := b.Replicas[0].Lines(t.Context(), "acme", 5, 1)
	if err != nil || len(stored) != 1 {
		t.Fatalf("Lines: %d, %v", len(stored), err)
	}
	b.Raw.Put(t, "acme", 6, bytes.Replace(stored[0], []byte(`"status":`), []byte(`"Status":500,"status":`), 1))
	_, err = receipts.VerifyWith(bytes.NewReader(exportWindow(t, b.Replicas[1], f)), receipts.VerifyOptions{Keys: publicKeys()})
	if err == nil || !strings.Contains(err.Error(), "differ only by case") {
		t.Fatalf("Verify of the window with Status and status at seq 6: %v", err)
	}
}
