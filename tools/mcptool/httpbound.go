package mcptool

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"slices"

	"github.com/toolgateway/toolgateway/tools"
)

// upstreamTransport carries a Streamable HTTP upstream's requests: it adds
// the configured headers, marks a call's request as written (sendMark) once
// the HTTP client wrote it, and bounds every response body so that no
// message over maxBytes reaches go-sdk (whose reader has no cap for a JSON
// answer, and ends the whole session for an oversized SSE event): a message
// over the cap is discarded as it streams past and replaced by a JSON-RPC
// error answering its request alone (tooLargeResponse).
type upstreamTransport struct {
	base     http.RoundTripper
	headers  http.Header
	maxBytes int64
	log      *slog.Logger
}

func (t *upstreamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for name, values := range t.headers {
		r.Header[name] = values
	}
	// The id of the call the request carries, to answer it if its response
	// is too large (a JSON answer has no other place to find it in time).
	var callID []byte
	if r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			var scan frameScanner
			_, _ = io.Copy(&scan, body)
			_ = body.Close()
			if msgs := scan.messages(); len(msgs) == 1 && msgs[0].hasMethod && validID(msgs[0].id) {
				callID = msgs[0].id
			}
		}
	}
	mark := sendMarkFrom(r.Context())
	if mark != nil && callID != nil {
		trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				mark.written.Store(true)
			}
		}}
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), trace))
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if mark != nil && callID != nil && refusal(resp) {
		mark.refused.Store(true)
	}
	resp.Body = t.bound(resp, callID)
	return resp, nil
}

// refusal reports whether an HTTP error status answering a call's request
// proves the server did not act on it: a 4xx (the message was refused) but
// 408, 425 and 429, or another 4xx or 5xx the server marked not executed
// (tools.HeaderNotExecuted: one wire.HeaderOutcome value, exactly
// wire.OutcomeNotExecuted). An unmarked 5xx — the server, or a proxy in
// front of it, failing after the request went in — is not, nor an
// unmarked 408/425/429, which a proxy or the server may answer after the
// request went in: the call may have run.
func refusal(resp *http.Response) bool {
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && !slices.Contains(tools.TransientStatuses, resp.StatusCode) {
		return true
	}
	return resp.StatusCode >= 400 && tools.HeaderNotExecuted(resp.Header)
}

// bound wraps resp's body according to what it carries.
func (t *upstreamTransport) bound(resp *http.Response, callID []byte) io.ReadCloser {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		// An error page: go-sdk reads it for a JSON-RPC error; the cap
		// only truncates it.
		return &limitedBody{r: io.LimitReader(resp.Body, t.maxBytes), c: resp.Body}
	case mediaType == "application/json":
		size := resp.ContentLength
		resp.ContentLength = -1 // the body may be replaced
		return &jsonBody{src: resp.Body, size: size, maxBytes: t.maxBytes, callID: callID, log: t.log}
	case mediaType == "text/event-stream":
		return &sseBody{src: bufio.NewReaderSize(resp.Body, frameFilterBufferSize), c: resp.Body, maxBytes: t.maxBytes, callID: callID, log: t.log}
	default:
		return &limitedBody{r: io.LimitReader(resp.Body, t.maxBytes), c: resp.Body}
	}
}

// limitedBody reads at most a limit of a body, then reports its end.
type limitedBody struct {
	r io.Reader
	c io.Closer
}

func (b *limitedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *limitedBody) Close() error               { return b.c.Close() }

// jsonBody is the body of an application/json answer: one message, read
// whole (at most maxBytes, held) before go-sdk sees any of it, or replaced
// by the error answering callID when it is longer.
type jsonBody struct {
	src      io.ReadCloser
	size     int64 // Content-Length, -1 when unknown
	maxBytes int64
	callID   []byte
	log      *slog.Logger

	read bool
	data *bytes.Reader
	err  error
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		b.load()
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.data.Read(p)
}

func (b *jsonBody) load() {
	if b.size <= b.maxBytes {
		buf := make([]byte, 0, min(max(b.size, 512), b.maxBytes+1))
		w := bytes.NewBuffer(buf)
		n, err := io.Copy(w, io.LimitReader(b.src, b.maxBytes+1))
		if err != nil {
			b.err = err
			return
		}
		if n <= b.maxBytes {
			b.data = bytes.NewReader(w.Bytes())
			return
		}
	}
	// Too large: the rest is not read (closing the body drops the
	// connection instead of downloading it).
	_ = b.src.Close()
	b.log.Warn("mcp server: answer over max_response_bytes discarded; its request fails alone", "limit", b.maxBytes)
	if b.callID == nil {
		b.err = fmt.Errorf("MCP server answer exceeds max_response_bytes (%d bytes)", b.maxBytes)
		return
	}
	b.data = bytes.NewReader(tooLargeResponse(b.callID, b.maxBytes))
}

func (b *jsonBody) Close() error { return b.src.Close() }

// sseBody is the body of a text/event-stream answer (a POST's stream, or a
// GET that resumes or listens). Events pass on whole when they are at most
// maxBytes long; a longer one is discarded as it streams past, its data
// scanned for the message's id, and replaced by an event carrying the error
// that answers it (for a message without id: callID, the stream's own
// call). An oversized notification or request from the server is dropped.
type sseBody struct {
	src      *bufio.Reader
	c        io.Closer
	maxBytes int64
	callID   []byte
	log      *slog.Logger

	event   []byte
	pending []byte
	err     error
}

func (b *sseBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.next()
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *sseBody) Close() error { return b.c.Close() }

// next reads one event (its lines up to and including the blank line that
// ends it) into pending.
func (b *sseBody) next() {
	b.event = b.event[:0]
	for {
		chunk, err := b.src.ReadSlice('\n')
		if int64(len(b.event)+len(chunk)) > b.maxBytes {
			b.discard(chunk, err)
			return
		}
		lineStart := len(b.event) == 0 || b.event[len(b.event)-1] == '\n'
		b.event = append(b.event, chunk...)
		switch {
		case err == nil:
			if lineStart && (len(chunk) == 1 || (len(chunk) == 2 && chunk[0] == '\r')) {
				b.pending = b.event // the blank line ends the event
				return
			}
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			b.pending, b.err = b.event, err
			return
		}
	}
}

// discard skips the rest of an oversized event and puts the stand-in in
// pending.
func (b *sseBody) discard(chunk []byte, err error) {
	var data sseDataScanner
	data.atLineStart = true
	data.feed(b.event)
	b.event = b.event[:0]
	if cap(b.event) > frameFilterBufferSize {
		b.event = nil
	}
	for !data.feed(chunk) {
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			b.err = err
			return
		}
		chunk, err = b.src.ReadSlice('\n')
	}
	b.log.Warn("mcp server: event over max_response_bytes discarded; its request fails alone", "limit", b.maxBytes)
	msgs := data.scan.messages()
	var ids [][]byte
	for _, msg := range msgs {
		if !msg.hasMethod && validID(msg.id) {
			ids = append(ids, msg.id)
		}
	}
	if len(msgs) == 0 && b.callID != nil {
		ids = append(ids, b.callID)
	}
	var out []byte
	for _, id := range ids {
		out = append(out, "event: message\ndata: "...)
		out = append(out, tooLargeResponse(id, b.maxBytes)...)
		out = append(out, "\n\n"...)
	}
	b.pending = out
}

// sseDataScanner feeds the data lines of one event to a frameScanner (the
// lines joined by newlines, as SSE joins them), and tells when the event's
// blank line comes. Its input arrives in chunks that end at a line end or
// inside a long line.
type sseDataScanner struct {
	scan        frameScanner
	atLineStart bool
	inData      bool
	dataLines   int
}

// feed takes the next chunk; true when it ended the event.
func (s *sseDataScanner) feed(chunk []byte) bool {
	for len(chunk) > 0 {
		if s.atLineStart {
			if chunk[0] == '\n' || (chunk[0] == '\r' && len(chunk) > 1 && chunk[1] == '\n') {
				return true
			}
			s.inData = bytes.HasPrefix(chunk, []byte("data:"))
			if s.inData {
				chunk = bytes.TrimPrefix(chunk[len("data:"):], []byte(" "))
				if s.dataLines > 0 {
					_, _ = s.scan.Write([]byte{'\n'})
				}
				s.dataLines++
			}
			s.atLineStart = false
		}
		i := bytes.IndexByte(chunk, '\n')
		seg := chunk
		if i >= 0 {
			seg = bytes.TrimSuffix(chunk[:i], []byte("\r"))
		}
		if s.inData {
			_, _ = s.scan.Write(seg)
		}
		if i < 0 {
			return false
		}
		chunk = chunk[i+1:]
		s.atLineStart = true
	}
	return false
}
