package benchtool

import (
	"context"
	"fmt"
	"time"
)

// The "gateway+receipts" target: the gateway with receipts on, loaded
// beside "gateway" (receipts off). The gateway writes receipts after the
// answer, from a goroutine of its own, so a run ends only once the writer
// has caught up (WaitReceipts): the CPU its writes cost, in the gateway
// and in Redis, falls inside the run that caused them.

// ReceiptsName is the name of the target with receipts on.
const ReceiptsName = "gateway+receipts"

// ReceiptCounts are the receipt counters of the gateways that keep
// receipts: every execution of the tool leaves exactly one receipt
// ("executed"), so the writer has caught up when Written = Executed.
type ReceiptCounts struct {
	Written  int64 `json:"receipts_written"`
	Executed int64 `json:"receipts_executed"`
}

// receiptWaitLimit bounds WaitReceipts: the writer is far behind (or
// failing) when it has not caught up by then.
const receiptWaitLimit = 30 * time.Second

// WaitReceipts polls read until every execution's receipt is written, so
// what the writer costs is counted in the run that caused it. It fails
// when the writer has not caught up within receiptWaitLimit.
func WaitReceipts(ctx context.Context, read func(context.Context) (ReceiptCounts, error)) error {
	ctx, cancel := context.WithTimeout(ctx, receiptWaitLimit)
	defer cancel()
	for {
		c, err := read(ctx)
		if err != nil {
			return fmt.Errorf("benchtool: receipts: %w", err)
		}
		if c.Written >= c.Executed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("benchtool: receipts: %d of %d written: %w", c.Written, c.Executed, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
