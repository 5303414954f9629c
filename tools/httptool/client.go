package httptool

import (
	"net"
	"net/http"
	"time"
)

// ClientOptions tunes the shared upstream client. The zero value of a field
// means its default.
type ClientOptions struct {
	// DialTimeout bounds connecting to an upstream (default 5s). A dial that
	// times out is an unreachable upstream.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake (default 5s).
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response headers once the
	// request is written. Default 0: no transport-wide bound, because each
	// call already carries its tool's own timeout in its context, and a
	// shared bound shorter than some tool's timeout would cut that tool off.
	// Set it to the largest tool timeout to guard against a context without
	// deadline.
	ResponseHeaderTimeout time.Duration
	// MaxIdleConnsPerHost is how many keep-alive connections to one upstream
	// stay open between calls (default 256). net/http's default of 2 makes a
	// burst of concurrent calls to one upstream open and close a connection
	// per call.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes keep-alive connections unused for this long
	// (default 90s).
	IdleConnTimeout time.Duration
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = 5 * time.Second
	}
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = 256
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = 90 * time.Second
	}
	return o
}

// NewClient returns the client HTTP upstream tools share, with the default
// ClientOptions. Build it once per gateway and pass it in every Config, so
// that tools calling the same upstream share its keep-alive connections.
func NewClient() *http.Client {
	return NewClientWith(ClientOptions{})
}

// NewClientWith returns an upstream client tuned by opts.
//
// It does not follow redirects: a redirect is the upstream's answer and
// becomes the outcome, because following a 301/302 would turn the POST into
// a GET without the body.
func NewClientWith(opts ClientOptions) *http.Client {
	opts = opts.withDefaults()
	dialer := &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * opts.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   opts.MaxIdleConnsPerHost,
		IdleConnTimeout:       opts.IdleConnTimeout,
		TLSHandshakeTimeout:   opts.TLSHandshakeTimeout,
		ResponseHeaderTimeout: opts.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
