package mcptool

import (
	"bytes"
	"log/slog"
	"sync"
)

// maxStderrLine caps one logged line of a stdio server's stderr.
const maxStderrLine = 4096

// stderrLog is the Stderr of a stdio server's process: every line it writes
// becomes one log record of the gateway, tagged with the server's name
// (the logger carries mcp_server), instead of raw text on the gateway's own
// stderr.
type stderrLog struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

// Write logs each complete line and keeps the rest for the next write.
func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxStderrLine {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

func (w *stderrLog) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	if len(line) == 0 {
		return
	}
	w.log.Info("mcp server stderr", "line", string(line))
}
