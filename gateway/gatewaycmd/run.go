// Package gatewaycmd is the gateway program: flags, configuration, wiring
// and signals. cmd/gateway's main calls Run; a custom gateway binary that
// compiles in its own plugins does the same (see docs/plugins.md).
package gatewaycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/buildinfo"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// Main runs the gateway (or one of its subcommands, see RunIO) with the
// process's arguments, environment and standard streams until SIGINT or
// SIGTERM (SIGHUP reloads the config), and exits non-zero on error.
func Main() { MainWith(RunIO) }

// MainWith is Main with the program to run given: cmd/gateway passes its
// own run so main() stays a one-liner around a testable function. The
// error run returns is printed on stderr and makes the exit status 1.
func MainWith(run func(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		var status *ExitStatus
		if errors.As(err, &status) {
			os.Exit(status.Code)
		}
		os.Exit(1)
	}
}

// Run is RunIO with nothing on stdin: the gateway serving, or a subcommand
// that needs no input.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return RunIO(ctx, args, getenv, strings.NewReader(""), stdout)
}

// serve is the gateway itself: it parses args (args[0] is the program name),
// loads the config, opens the store, serves until ctx ends, then drains the
// tools in flight and returns nil. SIGHUP reloads the config (reload.go).
// Logs go to stdout as JSON lines.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	// Until serve returns, drain included: a SIGHUP during the drain is
	// ignored instead of killing the process (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveReloading(ctx, args, getenv, stdout, hup)
}

// serveReloading is serve with the reload signals given: each value
// received on reloads reloads the config. Tests send on it directly. It
// reads the flags, checks the config (prepare, the checks `gateway check`
// runs too), builds the gateway on the opened store, and serves.
func serveReloading(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, reloads <-chan os.Signal) error {
	flags, done, err := parseServeFlags(args, stdout)
	if done || err != nil {
		return err
	}
	if flags.version {
		fmt.Fprintln(stdout, "gateway", buildinfo.Version())
		return nil
	}
	st, err := prepare(flags.configPath, getenv, stdout, false)
	if err != nil {
		return err
	}
	b, err := st.build(ctx, getenv)
	// Deferred even on an error: whatever build opened is closed, in the
	// reverse order (the MCP servers after the drain below, so calls in
	// flight finish on their sessions; the spans flushed last).
	defer b.close()
	if err != nil {
		return err
	}
	return st.serve(ctx, b, reloads, getenv)
}

// serveFlags are the flags of the gateway serving.
type serveFlags struct {
	configPath string
	version    bool
}

// parseServeFlags reads the serving flags; done means -h printed the
// usage and there is nothing else to do.
func parseServeFlags(args []string, stdout io.Writer) (flags serveFlags, done bool, err error) {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.StringVar(&flags.configPath, "config", "", "path to gateway.yaml (absent: embedded store, bundled tools, 127.0.0.1:8080)")
	fs.BoolVar(&flags.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [-config gateway.yaml] [-version]\n\n", fs.Name())
		fs.PrintDefaults()
		// The subcommands, from the one list RunIO dispatches on.
		fmt.Fprintf(fs.Output(), "\nCommands (%s COMMAND -h for each one's flags):\n", fs.Name())
		for _, c := range commands {
			fmt.Fprintf(fs.Output(), "  %-8s %s\n", c.name, c.summary)
		}
		fmt.Fprintf(fs.Output(), `
Environment (overrides the config file):
  %s   address to listen on, e.g. 0.0.0.0:8080 (config: listen)
  %s      Redis URL of the shared store, e.g. redis://127.0.0.1:6379/0 (config: store.redis_url)
  %s   PostgreSQL URL of the shared store, e.g. postgres://gw@127.0.0.1:5432/gw (config: store.postgres_url)
  %s  OTLP/HTTP collector base URL; turns tracing on (config: tracing.endpoint)
  %s  the collector's full traces URL (wins over the one above)
  %s  service.name of the spans (config: tracing.service_name)
  %s  the console's session keys, one per line (instead of console.session_key_file)

Signals: SIGTERM or SIGINT drains the tools in flight and exits; SIGHUP
reloads the config file (docs/operations.md).

Docs: docs/configuration.md
`, envAddr, envRedisURL, envDatabaseURL, envOTLPEndpoint, envOTLPTracesEndpoint, envOTELServiceName, gateway.ConsoleSessionKeyEnv)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flags, true, nil // -h asked for the usage, which was printed
		}
		return flags, true, err
	}
	if fs.NArg() > 0 {
		return flags, true, fmt.Errorf("unknown command %q (want key, check, health, admin, or flags only)", fs.Arg(0))
	}
	return flags, false, nil
}

// built is the gateway assembled on its store, with what must be closed
// when it stops.
type built struct {
	gw         *gateway.Server
	opts       callpath.Options
	storeDesc  string
	mcpServers *mcptool.Manager
	// closers run in reverse order by close.
	closers []func()
}

// close releases what build opened, last opened first.
func (b *built) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// build opens the store, starts the MCP servers, opens the limiter and the
// tracer, and makes the gateway. On an error, what it opened is in the
// closers of the returned value all the same.
func (st *startup) build(ctx context.Context, getenv func(string) string) (*built, error) {
	log, opts := st.log, st.opts
	b := &built{mcpServers: st.mcp}
	if st.mcp != nil {
		b.closers = append(b.closers, func() { _ = st.mcp.Close() })
	}
	// The store first: a store start-up refuses (store.migrate: false on a
	// layout behind) stops it before any MCP server is started.
	store, storeDesc, err := st.cfg.openStore(ctx, log)
	if err != nil {
		return b, err
	}
	b.closers = append(b.closers, func() { _ = store.Close() })
	if opts.Receipts, err = st.cfg.receiptsFor(ctx, store); err != nil {
		return b, err
	}
	if opts.Receipts != nil {
		sched, err := st.cfg.checkpointScheduler(opts.Receipts, log)
		if err != nil {
			return b, err
		}
		if _, opts.ReceiptKeys, err = st.cfg.receiptKeys(); err != nil {
			return b, err
		}
		if sched != nil {
			opts.ReceiptCheckpoints = sched
			// Checkpoints are signed off the call path; at the end (closers
			// run in reverse, so after the drain wrote the last receipts,
			// before the store closes) the chains not signed yet are.
			opts.Receipts = sched.Store(opts.Receipts)
			runCtx, stop := context.WithCancel(context.Background())
			go sched.Run(runCtx)
			b.closers = append(b.closers, func() {
				stop()
				flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				sched.Flush(flushCtx)
			})
		}
	}
	// Before the first listing: every tool is checked against its pin.
	usePins(st.mcp, store, opts.Receipts, &opts, log)
	if err := startMCP(ctx, st.mcp, log); err != nil {
		return b, err
	}
	opts.Store = store
	opts.Limiter = st.cfg.limiterFor(store)
	tp, err := st.cfg.tracerProvider(ctx, getenv)
	if err != nil {
		return b, err
	}
	if tp != nil {
		opts.TracerProvider = tp
		// After the drain, so the spans of the last calls are exported.
		b.closers = append(b.closers, func() {
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(flushCtx); err != nil {
				log.Warn("tracing: flushing the last spans failed", "error", err)
			}
		})
	}
	notifier, err := st.cfg.approvalNotifier(log)
	if err != nil {
		return b, err
	}
	if notifier != nil {
		opts.Notifier = notifier
		// After the drain: the last calls' notifications are queued then.
		b.closers = append(b.closers, func() {
			closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = notifier.Close(closeCtx)
		})
	}
	opts.Logger = log
	// One registry for the gateway's series and the reconcile worker's.
	metricsRegistry := newMetricsRegistry()
	opts.Registerer, opts.Gatherer = metricsRegistry, metricsRegistry
	gw, err := gateway.NewServer(opts, gateway.WithConsole(st.console))
	if err != nil {
		return b, err
	}
	stopReconcile, err := startReconcile(st.reconcile, store, metricsRegistry, log, gw.Receipt())
	if err != nil {
		return b, err
	}
	// Last opened, first closed: after the drain, before the store closes.
	b.closers = append(b.closers, stopReconcile)
	b.gw, b.opts, b.storeDesc = gw, opts, storeDesc
	return b, nil
}

// serve listens, serves until ctx ends (reloading the config on each
// value of reloads), then drains the tools in flight.
func (st *startup) serve(ctx context.Context, b *built, reloads <-chan os.Signal, getenv func(string) string) error {
	cfg, log, gw, opts := st.cfg, st.log, b.gw, b.opts
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// The listener that serves /readyz answers it naming the MCP servers
	// not listed yet.
	handler, opsHandler := http.Handler(gw), http.Handler(nil)
	var opsLn net.Listener
	if cfg.AdminListen != "" {
		if opsLn, err = net.Listen("tcp", cfg.AdminListen); err != nil {
			ln.Close()
			return fmt.Errorf("admin_listen: %w", err)
		}
		opsHandler = readyzNamingMCPServers(gw.OperationsHandler(), b.mcpServers)
	} else {
		handler = readyzNamingMCPServers(gw, b.mcpServers)
	}
	srv := cfg.httpServer(handler, log)
	logAttrs := []any{"addr", ln.Addr().String(), "tls", cfg.TLS.enabled(), "store", b.storeDesc,
		"tools", opts.Tools.Len(), "mcp_servers", len(cfg.MCPServers), "key_mode", string(opts.KeyMode), "auth", len(opts.Tenants) > 0 || opts.OIDC != nil,
		"admin", opts.AdminTokenSHA256 != nil, "version", buildinfo.Version()}
	if opsLn != nil {
		logAttrs = append(logAttrs, "admin_addr", opsLn.Addr().String())
	}
	log.Info("gateway listening", logAttrs...)
	startOIDC(ctx, opts.OIDC)

	// Clients waiting with Prefer: wait get their 409 as soon as shutdown
	// begins instead of holding it up.
	srv.RegisterOnShutdown(gw.StopWaiting)
	var cert *servedCert
	if pair, err := cfg.TLS.load(cfg.path); err != nil {
		return err
	} else if pair != nil {
		cert = &servedCert{}
		cert.swap(pair)
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- serveMaybeTLS(srv, ln, cert) }()
	// The operations listener serves with the same TLS certificate and
	// limits; it stops after the drain, so /metrics and /healthz answer
	// while the tools in flight finish.
	opsSrv := cfg.httpServer(opsHandler, log)
	if opsLn != nil {
		go func() { serveErr <- serveMaybeTLS(opsSrv, opsLn, cert) }()
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = opsSrv.Shutdown(ctx)
		}()
	}
	rl := &reloader{path: st.path, getenv: getenv, log: log, level: st.level, plugins: st.plugins,
		gw: gw, registry: opts.Tools, cert: cert, cfg: cfg, applied: settingsOf(opts), mcp: cfg.mcpLive,
		consoleKeys: st.console.SessionKeys}
serving:
	for {
		select {
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case <-reloads:
			rl.reload()
		case <-ctx.Done():
			break serving
		}
	}

	// Stop accepting, let the tools in flight finish and record their
	// outcomes, bounded by drain_timeout (the reloaded one, if it changed).
	drainTimeout := rl.drainTimeout()
	log.Info("shutting down: draining tools in flight", "drain_timeout", drainTimeout.String())
	drainCtx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(drainCtx)
	drainErr := gw.Drain(drainCtx)
	if err := errors.Join(shutdownErr, drainErr); err != nil {
		// The cancelled calls' answers are being written: a short grace
		// lets them reach their clients before the process exits.
		graceCtx, cancelGrace := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(graceCtx)
		cancelGrace()
		log.Warn("drain incomplete; unfinished tools were cancelled: their records released, or left UNKNOWN for lease_expiry: unknown tools", "error", err)
	}
	log.Info("gateway stopped")
	return nil
}

// httpServer is an http.Server of handler with the server section's limits.
func (c *Config) httpServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: time.Duration(c.Server.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(c.Server.ReadTimeout),
		IdleTimeout:       time.Duration(c.Server.IdleTimeout),
		MaxHeaderBytes:    c.Server.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serverOptions converts the config into callpath.Options (without the store).
func (c *Config) serverOptions(plugins []tools.Tool) (callpath.Options, error) {
	registry, policies, err := c.buildRegistry(plugins)
	if err != nil {
		return callpath.Options{}, err
	}
	tenants, admin, err := c.buildAuth()
	if err != nil {
		return callpath.Options{}, err
	}
	provider, err := c.buildOIDC()
	if err != nil {
		return callpath.Options{}, err
	}
	var providerLimits callpath.TenantLimits
	if c.Auth != nil && c.Auth.OIDC != nil {
		if providerLimits, err = c.Auth.OIDC.limits("auth.oidc"); err != nil {
			return callpath.Options{}, err
		}
	}
	mode := callpath.KeyMode(c.Idempotency.KeyMode)
	if err := mode.Validate(); err != nil {
		return callpath.Options{}, fmt.Errorf("idempotency.key_mode: %w", err)
	}
	if c.Idempotency.MaxBodyBytes < 0 {
		return callpath.Options{}, fmt.Errorf("idempotency.max_body_bytes: %d: must be positive", c.Idempotency.MaxBodyBytes)
	}
	// Port 0 picks a free port for each, so only a fixed port can clash.
	if _, port, _ := net.SplitHostPort(c.AdminListen); c.AdminListen == c.Listen && port != "0" && port != "" {
		return callpath.Options{}, fmt.Errorf("admin_listen: %s is listen's address too: give the operations endpoints another one, or remove admin_listen", c.AdminListen)
	}
	mcpOpts, err := c.mcpOptions()
	if err != nil {
		return callpath.Options{}, err
	}
	c.mcpLive = new(mcpserver.Reloadable)
	mcpOpts.Reloadable = c.mcpLive
	decisions, decideMode, approvals, err := c.buildDecisions()
	if err != nil {
		return callpath.Options{}, err
	}
	budgetSet, err := c.buildBudgets()
	if err != nil {
		return callpath.Options{}, err
	}
	if err := c.checkReceipts(); err != nil {
		return callpath.Options{}, err
	}
	lockTTL := time.Duration(c.Idempotency.LockTTL)
	if lockTTL != 0 && lockTTL < callpath.MinLockTTL {
		return callpath.Options{}, fmt.Errorf("idempotency.lock_ttl: %s: must be at least %v", lockTTL, callpath.MinLockTTL)
	}
	return callpath.Options{
		Tools:                    registry,
		Policies:                 policies,
		KeyMode:                  mode,
		LockTTL:                  lockTTL,
		ReplayTTL:                time.Duration(c.Idempotency.ReplayTTL),
		MaxBodyBytes:             c.Idempotency.MaxBodyBytes,
		StepGuardOff:             c.Idempotency.StepGuard != nil && !*c.Idempotency.StepGuard,
		KeepArguments:            c.Idempotency.KeepArguments,
		SeparateOperations:       c.AdminListen != "",
		Tenants:                  tenants,
		OIDC:                     verifier(provider),
		ProviderLimits:           providerLimits,
		AdminTokenSHA256:         admin.current,
		AdminPreviousTokenSHA256: admin.previous,
		Mounts:                   []callpath.Mount{mcpserver.Mount(mcpOpts)},
		Decisions:                decisions,
		Budgets:                  budgetSet,
		Mode:                     decideMode,
		Approvals:                approvals,
		ReceiptRetention:         time.Duration(c.Receipts.Retention),
		ReceiptRecoverAfter:      time.Duration(c.Receipts.RecoverAfter),
	}, nil
}

// logLevel parses log_level (default info).
func (c *Config) logLevel() (slog.Level, error) {
	level := slog.LevelInfo
	if err := level.UnmarshalText([]byte(orString(c.LogLevel, "info"))); err != nil {
		return level, fmt.Errorf("log_level: %q: want debug, info, warn or error", c.LogLevel)
	}
	return level, nil
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
