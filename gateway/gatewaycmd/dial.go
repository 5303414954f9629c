package gatewaycmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// `gateway check -dial`: after the checks start-up runs, connect to what
// the gateway would connect to and report each target. Nothing is written:
// the store is pinged (PostgreSQL: no schema migration, unlike start-up),
// each MCP server is started and listed as at start-up, each HTTP upstream
// gets a TCP connection (and a TLS handshake for https), never a request.

// dialTimeout bounds each target's dial.
const dialTimeout = 5 * time.Second

// dialStore connects to the store and pings it.
func dialStore(ctx context.Context, cfg *Config, choice storeChoice, log *slog.Logger) DialResult {
	res := DialResult{Target: "store"}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var err error
	var detail string
	switch choice.kind {
	case storeKindEmbedded:
		detail, err = checkEmbeddedPath(cfg.path(cfg.Store.Path))
	case storeKindRedis, storeKindRedisCluster:
		redis.SetLogger(redisLogger{log: log}) // into the check's log, not stderr
		client := cfg.redisClient()
		defer client.Close()
		err = client.Ping(ctx).Err()
		detail = choice.desc + ": PING answered"
	case storeKindPostgres:
		detail, err = pingPostgres(ctx, cfg.Store.PostgresURL)
		detail = choice.desc + ": " + detail
	}
	if err != nil {
		res.Detail = fmt.Sprintf("%s: %v", choice.desc, err)
		return res
	}
	layout, err := storeLayout(ctx, cfg, choice)
	if err != nil {
		res.Detail = fmt.Sprintf("%s: %v", choice.desc, err)
		return res
	}
	res.OK, res.Detail = true, detail+layout
	return res
}

// storeLayout reports a shared store's data layout (schema) version, and
// fails for a layout newer than this gateway knows (it would decide
// nothing on it). The store is opened with store.migrate off, so nothing
// is changed. The embedded file is not opened: a running gateway holds
// its lock (`gateway migrate -print` reports its version when it is not
// running).
func storeLayout(ctx context.Context, cfg *Config, choice storeChoice) (string, error) {
	if choice.kind == storeKindEmbedded {
		return "", nil
	}
	readOnly := *cfg
	readOnly.Store.Migrate = new(bool)
	store, _, err := readOnly.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", err
	}
	defer store.Close()
	layouts, ok := store.(idempotency.Layouts)
	if !ok {
		return "", nil
	}
	v, err := layouts.LayoutVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the layout version: %w", err)
	}
	if err := v.Check(choice.desc); err != nil {
		return "", err
	}
	return fmt.Sprintf("; layout version %d (this gateway writes %d)", v.Found, v.Writes), nil
}

// pingPostgres opens one connection and pings the server.
func pingPostgres(ctx context.Context, rawURL string) (string, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return "", err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return "", err
	}
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return "", err
	}
	return "connected, PostgreSQL " + version, nil
}

// checkEmbeddedPath says whether the embedded store's file exists, or can
// be created (its directory exists or can be made). It does not open the
// file: a running gateway holds its lock.
func checkEmbeddedPath(path string) (string, error) {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return "", fmt.Errorf("%s is a directory", path)
		}
		return fmt.Sprintf("%s exists (%d bytes)", path, fi.Size()), nil
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return "", fmt.Errorf("%s is not a directory", dir)
			}
			return path + " will be created", nil
		}
		if !errors.Is(err, os.ErrNotExist) || filepath.Dir(dir) == dir {
			return "", err
		}
	}
}

// dialMCP starts every MCP server and lists its tools as start-up does
// (bounded by mcpStartWait), then reports each: the tools listed, or the
// last error the server logged.
func dialMCP(ctx context.Context, st *startup, logs *lineBuffer) []DialResult {
	if st.mcp == nil {
		return nil
	}
	startErr := startMCP(ctx, st.mcp, st.log)
	notReady := map[string]bool{}
	for _, name := range st.mcp.NotReady() {
		notReady[name] = true
	}
	listed := map[string]int{}
	for _, e := range st.opts.Tools.Entries() {
		if t, ok := e.Tool.(*mcptool.Tool); ok {
			listed[t.Provenance()]++
		}
	}
	var out []DialResult
	for _, e := range st.cfg.MCPServers {
		res := DialResult{Target: "mcp:" + e.Name}
		switch {
		case notReady[e.Name]:
			res.Detail = "not listed within " + mcpStartWait.String()
			if msg := logs.lastError("mcp_server", e.Name); msg != "" {
				res.Detail += ": " + msg
			}
		default:
			res.OK = true
			res.Detail = fmt.Sprintf("%d tools listed", countProvenance(listed, e.Name))
		}
		out = append(out, res)
	}
	if startErr != nil {
		out = append(out, DialResult{Target: "mcp", Detail: startErr.Error()})
	}
	return out
}

// countProvenance counts the listed tools whose provenance names server.
func countProvenance(listed map[string]int, server string) int {
	prefix := fmt.Sprintf("MCP server %q,", server)
	n := 0
	for p, c := range listed {
		if len(p) >= len(prefix) && p[:len(prefix)] == prefix {
			n += c
		}
	}
	return n
}

// dialHTTPTools opens a connection to each HTTP tool's upstream (a TLS
// handshake for https, which also checks its certificate) and closes it.
func dialHTTPTools(ctx context.Context, cfg *Config) []DialResult {
	var out []DialResult
	for _, t := range cfg.Tools {
		if t.HTTP == nil {
			continue
		}
		res := DialResult{Target: "http:" + t.Name}
		u, _ := url.Parse(t.HTTP.URL) // buildRegistry checked it
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		var conn net.Conn
		var err error
		if u.Scheme == "https" {
			d := &tls.Dialer{Config: &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}}
			conn, err = d.DialContext(dctx, "tcp", addr)
		} else {
			conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", addr)
		}
		cancel()
		if err != nil {
			res.Detail = fmt.Sprintf("%s: %v", redactURL(t.HTTP.URL), err)
		} else {
			conn.Close()
			res.OK, res.Detail = true, redactURL(t.HTTP.URL)+": connected"
		}
		out = append(out, res)
	}
	return out
}

// lineBuffer keeps the JSON log lines of a check, so -dial can report the
// error an MCP server logged.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write stores log output.
func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lastError is the error attribute of the last warning or error logged
// with attribute key = value ("" when none).
func (b *lineBuffer) lastError(key, value string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line[key] != value {
			continue
		}
		if msg, _ := line["error"].(string); msg != "" {
			last = msg
		}
	}
	return last
}
