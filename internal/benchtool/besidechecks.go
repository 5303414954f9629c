package benchtool

import (
	"fmt"
	"math"
	"net/http"
)

// The targets of the side-by-side runs against the same gateway without
// the one thing added (Target.Beside).
const (
	// TargetConsoleRatio: a console left polling does not change the
	// gateway's throughput (issue #34), within the noise of a run.
	TargetConsoleRatio = 0.95
	// TargetReceiptsFreshCPU: receipts on, a fresh call's server and
	// Redis CPU grow by at most 15 % (issue #32).
	TargetReceiptsFreshCPU = 1.15
	// TargetReceiptsReplayCPU: receipts on, a replay costs no more.
	TargetReceiptsReplayCPU = 1.0
)

// besideChecks compares t with the target it is beside: the throughput
// with a console polling, the CPU per call with receipts on; and checks
// the console's polls and the receipts written (correctness checks).
func (r *Report) besideChecks(t TargetReport) []Check {
	var out []Check
	res := t.Result
	if c := res.Companion; c != nil {
		ok := c.Statuses[http.StatusOK]
		out = append(out,
			Check{Name: t.Name + " console polls answered 200", Want: "> 0", Got: float64(ok), Pass: ok > 0, Correctness: true},
			Check{Name: t.Name + " console polls failed or not 200", Want: "= 0", Got: float64(c.Requests - ok + c.Errors), Pass: c.Requests == ok && c.Errors == 0, Correctness: true})
	}
	if res.Receipts >= 0 {
		switch r.Mode {
		case ModeFresh:
			out = append(out, Check{Name: t.Name + " receipts written / fresh calls", Want: "= 1", Got: float64(res.Receipts) / float64(res.FreshCalls()), Pass: res.Receipts == res.FreshCalls(), Correctness: true})
		case ModeReplay:
			out = append(out, Check{Name: t.Name + " receipts written for replays", Want: "= 0", Got: float64(res.Receipts), Pass: res.Receipts == 0, Correctness: true})
		}
	}
	off := r.target(t.Beside)
	if off == nil || off.Result.Requests == 0 || (r.Mode != ModeFresh && r.Mode != ModeReplay) {
		return out
	}
	if res.Companion != nil && r.Rate <= 0 && off.Result.RPS() > 0 {
		ratio := res.RPS() / off.Result.RPS()
		out = append(out, Check{Name: fmt.Sprintf("%s %s throughput / %s", t.Name, r.Mode, off.Name), Want: fmt.Sprintf(">= %.2f", TargetConsoleRatio), Got: ratio, Pass: ratio >= TargetConsoleRatio})
	}
	if res.Receipts >= 0 {
		want, per := TargetReceiptsFreshCPU, "fresh call"
		if r.Mode == ModeReplay {
			want, per = TargetReceiptsReplayCPU, "replay"
		}
		server := res.ServerMicrosPerRequest() / off.Result.ServerMicrosPerRequest()
		out = append(out, Check{Name: fmt.Sprintf("receipts server CPU per %s / off", per), Want: fmt.Sprintf("<= %.2f", want), Got: server, Pass: server <= want})
		if redis := res.RedisMicrosPerRequest() / off.Result.RedisMicrosPerRequest(); !math.IsNaN(redis) {
			out = append(out, Check{Name: fmt.Sprintf("receipts Redis CPU per %s / off", per), Want: fmt.Sprintf("<= %.2f", want), Got: redis, Pass: redis <= want})
		}
	}
	return out
}
