package chaos

import (
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/keyderive"
)

// maxViolationsPerTag keeps a broken run's report readable.
const maxViolationsPerTag = 20

// check evaluates the invariants over what the agents got, what the
// upstream ran, when each replica was killed or drained, and when the
// store was down.
func check(r *Report, steps []*step, execs map[string][]execution, kills map[string][]time.Time, outages []outage, lockTTL time.Duration) {
	c := &checker{r: r, execs: execs, kills: kills, outages: outages, lockTTL: lockTTL, counts: map[string]int{}}
	for _, s := range steps {
		c.step(s)
	}
}

// checker holds what check judges every step against.
type checker struct {
	r       *Report
	execs   map[string][]execution
	kills   map[string][]time.Time
	outages []outage
	lockTTL time.Duration
	counts  map[string]int // violations per tag
}

func (c *checker) violate(tag, format string, args ...any) {
	c.counts[tag]++
	if c.counts[tag] <= maxViolationsPerTag {
		c.r.violate(tag+": "+format, args...)
	}
}

// inFlightGrace is how long before a run's start its gateway may have died
// and the run still be that gateway's: a request written just before the
// SIGKILL reaches the upstream, and its handler starts, after the kill was
// recorded (seen: 1 ms after, on a loaded machine; a replica is killed at
// most every few hundred milliseconds, so the grace hides no other run).
const inFlightGrace = 250 * time.Millisecond

// diedDuring reports whether replica was killed or drained between from
// (less inFlightGrace) and to.
func (c *checker) diedDuring(replica string, from, to time.Time) bool {
	for _, t := range c.kills[replica] {
		if !t.Before(from.Add(-inFlightGrace)) && !t.After(to) {
			return true
		}
	}
	return false
}

// outageAfter: the store was down for longer than a lease after from —
// long enough for a completion not to land before the lease expired.
func (c *checker) outageAfter(from time.Time) bool {
	for _, o := range c.outages {
		if o.To.Sub(o.From) >= c.lockTTL && o.To.After(from) {
			return true
		}
	}
	return false
}

// step checks one step: its answers, its runs at the upstream, and that
// an answered execution was the last run.
func (c *checker) step(s *step) {
	r := c.r
	r.Steps++
	if s.Tool == toolUnknown {
		r.StepsUnknownPolicy++
	}
	r.FinalAnswers += len(s.Answers)
	id := s.Session + "/" + s.Tool + "/step " + strconv.FormatUint(s.Index, 10)
	if len(s.Answers) == 0 {
		c.violate(tagLost, "%s got no answer", id)
		return
	}
	// The upstream sees the tenant-scoped key; the agents run without
	// auth, as the anonymous tenant.
	runs := c.execs[keyderive.ScopedKey(callpath.AnonymousTenant, s.Tool, s.Key)]
	// A step whose completion a long store outage may have kept from
	// landing: its changed answers (and, for the rerun tool, its extra
	// runs) are the window docs/reliability.md measures, not
	// violations. The unknown tool running twice always is one.
	outageStep := len(runs) > 0 && c.outageAfter(runs[0].Start)
	outageRerun := c.answers(s, id, outageStep)
	first := s.Answers[0]
	if first.Kind == answerUnknown {
		r.UnknownOutcomes++
		if len(runs) == 0 {
			r.UnknownNeverRan++
		}
	}
	if s.Tool == toolUnknown && len(runs) > 1 {
		r.UnknownSecondRuns += len(runs) - 1
		c.violate(tagUnknownOnce, "%s ran %d times", id, len(runs))
	}
	outageRerun = c.reruns(s, id, runs, outageStep) || outageRerun
	if first.Kind == answerResult {
		outageRerun = c.delivered(id, first, runs, outageStep) || outageRerun
	}
	if outageRerun {
		r.OutageReruns++
		if len(r.OutageRerunSteps) < maxViolationsPerTag {
			r.OutageRerunSteps = append(r.OutageRerunSteps, id)
		}
	}
}

// answers checks that every final answer of s is the first one (an
// outage step's differing answers are the measured window: it reports
// them).
func (c *checker) answers(s *step, id string, outageStep bool) (outageRerun bool) {
	first := s.Answers[0]
	for _, a := range s.Answers {
		switch a.Kind {
		case answerLost:
			c.violate(tagLost, "%s: no final answer within the deadline: %s", id, a.Detail)
		case answerUnexpected:
			c.violate(tagOneAnswer, "%s: unexpected final answer: %s", id, a.Detail)
		}
		if !a.sameAs(first) {
			if outageStep {
				outageRerun = true
				continue
			}
			c.violate(tagOneAnswer, "%s: answers differ: %+v vs %+v", id, first, a)
		}
	}
	return outageRerun
}

// reruns checks that each run after the first followed the death of the
// previous run's gateway (or, for the rerun tool, an uncertain outcome or
// an outage).
func (c *checker) reruns(s *step, id string, runs []execution, outageStep bool) (outageRerun bool) {
	for k := 1; k < len(runs); k++ {
		prev := runs[k-1]
		switch {
		case c.diedDuring(prev.Replica, prev.Start, runs[k].Start):
			c.r.ReexecutedAfterDeath++
			continue
		case s.Tool == toolRerun && prev.Uncertain:
			c.r.ReexecutedAfterUncertain++
			continue
		case s.Tool == toolRerun && outageStep && !prev.Aborted:
			outageRerun = true
			continue
		}
		c.violate(tagOnlyOnDeath, "%s: run %d on %s although run %d's gateway %s was not killed (aborted=%v, uncertain=%v, %v–%v, next at %v)",
			id, k+1, runs[k].Replica, k, prev.Replica, prev.Aborted, prev.Uncertain,
			prev.Start.Format(time.StampMilli), prev.End.Format(time.StampMilli), runs[k].Start.Format(time.StampMilli))
	}
	return outageRerun
}

// delivered checks that the answered execution ran and was the last run.
func (c *checker) delivered(id string, first answer, runs []execution, outageStep bool) (outageRerun bool) {
	delivered := -1
	for i, run := range runs {
		if run.ExecutionID == first.ExecutionID {
			delivered = i
		}
	}
	switch {
	case delivered < 0:
		c.violate(tagOneAnswer, "%s: answer of execution %s that the upstream never ran", id, first.ExecutionID)
	case delivered < len(runs)-1 && outageStep:
		return true
	case delivered < len(runs)-1:
		c.violate(tagCompleted, "%s: execution %s completed and was answered, yet the tool ran %d more time(s)",
			id, first.ExecutionID, len(runs)-1-delivered)
	}
	return false
}
