package tools

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgateway/toolgateway/wire"
)

// FinalStatus reports whether status is a final HTTP answer the gateway
// can record or relay: 200–599. A 1xx is not final (101 hands the
// connection over to another protocol; Go's HTTP client consumes 100 and
// 103 itself), and a code outside 100–599 is no HTTP status at all: an
// upstream that answers either has taken the request, so what it did is
// unknown.
func FinalStatus(status int) bool {
	return status >= 200 && status <= 599
}

// HeaderNotExecuted reports whether an HTTP upstream's answer carries the
// evidence that it did not act: exactly one wire.HeaderOutcome value, and
// that value exactly wire.OutcomeNotExecuted. Two values (two headers, or
// a comma-separated list) contradict each other or may: whichever came
// first proves nothing, so they are no evidence; nor is any other value.
func HeaderNotExecuted(h http.Header) bool {
	values := h.Values(wire.HeaderOutcome)
	return len(values) == 1 && values[0] == wire.OutcomeNotExecuted
}

// TransientStatuses are the statuses that may be listed in
// Policy.NotExecutedStatuses: 408 Request Timeout, 425 Too Early and 429
// Too Many Requests, which by HTTP's definitions say the request was not
// processed. 503 is left out on purpose: proxies and frameworks answer it
// for overload and timeouts after the request reached the application, so
// a 503 is evidence only when the upstream marks it (wire.HeaderOutcome).
var TransientStatuses = []int{http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests}

// StatusSet is a set of TransientStatuses, as Policy.NotExecutedStatuses
// holds it: comparable, and telling a list left out (the zero value:
// Listed false) from an empty one.
type StatusSet struct {
	listed bool
	mask   uint8 // bit i: TransientStatuses[i]
}

// NewStatusSet is the set of statuses, a list as the config writes it
// (even empty: Listed). It refuses a status that is not one of
// TransientStatuses, or one listed twice.
func NewStatusSet(statuses []int) (StatusSet, error) {
	set := StatusSet{listed: true}
	for _, s := range statuses {
		i := slices.Index(TransientStatuses, s)
		if i < 0 {
			return StatusSet{}, fmt.Errorf("%d is not one of %s (a 5xx counts as not executed only when the upstream marks it with %s: %s)",
				s, statusList(TransientStatuses), wire.HeaderOutcome, wire.OutcomeNotExecuted)
		}
		if set.mask&(1<<i) != 0 {
			return StatusSet{}, fmt.Errorf("%d is listed twice", s)
		}
		set.mask |= 1 << i
	}
	return set, nil
}

// Listed reports whether the set was given (even empty).
func (s StatusSet) Listed() bool { return s.listed }

// Contains reports whether status is in the set.
func (s StatusSet) Contains(status int) bool {
	i := slices.Index(TransientStatuses, status)
	return i >= 0 && s.mask&(1<<i) != 0
}

// Statuses lists the set, in TransientStatuses' order.
func (s StatusSet) Statuses() []int {
	out := []int{}
	for i, status := range TransientStatuses {
		if s.mask&(1<<i) != 0 {
			out = append(out, status)
		}
	}
	return out
}

// statusList is "408, 425, 429".
func statusList(statuses []int) string {
	parts := make([]string, len(statuses))
	for i, s := range statuses {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}
