package gatewaycmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

const healthUsage = "[-url URL] [-timeout D] [-insecure]"

// runHealth is `gateway health`: one GET of a health endpoint, exit status
// 0 when it answers 200 and 1 otherwise. It exists for container
// HEALTHCHECKs and exec probes in images that have no curl.
func runHealth(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	target := fs.String("url", "http://127.0.0.1:8080/healthz", "endpoint to probe (/healthz for liveness, /readyz for readiness)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	insecure := fs.Bool("insecure", false, "https: do not verify the certificate (probing a gateway's own self-signed address)")
	if err := parseFlags(fs, inv, "health", healthUsage); err != nil {
		return helpIsSuccess(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("health: unexpected argument %q (usage: gateway health %s)", fs.Arg(0), healthUsage)
	}
	if *timeout <= 0 {
		return fmt.Errorf("health: -timeout %s: must be positive", *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *target, nil)
	if err != nil {
		return fmt.Errorf("health: -url: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // a probe of this host never goes through a proxy
	if *insecure {
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the operator asked for it, for a local probe
	}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %d: %s", *target, resp.StatusCode, bytes.TrimSpace(body))
	}
	_, err = fmt.Fprintf(inv.stdout, "%s: %d %s\n", *target, resp.StatusCode, bytes.TrimSpace(body))
	return err
}
