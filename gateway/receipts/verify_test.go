package receipts_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// chain seals n receipts of tenant and returns them with their lines.
func chain(t *testing.T, tenant string, n int) ([]receipts.Receipt, [][]byte) {
	t.Helper()
	var rs []receipts.Receipt
	var lines [][]byte
	var prev *receipts.Receipt
	for i := range n {
		r := sample(i)
		r.Tenant = tenant
		sealed := receipts.Seal(prev, r)
		line, err := receipts.Encode(sealed)
		if err != nil {
			t.Fatal(err)
		}
		rs, lines = append(rs, sealed), append(lines, line)
		prev = &rs[len(rs)-1]
	}
	return rs, lines
}

func verify(t *testing.T, lines [][]byte) receipts.Report {
	t.Helper()
	rep, err := receipts.Verify(bytes.NewReader(append(bytes.Join(lines, []byte("\n")), '\n')))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func tenantReport(t *testing.T, rep receipts.Report, tenant string) receipts.TenantReport {
	t.Helper()
	for _, tr := range rep.Tenants {
		if tr.Tenant == tenant {
			return tr
		}
	}
	t.Fatalf("no report for %s in %+v", tenant, rep)
	return receipts.TenantReport{}
}

func TestVerifyWholeChainsOfInterleavedTenants(t *testing.T) {
	a, aLines := chain(t, "a", 5)
	_, bLines := chain(t, "b", 3)
	lines := [][]byte{aLines[0], bLines[0], aLines[1], aLines[2], bLines[1], bLines[2], aLines[3], aLines[4]}
	rep := verify(t, lines)
	if !rep.OK() || len(rep.Tenants) != 2 {
		t.Fatalf("report %+v", rep)
	}
	ra := tenantReport(t, rep, "a")
	if ra.Checked != 5 || ra.First != 1 || ra.Last != 5 || ra.Head != a[4].Hash || ra.Anchor != "" {
		t.Errorf("a: %+v", ra)
	}
}

func TestVerifyAnchorsAChainWhoseOldestExpired(t *testing.T) {
	rs, lines := chain(t, "a", 6)
	tr := tenantReport(t, verify(t, lines[2:]), "a")
	if tr.Failure != nil || tr.First != 3 || tr.Checked != 4 || tr.Anchor != rs[1].Hash {
		t.Errorf("report %+v, want first 3, 4 checked, anchor = hash of seq 2", tr)
	}
}

func TestVerifyNamesTheFirstBadReceipt(t *testing.T) {
	_, lines := chain(t, "a", 6)
	swapped := append([][]byte{}, lines...)
	swapped[2], swapped[3] = swapped[3], swapped[2]
	edited := append([][]byte{}, lines...)
	edited[3] = bytes.Replace(edited[3], []byte(`"status":201`), []byte(`"status":200`), 1)
	added := append([][]byte{}, lines...)
	added[1] = bytes.Replace(added[1], []byte(`"tool":"refund"`), []byte(`"tool":"refund","by":"x"`), 1)
	resealed := append([][]byte{}, lines...)
	r2, _ := receipts.Decode(lines[1])
	r2.Status = 500
	r2 = receipts.SealAfter(receipts.Head{Seq: 1, Hash: r2.Prev}, r2)
	resealed[1], _ = receipts.Encode(r2)
	cases := []struct {
		name  string
		lines [][]byte
		want  receipts.Failure
	}{
		{"edited", edited, receipts.Failure{Problem: receipts.ProblemAltered, Seq: 4, Line: 4, Found: 4}},
		{"member added", added, receipts.Failure{Problem: receipts.ProblemAltered, Seq: 2, Line: 2, Found: 2}},
		{"removed", append(append([][]byte{}, lines[:2]...), lines[3:]...), receipts.Failure{Problem: receipts.ProblemRemoved, Seq: 3, Line: 3, Found: 4}},
		{"swapped", swapped, receipts.Failure{Problem: receipts.ProblemReordered, Seq: 3, Line: 3, Found: 4, FoundAtLine: 4}},
		{"duplicated", append(append([][]byte{}, lines[:3]...), lines[2:]...), receipts.Failure{Problem: receipts.ProblemDuplicate, Seq: 4, Line: 4, Found: 3}},
		{"resealed", resealed, receipts.Failure{Problem: receipts.ProblemBrokenLink, Seq: 3, Line: 3, Found: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := verify(t, tc.lines)
			tr := tenantReport(t, rep, "a")
			if rep.OK() || tr.Failure == nil || *tr.Failure != tc.want {
				t.Fatalf("failure %+v, want %+v", tr.Failure, tc.want)
			}
			if tr.Checked != int(tc.want.Seq-1) {
				t.Errorf("checked %d, want %d", tr.Checked, tc.want.Seq-1)
			}
			if js, _ := json.Marshal(rep); !bytes.Contains(js, []byte(`"problem":"`+string(tc.want.Problem)+`"`)) {
				t.Errorf("JSON report %s does not name %s", js, tc.want.Problem)
			}
			if !strings.Contains(tr.Failure.String(), string(tc.want.Problem)) {
				t.Errorf("message %q does not name %s", tr.Failure.String(), tc.want.Problem)
			}
		})
	}
}

func TestVerifyFirstReceiptWithPrevIsABrokenLink(t *testing.T) {
	r := receipts.SealAfter(receipts.Head{Seq: 0, Hash: "ab"}, receipts.Receipt{Time: time.Unix(1, 0), Tenant: "a", Event: receipts.EventDenied})
	line, _ := receipts.Encode(r)
	tr := tenantReport(t, verify(t, [][]byte{line}), "a")
	if tr.Failure == nil || tr.Failure.Problem != receipts.ProblemBrokenLink || tr.Failure.Seq != 1 {
		t.Errorf("failure %+v, want broken link at seq 1", tr.Failure)
	}
}

func TestVerifyNotJSONNamesTheLine(t *testing.T) {
	_, lines := chain(t, "a", 2)
	input := string(lines[0]) + "\n\n" + string(lines[1]) + "\n{not json\n"
	_, err := receipts.Verify(strings.NewReader(input))
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("error %v, want one naming line 4", err)
	}
}
