package verify

import (
	"bytes"
	"context"
	"fmt"
	"regexp"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// receiptStatus is the status member of an exported receipt line.
var receiptStatus = regexp.MustCompile(`"status":(\d+)`)

// checkReceiptAltered runs one call of the tool, exports the receipts (as
// `gateway receipts export` does), checks the untouched export verifies,
// then changes the status of the tool's receipt and checks that
// receipts.Verify (what `gateway receipts verify` runs) finds it altered.
func checkReceiptAltered(ctx context.Context, env *scratchEnv, t *checkedTool) (string, string) {
	if env.receipts == nil {
		return NA, "receipts are off (receipts.off: true)"
	}
	c, why, ok := firstCall(ctx, env, t)
	if !ok {
		return NA, why
	}
	if _, err := env.call(ctx, c); err != nil {
		return Fail, err.Error()
	}
	var export bytes.Buffer
	if err := receipts.Export(ctx, env.receipts, &export); err != nil {
		return Fail, err.Error()
	}
	if report, err := receipts.Verify(bytes.NewReader(export.Bytes())); err != nil || !report.OK() {
		return Fail, fmt.Sprintf("the untouched export does not verify: %v %+v", err, report)
	}
	lines := bytes.Split(export.Bytes(), []byte("\n"))
	marker := []byte(`"execution_id":`)
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if !bytes.Contains(line, []byte(`"tool":"`+t.name+`"`)) || !bytes.Contains(line, marker) || !receiptStatus.Match(line) {
			continue
		}
		lines[i] = receiptStatus.ReplaceAll(line, []byte(`"status":299`))
		report, err := receipts.Verify(bytes.NewReader(bytes.Join(lines, []byte("\n"))))
		if err != nil {
			return Fail, err.Error()
		}
		for _, tr := range report.Tenants {
			if tr.Failure != nil && tr.Failure.Problem == receipts.ProblemAltered {
				return Pass, "a receipt whose status was changed: " + tr.Failure.String()
			}
		}
		return Fail, "a receipt whose status was changed verified as whole"
	}
	return Fail, "the call left no receipt with a status for " + t.name
}
