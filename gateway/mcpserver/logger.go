package mcpserver

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger handed to the go-sdk MCP server: its warnings
// and errors, marked as its own, without the session lines it logs at
// info level for every stateless POST /mcp (three per request), which
// the access log line already covers.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(warnAndAbove{log.Handler()}).With("component", "mcp-sdk")
}

// warnAndAbove passes records at warn level or above to its handler.
type warnAndAbove struct{ slog.Handler }

// Enabled drops everything below warn.
func (h warnAndAbove) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

// WithAttrs keeps the level floor on the derived handler.
func (h warnAndAbove) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the level floor on the derived handler.
func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}
