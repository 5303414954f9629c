package httptool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/toolgateway/toolgateway/tools"
)

// readCapped reads the whole body, or fails with tools.ErrResponseTooLarge
// as soon as it is known to exceed maxBytes: an outcome the gateway cannot
// store in full cannot be replayed byte for byte.
func readCapped(resp *http.Response, maxBytes int64) ([]byte, error) {
	if resp.ContentLength > maxBytes {
		return nil, fmt.Errorf("%w: Content-Length %d exceeds the cap of %d bytes", tools.ErrResponseTooLarge, resp.ContentLength, maxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > maxBytes {
		return nil, fmt.Errorf("%w: body exceeds the cap of %d bytes", tools.ErrResponseTooLarge, maxBytes)
	}
	return body, nil
}

// failure names the tool and classifies err for the gateway: the call's own
// deadline or cancellation first (the context error is what ended it,
// whatever the transport reports), then a response-header timeout (the
// upstream took the request but did not answer in time, like a tool
// timeout), then a connection lost once the request was written (the
// upstream may have acted: tools.ErrOutcomeUncertain), then everything else
// as an upstream that never got the request.
func (t *Tool) failure(ctx context.Context, what string, written bool, err error) error {
	if errors.Is(err, tools.ErrResponseTooLarge) {
		return fmt.Errorf("tool %q: %w", t.spec.Name, err)
	}
	target := t.url.Redacted()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("tool %q: POST %s: %w", t.spec.Name, target, ctxErr)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("tool %q: POST %s: %w", t.spec.Name, target, err)
	}
	var opErr *net.OpError
	isDial := errors.As(err, &opErr) && opErr.Op == "dial"
	var netErr net.Error
	if !isDial && errors.As(err, &netErr) && netErr.Timeout() {
		return fmt.Errorf("tool %q: POST %s: %w (%v)", t.spec.Name, target, context.DeadlineExceeded, err)
	}
	if written {
		return fmt.Errorf("tool %q: POST %s: %w: no whole answer after the request was written: %s: %v", t.spec.Name, target, tools.ErrOutcomeUncertain, what, err)
	}
	return fmt.Errorf("tool %q: POST %s: %w: %s: %v", t.spec.Name, target, tools.ErrUpstreamUnreachable, what, err)
}
