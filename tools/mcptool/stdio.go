package mcptool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport runs a stdio MCP server and connects to it like go-sdk's
// CommandTransport, except that the server's output passes through a
// frameFilter first: a message over the cap never reaches go-sdk's reader
// (whose own line limit would end the session, and with it every call in
// flight on it). The filter answers the oversized message's request alone.
type stdioTransport struct {
	cmd       *exec.Cmd
	maxBytes  int64
	terminate time.Duration
	log       *slog.Logger
}

// Connect starts the process and returns go-sdk's newline-delimited JSON
// connection over the filtered pipes.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	w := &processInput{cmd: t.cmd, stdin: stdin, terminate: t.terminate}
	r := newFrameFilter(stdout, t.maxBytes, w, t.log)
	// The filter passes at most maxBytes per message (plus its own small
	// answers), so go-sdk's line limit only has to be above that.
	inner, err := (&mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: int(t.maxBytes) + 64<<10}).Connect(ctx)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	return &markingConn{Connection: inner}, nil
}

// markingConn marks the context of every request it wrote (sendMark), so
// a call that fails afterwards knows the server may have received it.
type markingConn struct {
	mcp.Connection
}

func (c *markingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && err == nil {
		markWritten(ctx)
	}
	return err
}

// processInput is the server's stdin. Its writes are serialised (go-sdk
// writes one whole message per Write under its own lock; the filter's
// answers to oversized server requests take the same lock). Close ends the
// process as the MCP specification asks: stdin closed, then SIGTERM, then
// SIGKILL, each after a grace period.
type processInput struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration

	mu        sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

func (w *processInput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stdin.Write(p)
}

func (w *processInput) Close() error {
	w.closeOnce.Do(func() { w.closeErr = w.stop() })
	return w.closeErr
}

func (w *processInput) stop() error {
	if err := w.stdin.Close(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(w.terminate)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := w.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the stdio server does not exit")
}

// frameFilterBufferSize is the read buffer of a frameFilter: how much of
// the server's output it reads at once, on top of the message it holds.
const frameFilterBufferSize = 64 << 10

// frameFilter reads a stdio server's newline-delimited messages and passes
// each one on whole, if it is at most maxBytes long (not counting the line
// end). A longer one is discarded as it streams past, never held: the
// filter keeps at most maxBytes of a message, and a frameScanner finds the
// message's id on the way (anywhere in the message). In its place the
// filter passes on a JSON-RPC error answering that id (tooLargeResponse), so
// the one call fails and the session goes on; an oversized request from the
// server is answered with that error on the server's stdin, and an
// oversized notification is dropped. Blank lines are dropped.
type frameFilter struct {
	src      *bufio.Reader
	maxBytes int64
	server   io.Writer // the server's stdin, for answers to its requests
	log      *slog.Logger

	frame   []byte // the message being read (at most maxBytes)
	pending []byte // what Read hands on next: one whole message and its newline
	err     error  // the source's error, reported once pending is empty

	// peak is the most message bytes the filter ever held at once (tests
	// check it against maxBytes).
	peak int
}

func newFrameFilter(src io.Reader, maxBytes int64, server io.Writer, log *slog.Logger) *frameFilter {
	return &frameFilter{src: bufio.NewReaderSize(src, frameFilterBufferSize), maxBytes: maxBytes, server: server, log: log}
}

// Read hands on the filtered stream. It never returns bytes of two lines
// of the server's in one call, so go-sdk's decoder does not read ahead.
func (f *frameFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// Close does nothing: the process's stdout closes when it exits, which
// processInput.Close brings about.
func (f *frameFilter) Close() error { return nil }

// next reads the next line into pending (or records the source's error).
func (f *frameFilter) next() {
	f.frame = f.frame[:0]
	for {
		chunk, err := f.src.ReadSlice('\n')
		complete := err == nil
		content := len(chunk)
		if complete {
			content-- // the newline
			if content > 0 && chunk[content-1] == '\r' {
				content--
			}
		}
		if int64(len(f.frame)+content) > f.maxBytes {
			f.discard(chunk, complete, err)
			return
		}
		switch {
		case complete:
			f.frame = append(f.frame, chunk...)
			f.peak = max(f.peak, len(f.frame)-(len(chunk)-content))
			if len(trimSpace(f.frame)) == 0 {
				f.frame = f.frame[:0]
				continue
			}
			f.pending = f.frame
			return
		case errors.Is(err, bufio.ErrBufferFull):
			f.frame = append(f.frame, chunk...)
			f.peak = max(f.peak, len(f.frame))
		default:
			// The end of the output: hand on a last unterminated message
			// (go-sdk reports it malformed if it is) before the error.
			f.frame = append(f.frame, chunk...)
			f.pending, f.err = f.frame, err
			return
		}
	}
}

// discard skips the rest of an oversized message, scanning it for its id,
// and puts the stand-in answer in pending.
func (f *frameFilter) discard(chunk []byte, complete bool, err error) {
	scan := &frameScanner{}
	_, _ = scan.Write(f.frame)
	size := int64(len(f.frame))
	f.frame = f.frame[:0]
	if cap(f.frame) > frameFilterBufferSize {
		f.frame = nil // do not keep a large buffer for the small messages
	}
	for {
		_, _ = scan.Write(chunk)
		size += int64(len(chunk))
		if complete {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			f.err = err
			return // the server's output ended inside the message
		}
		chunk, err = f.src.ReadSlice('\n')
		complete = err == nil
	}
	f.log.Warn("mcp server: message over max_response_bytes discarded; its request fails alone", "limit", f.maxBytes, "size_at_least", size)
	var answers []byte
	for _, msg := range scan.messages() {
		switch {
		case !validID(msg.id):
			// A notification (or an id the filter cannot answer): dropped.
		case msg.hasMethod:
			// A request from the server: tell it, so it does not wait.
			answer := append(tooLargeResponse(msg.id, f.maxBytes), '\n')
			if _, werr := f.server.Write(answer); werr != nil {
				f.log.Debug("mcp server: answering an oversized request failed", "error", werr)
			}
		default:
			answers = append(answers, tooLargeResponse(msg.id, f.maxBytes)...)
			answers = append(answers, '\n')
		}
	}
	f.pending = answers
}

// trimSpace trims JSON whitespace.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
