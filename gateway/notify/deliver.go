package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// maxResponseDrain bounds how much of a receiver's answer is read (to
// reuse the connection); the answer itself is not used.
const maxResponseDrain = 64 << 10

// work sends queued notifications until the queue is closed and empty.
func (n *Notifier) work() {
	for m := range n.queue {
		if n.ctx.Err() != nil {
			n.dropped.Add(1) // Close gave up draining
			continue
		}
		n.deliver(m)
	}
}

// deliver sends m, retrying with backoff, and counts the outcome.
func (n *Notifier) deliver(m message) {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     n.cfg.InitialBackoff,
		RandomizationFactor: 0.5, // jitter: receivers recovering are not hit by every sender at once
		Multiplier:          2,
		MaxInterval:         n.cfg.MaxBackoff,
	}
	_, err := backoff.Retry(n.ctx, func() (struct{}, error) { return struct{}{}, n.attempt(m) },
		backoff.WithBackOff(b),
		backoff.WithMaxTries(n.cfg.MaxAttempts),
		backoff.WithMaxElapsedTime(0), // bounded by MaxAttempts instead
		backoff.WithNotify(func(error, time.Duration) { n.retries.Add(1) }),
	)
	if err != nil {
		n.failed.Add(1)
		n.cfg.Logger.Warn("approval notification given up", "approval_id", m.approvalID, "error", err)
		return
	}
	n.delivered.Add(1)
}

// attempt POSTs m once, signed now. A status that retrying cannot change is
// a [backoff.Permanent] error.
func (n *Notifier) attempt(m message) error {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(m.body))
	if err != nil {
		return backoff.Permanent(fmt.Errorf("notify: request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(n.cfg.Secret, time.Now(), m.body))
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		// Not the *url.Error itself: its message holds the URL, and a
		// webhook URL often carries a token in its path or query.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return fmt.Errorf("notify: post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseDrain))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return fmt.Errorf("notify: receiver answered %d", resp.StatusCode)
	default:
		return backoff.Permanent(fmt.Errorf("notify: receiver answered %d", resp.StatusCode))
	}
}
