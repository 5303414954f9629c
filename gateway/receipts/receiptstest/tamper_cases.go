package receiptstest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

func tamperCases() []testCase {
	return []testCase{
		{"TamperEditedIsNamed", tamperEdited},
		{"TamperDeletedIsNamed", tamperDeleted},
		{"TamperSwappedIsNamed", tamperSwapped},
		{"TamperAmbiguousLineIsRefused", tamperAmbiguous},
	}
}

// tamperChain appends 6 receipts to acme and 3 to an untouched tenant.
func tamperChain(t *testing.T, b Backend) [][]byte {
	var lines [][]byte
	for i := range 6 {
		r := mustAppend(t, b.Replicas[i%2], "acme", event(i, "refund", receipts.EventExecuted, time.Now()))
		line, err := receipts.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
		if i%2 == 0 {
			mustAppend(t, b.Replicas[0], "bystander", event(i, "refund", receipts.EventDenied, time.Now()))
		}
	}
	return lines
}

// wantFailure verifies the backend and expects acme's chain to fail with
// problem at seq, and the bystander's to pass.
func wantFailure(t *testing.T, b Backend, problem receipts.Problem, seq int64) {
	t.Helper()
	rep := exportAndVerify(t, b.Replicas[1])
	tr := tenantReport(t, rep, "acme")
	if tr.Failure == nil || tr.Failure.Problem != problem || tr.Failure.Seq != seq {
		t.Fatalf("acme: failure %+v, want %s at seq %d", tr.Failure, problem, seq)
	}
	if by := tenantReport(t, rep, "bystander"); by.Failure != nil || by.Checked != 3 {
		t.Fatalf("bystander: %+v", by)
	}
}

func tamperEdited(t *testing.T, b Backend) {
	lines := tamperChain(t, b)
	edited := bytes.Replace(lines[3], []byte(`"status":`), []byte(`"status":1`), 1)
	b.Raw.Put(t, "acme", 4, edited)
	wantFailure(t, b, receipts.ProblemAltered, 4)
}

func tamperDeleted(t *testing.T, b Backend) {
	tamperChain(t, b)
	b.Raw.Delete(t, "acme", 3)
	wantFailure(t, b, receipts.ProblemRemoved, 3)
}

func tamperSwapped(t *testing.T, b Backend) {
	lines := tamperChain(t, b)
	b.Raw.Put(t, "acme", 2, lines[2])
	b.Raw.Put(t, "acme", 3, lines[1])
	wantFailure(t, b, receipts.ProblemReordered, 2)
}

// tamperAmbiguous: a stored line given a second status member that
// differs only by case, before the real one (a lenient reader takes the
// last, another the first): the export carries the stored bytes and
// verify refuses the line.
func tamperAmbiguous(t *testing.T, b Backend) {
	lines := tamperChain(t, b)
	b.Raw.Put(t, "acme", 4, bytes.Replace(lines[3], []byte(`"status":`), []byte(`"Status":500,"status":`), 1))
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), b.Replicas[1], &buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	_, err := receipts.Verify(&buf)
	if err == nil || !strings.Contains(err.Error(), "differ only by case") {
		t.Fatalf("Verify of a line with Status and status: %v", err)
	}
}
