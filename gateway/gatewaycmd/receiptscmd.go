package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// `gateway receipts export|verify|keys|checkpoint`: a tenant's receipts
// out of the configured store as JSON lines with their checkpoints, every
// chain of such a file (or of the store itself) checked, the public keys
// of the checkpoints, and a checkpoint signed now (docs/receipts.md).

const receiptsUsage = "export -config FILE [-tenant NAME] [-since TIME] [-until TIME] | verify [-json] [-keys JWKS-FILE] [-retention DURATION] [-checkpoints FILE] [-tsa-roots PEM-FILE] [-require-anchors] (FILE | -dial -config FILE) | keys -config FILE | checkpoint -config FILE [-tenant NAME]"

// receiptsTimeout bounds one export or verify of the store.
const receiptsTimeout = 10 * time.Minute

// runReceipts runs `gateway receipts export|verify`.
func runReceipts(ctx context.Context, inv invocation) error {
	if len(inv.args) == 0 {
		return fmt.Errorf("receipts: want export, verify, keys or checkpoint (usage: gateway receipts %s)", receiptsUsage)
	}
	sub, rest := inv.args[0], inv
	rest.args = inv.args[1:]
	switch sub {
	case "export":
		return runReceiptsExport(ctx, rest)
	case "verify":
		return runReceiptsVerify(ctx, rest)
	case "keys":
		return runReceiptsKeys(rest)
	case "checkpoint":
		return runReceiptsCheckpoint(ctx, rest)
	}
	return fmt.Errorf("receipts: %q: want export, verify, keys or checkpoint (usage: gateway receipts %s)", sub, receiptsUsage)
}

// runReceiptsExport writes the store's receipts to stdout as JSON lines.
func runReceiptsExport(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("receipts export", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	tenant := fs.String("tenant", "", "only this tenant's chain")
	since := fs.String("since", "", "only receipts sealed at or after this RFC 3339 time")
	until := fs.String("until", "", "only receipts sealed before this RFC 3339 time")
	if err := parseFlags(fs, inv, "receipts export", receiptsUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("receipts export: want -config FILE (usage: gateway receipts %s)", receiptsUsage)
	}
	f := receipts.Filter{Tenant: *tenant, Limit: receipts.MaxLimit}
	var err error
	if f.Since, err = flagTime("since", *since); err != nil {
		return fmt.Errorf("receipts export: %w", err)
	}
	if f.Until, err = flagTime("until", *until); err != nil {
		return fmt.Errorf("receipts export: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, receiptsTimeout)
	defer cancel()
	store, _, closeStore, err := openReceipts(ctx, *configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("receipts export: %w", err)
	}
	defer closeStore()
	if err := receipts.ExportFiltered(ctx, store, inv.stdout, f); err != nil {
		return fmt.Errorf("receipts export: %w", err)
	}
	return nil
}

// flagTime parses an RFC 3339 flag (zero when empty).
func flagTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("-%s %q: not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", name, v)
	}
	return t, nil
}

// openReceipts opens the configured store's receipts (receipts.enabled
// does not matter: an export of a gateway that stopped keeping them still
// reads what it kept), the config, and the func that closes the store.
func openReceipts(ctx context.Context, configPath string, getenv func(string) string) (receipts.Store, *Config, func(), error) {
	cfg, _, err := loadConfig(configPath, getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Store.Migrate = new(bool) // read: never change the store's layout
	cfg.Receipts.Enabled = nil
	store, _, err := cfg.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := cfg.receiptsFor(ctx, store)
	if err != nil {
		_ = store.Close()
		return nil, nil, nil, err
	}
	return r, cfg, func() { _ = store.Close() }, nil
}

// errChainsBroken: verify found a chain altered, removed or reordered.
var errChainsBroken = errors.New("receipts verify: a chain does not verify")

// runReceiptsVerify checks every chain of a file (or of the store) and
// prints one line per tenant; a broken chain exits 1.
func runReceiptsVerify(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("receipts verify", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (with -dial)")
	dial := fs.Bool("dial", false, "verify the configured store's receipts instead of a file")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	keysPath := fs.String("keys", "", "JWKS file of the public keys checkpoints must be signed by (with -dial: default the config's keys)")
	retention := fs.Duration("retention", 0, "receipts.retention of the exporting gateway (default 720h; with -dial: the config's)")
	roots := fs.String("tsa-roots", "", "PEM file of the CAs whose TSAs may anchor checkpoints (with -dial: default receipts.anchor.tsa_roots)")
	requireAnchors := fs.Bool("require-anchors", false, "fail a chain with a checkpoint that has no RFC 3161 anchor (default: a warning when anchors are configured or in use)")
	outside := fs.String("checkpoints", "", "an earlier export (or its checkpoints) kept outside the store: its checkpoints are checked too")
	if err := parseFlags(fs, inv, "receipts verify", receiptsUsage); err != nil {
		return helpIsSuccess(err)
	}
	opts := receipts.VerifyOptions{Retention: *retention, RequireAnchors: *requireAnchors}
	// With a TSA configured (-dial), every checkpoint should carry an
	// anchor: one without is warned about.
	anchorsConfigured := false
	if *roots != "" {
		var err error
		if opts.TSARoots, err = tsaRoots(*roots); err != nil {
			return fmt.Errorf("receipts verify: -tsa-roots: %w", err)
		}
	}
	if *outside != "" {
		f, err := os.Open(*outside)
		if err != nil {
			return fmt.Errorf("receipts verify: -checkpoints: %w", err)
		}
		opts.Outside, err = receipts.ReadCheckpoints(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("receipts verify: -checkpoints %s: %w", *outside, err)
		}
	}
	if *keysPath != "" {
		b, err := os.ReadFile(*keysPath)
		if err != nil {
			return fmt.Errorf("receipts verify: -keys: %w", err)
		}
		if opts.Keys, err = receipts.ParseJWKS(b); err != nil {
			return fmt.Errorf("receipts verify: -keys %s: %w", *keysPath, err)
		}
	}
	var in io.Reader
	switch {
	case *dial && *configPath != "" && fs.NArg() == 0:
		ctx, cancel := context.WithTimeout(ctx, receiptsTimeout)
		defer cancel()
		store, cfg, closeStore, err := openReceipts(ctx, *configPath, inv.getenv)
		if err != nil {
			return fmt.Errorf("receipts verify: %w", err)
		}
		defer closeStore()
		if opts.Keys == nil {
			if _, opts.Keys, err = cfg.receiptKeys(); err != nil {
				return fmt.Errorf("receipts verify: %w", err)
			}
		}
		if opts.Retention == 0 {
			opts.Retention = time.Duration(cfg.Receipts.Retention)
		}
		anchorsConfigured = cfg.receiptsTSA() != nil
		if opts.TSARoots == nil {
			if opts.TSARoots, err = cfg.receiptsTSARoots(); err != nil {
				return fmt.Errorf("receipts verify: %w", err)
			}
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(receipts.Export(ctx, store, pw)) }()
		defer pr.Close()
		in = pr
	case !*dial && fs.NArg() == 1:
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("receipts verify: %w", err)
		}
		defer f.Close()
		in = f
	default:
		return fmt.Errorf("receipts verify: want FILE or -dial -config FILE (usage: gateway receipts %s)", receiptsUsage)
	}
	report, err := receipts.VerifyWith(in, opts)
	if err != nil {
		return fmt.Errorf("receipts verify: %w", err)
	}
	if err := printVerifyReport(inv.stdout, report, *asJSON); err != nil {
		return err
	}
	if anchored(report) && opts.TSARoots == nil && !*asJSON {
		fmt.Fprintln(inv.stdout, "note: the anchors' signatures and imprints were checked, not who signed them (no -tsa-roots)")
	}
	if !*asJSON {
		warnUnanchored(inv.stdout, report, anchorsConfigured)
	}
	if !report.OK() {
		return errChainsBroken
	}
	return nil
}

// warnUnanchored names the chains with checkpoints signed without an
// anchor where anchors are expected: configured (-dial with
// receipts.anchor.tsa_url), or carried by other checkpoints of the
// chain. The TSA did not answer when they were signed, or their anchors
// were removed; -require-anchors fails them instead.
func warnUnanchored(w io.Writer, report receipts.Report, configured bool) {
	for _, t := range report.Tenants {
		if t.Failure == nil && t.Unanchored > 0 && (configured || t.Anchored > 0) {
			fmt.Fprintf(w, "warning: %s: %d checkpoints without an anchor, the latest of seq %d (the TSA did not answer when they were signed, or their anchors were removed; -require-anchors fails them)\n",
				t.Tenant, t.Unanchored, t.UnanchoredLast)
		}
	}
}

// anchored reports whether a chain of report has an anchor.
func anchored(report receipts.Report) bool {
	for _, t := range report.Tenants {
		if t.Anchored > 0 {
			return true
		}
	}
	return false
}

// runReceiptsKeys prints the JWKS of the config's receipt keys: what
// GET /.well-known/toolgateway/receipt-keys answers.
func runReceiptsKeys(inv invocation) error {
	fs := flag.NewFlagSet("receipts keys", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	if err := parseFlags(fs, inv, "receipts keys", receiptsUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("receipts keys: want -config FILE (usage: gateway receipts %s)", receiptsUsage)
	}
	cfg, _, err := loadConfig(*configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("receipts keys: %w", err)
	}
	_, keys, err := cfg.receiptKeys()
	if err != nil {
		return fmt.Errorf("receipts keys: %w", err)
	}
	if len(keys) == 0 {
		return errors.New("receipts keys: no receipts.signing_key, TOOLGATEWAY_RECEIPTS_SIGNING_KEY or receipts.verify_keys configured")
	}
	_, err = inv.stdout.Write(keys.JWKS())
	return err
}

// runReceiptsCheckpoint signs the head of every chain (or one tenant's)
// now, as the gateway does every checkpoint_every, and prints one line
// per chain.
func runReceiptsCheckpoint(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("receipts checkpoint", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	tenant := fs.String("tenant", "", "only this tenant's chain")
	if err := parseFlags(fs, inv, "receipts checkpoint", receiptsUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("receipts checkpoint: want -config FILE (usage: gateway receipts %s)", receiptsUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, receiptsTimeout)
	defer cancel()
	store, cfg, closeStore, err := openReceipts(ctx, *configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("receipts checkpoint: %w", err)
	}
	defer closeStore()
	key, keys, err := cfg.receiptKeys()
	if err != nil {
		return fmt.Errorf("receipts checkpoint: %w", err)
	}
	if key == nil {
		return errors.New("receipts checkpoint: no receipts.signing_key or TOOLGATEWAY_RECEIPTS_SIGNING_KEY configured")
	}
	tenants := []string{*tenant}
	if *tenant == "" {
		if tenants, err = store.Tenants(ctx); err != nil {
			return fmt.Errorf("receipts checkpoint: %w", err)
		}
	}
	cp := receipts.Checkpointer{Store: store, Key: key, Keys: keys, Retention: time.Duration(cfg.Receipts.Retention), TSA: cfg.receiptsTSA()}
	var failed error
	for _, t := range tenants {
		c, made, err := cp.Checkpoint(ctx, t)
		switch {
		case err != nil && made:
			fmt.Fprintf(inv.stdout, "FAIL %s: seq %d signed, but: %v\n", t, c.Seq, err)
			failed = fmt.Errorf("receipts checkpoint: %s: %w", t, err)
		case err != nil:
			fmt.Fprintf(inv.stdout, "FAIL %s: %v\n", t, err)
			failed = fmt.Errorf("receipts checkpoint: %s: %w", t, err)
		case c.Seq == 0:
			fmt.Fprintf(inv.stdout, "-    %s: no receipts\n", t)
		case made && c.Anchor != "":
			fmt.Fprintf(inv.stdout, "ok   %s: seq %d signed (key %s) and anchored\n", t, c.Seq, c.KeyID)
		case made:
			fmt.Fprintf(inv.stdout, "ok   %s: seq %d signed (key %s)\n", t, c.Seq, c.KeyID)
		default:
			fmt.Fprintf(inv.stdout, "ok   %s: seq %d was signed already\n", t, c.Seq)
		}
	}
	return failed
}

// printVerifyReport prints one line per tenant, or the report as JSON.
func printVerifyReport(w io.Writer, report receipts.Report, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(report)
	}
	var b strings.Builder
	for _, t := range report.Tenants {
		if t.Failure != nil {
			fmt.Fprintf(&b, "FAIL %s: %s (%d receipts verified before it)\n", t.Tenant, t.Failure, t.Checked)
			continue
		}
		if t.Checked == 0 {
			fmt.Fprintf(&b, "ok   %s: no receipts (every checkpointed one is older than the retention)", t.Tenant)
		} else {
			fmt.Fprintf(&b, "ok   %s: %d receipts, seq %d…%d, head %s", t.Tenant, t.Checked, t.First, t.Last, t.Head)
		}
		if t.Checkpoints > 0 {
			fmt.Fprintf(&b, ", signed up to seq %d (%d checkpoints)", t.Checkpointed, t.Checkpoints)
			if t.Anchored > 0 {
				fmt.Fprintf(&b, ", %d anchored, the latest at %s", t.Anchored, t.AnchoredAt.UTC().Format(time.RFC3339))
			}
		} else if t.Checked > 0 {
			b.WriteString(", no checkpoint (only the chain vouches for it)")
		}
		switch {
		case t.Anchor != "" && t.Filtered:
			fmt.Fprintf(&b, ", anchor %s (the export starts at seq %d)", t.Anchor, t.First)
		case t.Anchor != "":
			fmt.Fprintf(&b, ", anchor %s (the receipts before seq %d are gone: expired, as no checkpoint contradicts)", t.Anchor, t.First)
		}
		b.WriteString("\n")
	}
	if len(report.Tenants) == 0 {
		b.WriteString("no receipts\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
