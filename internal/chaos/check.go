package chaos

import (
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/keyderive"
)

// maxViolationsPerTag keeps a broken run's report readable.
const maxViolationsPerTag = 20

// check evaluates the invariants over what the agents got, what the
// upstream ran, when each replica was killed or drained, and when the
// store was down.
func check(r *Report, steps []*step, execs map[string][]execution, kills map[string][]time.Time, outages []outage, lockTTL time.Duration) {
	counts := map[string]int{}
	violate := func(tag, format string, args ...any) {
		counts[tag]++
		if counts[tag] <= maxViolationsPerTag {
			r.violate(tag+": "+format, args...)
		}
	}
	diedDuring := func(replica string, from, to time.Time) bool {
		for _, t := range kills[replica] {
			if !t.Before(from) && !t.After(to) {
				return true
			}
		}
		return false
	}
	// outageAfter: the store was down for longer than a lease after from —
	// long enough for a completion not to land before the lease expired.
	outageAfter := func(from time.Time) bool {
		for _, o := range outages {
			if o.To.Sub(o.From) >= lockTTL && o.To.After(from) {
				return true
			}
		}
		return false
	}

	for _, s := range steps {
		r.Steps++
		if s.Tool == toolUnknown {
			r.StepsUnknownPolicy++
		}
		r.FinalAnswers += len(s.Answers)
		id := func() string { return s.Session + "/" + s.Tool + "/step " + strconv.FormatUint(s.Index, 10) }
		if len(s.Answers) == 0 {
			violate(tagLost, "%s got no answer", id())
			continue
		}
		// The upstream sees the tenant-scoped key; the agents run without
		// auth, as the anonymous tenant.
		runs := execs[keyderive.ScopedKey(gateway.AnonymousTenant, s.Tool, s.Key)]
		// A step whose completion a long store outage may have kept from
		// landing: its changed answers (and, for the rerun tool, its extra
		// runs) are the window docs/reliability.md measures, not
		// violations. The unknown tool running twice always is one.
		outageStep := len(runs) > 0 && outageAfter(runs[0].Start)
		outageRerun := false
		first := s.Answers[0]
		for _, a := range s.Answers {
			switch a.Kind {
			case answerLost:
				violate(tagLost, "%s: no final answer within the deadline: %s", id(), a.Detail)
			case answerUnexpected:
				violate(tagOneAnswer, "%s: unexpected final answer: %s", id(), a.Detail)
			}
			if !a.sameAs(first) {
				if outageStep {
					outageRerun = true
					continue
				}
				violate(tagOneAnswer, "%s: answers differ: %+v vs %+v", id(), first, a)
			}
		}
		if first.Kind == answerUnknown {
			r.UnknownOutcomes++
			if len(runs) == 0 {
				r.UnknownNeverRan++
			}
		}
		if s.Tool == toolUnknown && len(runs) > 1 {
			r.UnknownSecondRuns += len(runs) - 1
			violate(tagUnknownOnce, "%s ran %d times", id(), len(runs))
		}
		for k := 1; k < len(runs); k++ {
			prev := runs[k-1]
			switch {
			case diedDuring(prev.Replica, prev.Start, runs[k].Start):
				r.ReexecutedAfterDeath++
				continue
			case s.Tool == toolRerun && prev.Uncertain:
				r.ReexecutedAfterUncertain++
				continue
			case s.Tool == toolRerun && outageStep && !prev.Aborted:
				outageRerun = true
				continue
			}
			violate(tagOnlyOnDeath, "%s: run %d on %s although run %d's gateway %s was not killed (aborted=%v, uncertain=%v, %v–%v, next at %v)",
				id(), k+1, runs[k].Replica, k, prev.Replica, prev.Aborted, prev.Uncertain,
				prev.Start.Format(time.StampMilli), prev.End.Format(time.StampMilli), runs[k].Start.Format(time.StampMilli))
		}
		if first.Kind == answerResult {
			delivered := -1
			for i, run := range runs {
				if run.ExecutionID == first.ExecutionID {
					delivered = i
				}
			}
			switch {
			case delivered < 0:
				violate(tagOneAnswer, "%s: answer of execution %s that the upstream never ran", id(), first.ExecutionID)
			case delivered < len(runs)-1 && outageStep:
				outageRerun = true
			case delivered < len(runs)-1:
				violate(tagCompleted, "%s: execution %s completed and was answered, yet the tool ran %d more time(s)",
					id(), first.ExecutionID, len(runs)-1-delivered)
			}
		}
		if outageRerun {
			r.OutageReruns++
			if len(r.OutageRerunSteps) < maxViolationsPerTag {
				r.OutageRerunSteps = append(r.OutageRerunSteps, id())
			}
		}
	}
}
