package agentclient

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// retryableStatus: statuses after which the same request may succeed; the
// gateway stored nothing for them, so sending the same key again is safe.
func retryableStatus(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// shouldRetry decides on a response: only the contract's transient answers
// are retried. 409 outcome_unknown is final: the tool may have acted.
func shouldRetry(problem *Error) bool {
	if problem.Status == http.StatusConflict {
		return problem.Code == wire.CodeRequestInProgress
	}
	return retryableStatus(problem.Status)
}

// backoff returns the delay before retry number retry (0 for the first
// retry): the ceiling initial·2^retry, capped at max, and a delay drawn from
// its upper half ("equal jitter"), so it never collapses to zero.
func (c *Client) backoff(retry int) time.Duration {
	ceiling := c.maxBackoff
	if retry < 62 && c.initialBackoff<<retry > 0 && c.initialBackoff<<retry < c.maxBackoff {
		ceiling = c.initialBackoff << retry
	}
	half := ceiling / 2
	return half + rand.N(ceiling-half+1)
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date.
func parseRetryAfter(value string) time.Duration {
	if value == "" {
		return 0
	}
	if seconds, err := strconv.ParseUint(value, 10, 32); err == nil {
		return time.Duration(seconds) * time.Second
	}
	if date, err := http.ParseTime(value); err == nil {
		if wait := time.Until(date); wait > 0 {
			return wait
		}
	}
	return 0
}
