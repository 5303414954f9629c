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

// `gateway receipts export` and `gateway receipts verify`: a tenant's
// receipts out of the configured store as JSON lines, and every chain of
// such a file (or of the store itself) checked (docs/receipts.md).

const receiptsUsage = "export -config FILE [-tenant NAME] [-since TIME] [-until TIME] | verify [-json] (FILE | -dial -config FILE)"

// receiptsTimeout bounds one export or verify of the store.
const receiptsTimeout = 10 * time.Minute

// runReceipts runs `gateway receipts export|verify`.
func runReceipts(ctx context.Context, inv invocation) error {
	if len(inv.args) == 0 {
		return fmt.Errorf("receipts: want export or verify (usage: gateway receipts %s)", receiptsUsage)
	}
	sub, rest := inv.args[0], inv
	rest.args = inv.args[1:]
	switch sub {
	case "export":
		return runReceiptsExport(ctx, rest)
	case "verify":
		return runReceiptsVerify(ctx, rest)
	}
	return fmt.Errorf("receipts: %q: want export or verify (usage: gateway receipts %s)", sub, receiptsUsage)
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
	store, closeStore, err := openReceipts(ctx, *configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("receipts export: %w", err)
	}
	defer closeStore()
	if err := exportReceipts(ctx, store, f, inv.stdout); err != nil {
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
// reads what it kept) and the func that closes it.
func openReceipts(ctx context.Context, configPath string, getenv func(string) string) (receipts.Store, func(), error) {
	cfg, _, err := loadConfig(configPath, getenv)
	if err != nil {
		return nil, nil, err
	}
	cfg.Store.Migrate = new(bool) // read: never change the store's layout
	cfg.Receipts.Enabled = nil
	store, _, err := cfg.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	r, err := cfg.receiptsFor(ctx, store)
	if err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	return r, func() { _ = store.Close() }, nil
}

// exportReceipts writes the chains f selects (every tenant's when
// f.Tenant is empty), page by page.
func exportReceipts(ctx context.Context, store receipts.Store, f receipts.Filter, w io.Writer) error {
	tenants := []string{f.Tenant}
	if f.Tenant == "" {
		all, err := store.Tenants(ctx)
		if err != nil {
			return err
		}
		tenants = all
	}
	for _, tenant := range tenants {
		f.Tenant, f.After = tenant, 0
		for {
			page, next, err := store.List(ctx, f)
			if err != nil {
				return fmt.Errorf("%s after seq %d: %w", tenant, f.After, err)
			}
			for _, r := range page {
				line, err := receipts.Encode(r)
				if err != nil {
					return err
				}
				if _, err := w.Write(append(line, '\n')); err != nil {
					return fmt.Errorf("write: %w", err)
				}
			}
			if next == 0 {
				break
			}
			f.After = next
		}
	}
	return nil
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
	if err := parseFlags(fs, inv, "receipts verify", receiptsUsage); err != nil {
		return helpIsSuccess(err)
	}
	var in io.Reader
	switch {
	case *dial && *configPath != "" && fs.NArg() == 0:
		ctx, cancel := context.WithTimeout(ctx, receiptsTimeout)
		defer cancel()
		store, closeStore, err := openReceipts(ctx, *configPath, inv.getenv)
		if err != nil {
			return fmt.Errorf("receipts verify: %w", err)
		}
		defer closeStore()
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(exportReceipts(ctx, store, receipts.Filter{Limit: receipts.MaxLimit}, pw)) }()
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
	report, err := receipts.Verify(in)
	if err != nil {
		return fmt.Errorf("receipts verify: %w", err)
	}
	if err := printVerifyReport(inv.stdout, report, *asJSON); err != nil {
		return err
	}
	if !report.OK() {
		return errChainsBroken
	}
	return nil
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
		fmt.Fprintf(&b, "ok   %s: %d receipts, seq %d…%d, head %s", t.Tenant, t.Checked, t.First, t.Last, t.Head)
		if t.Anchor != "" {
			fmt.Fprintf(&b, ", anchor %s (the receipts before seq %d expired)", t.Anchor, t.First)
		}
		b.WriteString("\n")
	}
	if len(report.Tenants) == 0 {
		b.WriteString("no receipts\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
