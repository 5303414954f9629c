package gatewaycmd

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/pgreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
)

// ReceiptsConfig is the receipts section (docs/receipts.md). Receipts are
// kept in the configured store: Redis under the store's key prefix,
// PostgreSQL in the store's schema, the embedded store's file.
type ReceiptsConfig struct {
	// Enabled is true unless set false: every consequential event leaves a
	// receipt. Off exists to measure what receipts cost.
	Enabled *bool `yaml:"enabled"`
	// Retention is how long receipts are kept (default 30d).
	Retention Duration `yaml:"retention"`
	// RecoverAfter is how old an executed call's receipt outbox entry must
	// be before the recovery sweep appends its receipt (default 2m):
	// longer than the writer's own retries, so the sweep only takes what
	// a gateway that died left behind.
	RecoverAfter Duration `yaml:"recover_after"`
	// SigningKey is the file of the Ed25519 private key (PEM PKCS#8, as
	// `openssl genpkey -algorithm ed25519` writes it) that signs the
	// chains' checkpoints; TOOLGATEWAY_RECEIPTS_SIGNING_KEY, the PEM
	// itself, overrides it. Without either, no checkpoint is signed.
	SigningKey string `yaml:"signing_key"`
	// VerifyKeys are files of earlier signing keys (PEM public keys, or
	// private ones), still published and trusted: a rotation moves the
	// old key here.
	VerifyKeys []string `yaml:"verify_keys"`
	// CheckpointEvery is how often a chain's head is signed: after this
	// many receipts, or this long after the chain's last checkpoint,
	// whichever comes first (default 1000 receipts or 1m).
	CheckpointEvery CheckpointEvery `yaml:"checkpoint_every"`
	// Anchor time-stamps every checkpoint with an RFC 3161 TSA.
	Anchor *AnchorConfig `yaml:"anchor"`
}

// AnchorConfig is receipts.anchor.
type AnchorConfig struct {
	// TSAURL is the time-stamping authority's URL (http or https).
	TSAURL string `yaml:"tsa_url"`
	// TSARoots is a PEM file of the CA certificates the TSA's chains to:
	// what `gateway receipts verify -dial` trusts anchors from.
	TSARoots string `yaml:"tsa_roots"`
}

// receiptsTSA is the configured TSA (nil: none).
func (c *Config) receiptsTSA() *receipts.TSA {
	if a := c.Receipts.Anchor; a != nil && a.TSAURL != "" {
		return &receipts.TSA{URL: a.TSAURL}
	}
	return nil
}

// tsaRoots reads a PEM file of CA certificates.
func tsaRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}

// receiptsTSARoots reads receipts.anchor.tsa_roots (nil: none set).
func (c *Config) receiptsTSARoots() (*x509.CertPool, error) {
	a := c.Receipts.Anchor
	if a == nil || a.TSARoots == "" {
		return nil, nil
	}
	pool, err := tsaRoots(c.path(a.TSARoots))
	if err != nil {
		return nil, fmt.Errorf("receipts.anchor.tsa_roots: %w", err)
	}
	return pool, nil
}

// envReceiptsSigningKey holds the checkpoints' signing key (PEM).
const envReceiptsSigningKey = "TOOLGATEWAY_RECEIPTS_SIGNING_KEY"

// The default checkpoint_every.
const (
	defaultCheckpointReceipts = 1000
	defaultCheckpointInterval = time.Minute
)

// CheckpointEvery is receipts.checkpoint_every: a count of receipts (an
// integer: `500`), a duration (`"30s"`), or both (`{receipts: 500,
// interval: 30s}`).
type CheckpointEvery struct {
	Receipts int      `yaml:"receipts"`
	Interval Duration `yaml:"interval"`
}

// UnmarshalYAML reads a count, a duration or the mapping.
func (e *CheckpointEvery) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		type plain CheckpointEvery
		return n.Decode((*plain)(e))
	}
	if n.Tag == "!!int" {
		if err := n.Decode(&e.Receipts); err != nil || e.Receipts <= 0 {
			return fmt.Errorf("line %d: checkpoint_every: want a positive count of receipts, a duration or {receipts, interval}", n.Line)
		}
		return nil
	}
	return e.Interval.UnmarshalYAML(n)
}

// checkpointEvery is c's checkpoint_every with its defaults: a count and
// an interval, 0 meaning "not by this".
func (c *Config) checkpointEvery() (int, time.Duration) {
	e := c.Receipts.CheckpointEvery
	if e.Receipts == 0 && e.Interval == 0 {
		return defaultCheckpointReceipts, defaultCheckpointInterval
	}
	return e.Receipts, time.Duration(e.Interval)
}

// receiptKeys reads the signing key (nil: none configured) and the
// public keys a verifier of this deployment's checkpoints trusts: the
// signing key's and verify_keys'.
func (c *Config) receiptKeys() (*receipts.SigningKey, receipts.KeySet, error) {
	keys := receipts.KeySet{}
	var signing *receipts.SigningKey
	pemBytes := []byte(c.receiptsSigningPEM)
	from := envReceiptsSigningKey
	if len(pemBytes) == 0 && c.Receipts.SigningKey != "" {
		var err error
		if pemBytes, err = os.ReadFile(c.path(c.Receipts.SigningKey)); err != nil {
			return nil, nil, fmt.Errorf("receipts.signing_key: %w", err)
		}
		from = "receipts.signing_key " + c.Receipts.SigningKey
	}
	if len(pemBytes) > 0 {
		var err error
		if signing, err = receipts.ParseSigningKey(pemBytes); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", from, err)
		}
		keys.Add(signing.Public())
	}
	for i, file := range c.Receipts.VerifyKeys {
		b, err := os.ReadFile(c.path(file))
		if err != nil {
			return nil, nil, fmt.Errorf("receipts.verify_keys[%d]: %w", i, err)
		}
		public, err := receipts.ParsePublicKey(b)
		if err != nil {
			return nil, nil, fmt.Errorf("receipts.verify_keys[%d] %s: %w", i, file, err)
		}
		keys.Add(public)
	}
	return signing, keys, nil
}

// receiptsOn reports whether receipts are kept.
func (c *Config) receiptsOn() bool {
	return c.Receipts.Enabled == nil || *c.Receipts.Enabled
}

// checkReceipts checks the receipts section.
func (c *Config) checkReceipts() error {
	if c.Receipts.Retention < 0 {
		return fmt.Errorf("receipts.retention: %s: must be positive", time.Duration(c.Receipts.Retention))
	}
	if r := time.Duration(c.Receipts.Retention); r != 0 && r < time.Hour {
		return fmt.Errorf("receipts.retention: %s: must be at least 1h", r)
	}
	if r := time.Duration(c.Receipts.RecoverAfter); r < 0 || (r != 0 && r < time.Second) {
		return fmt.Errorf("receipts.recover_after: %s: must be at least 1s", r)
	}
	if e := c.Receipts.CheckpointEvery; e.Receipts < 0 || (e.Interval != 0 && time.Duration(e.Interval) < time.Second) {
		return fmt.Errorf("receipts.checkpoint_every: %d receipts, %s: want a positive count, an interval of at least 1s, or both", e.Receipts, time.Duration(e.Interval))
	}
	signing, _, err := c.receiptKeys()
	if err != nil {
		return err
	}
	if a := c.Receipts.Anchor; a != nil {
		if u, err := url.Parse(a.TSAURL); a.TSAURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return fmt.Errorf("receipts.anchor.tsa_url: %q: want an http(s) URL", a.TSAURL)
		}
		if a.TSAURL != "" && signing == nil {
			return errors.New("receipts.anchor.tsa_url: anchors checkpoints, which need receipts.signing_key (or TOOLGATEWAY_RECEIPTS_SIGNING_KEY)")
		}
		if _, err := c.receiptsTSARoots(); err != nil {
			return err
		}
	}
	return nil
}

// receiptsFor is the receipts store beside the idempotency store (nil when
// receipts are off).
func (c *Config) receiptsFor(ctx context.Context, store idempotency.Store) (receipts.Store, error) {
	if !c.receiptsOn() {
		return nil, nil
	}
	switch s := store.(type) {
	case clientOwningStore:
		return redisreceipts.New(s.client, orString(c.Store.KeyPrefix, redisstore.DefaultPrefix), nil), nil
	case *pgstore.Store:
		r, err := pgreceipts.New(ctx, s.Pool(), s.Schema(), nil)
		if err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
		return r, nil
	case *boltstore.Store:
		r, err := boltreceipts.New(s.DB(), nil)
		if err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
		return r, nil
	}
	return nil, errors.New("receipts: this store keeps no receipts")
}

// checkpointScheduler is the scheduler that signs store's chains off the
// call path (nil without a signing key).
func (c *Config) checkpointScheduler(store receipts.Store, log *slog.Logger) (*receipts.Scheduler, error) {
	key, keys, err := c.receiptKeys()
	if err != nil || key == nil {
		return nil, err
	}
	every, interval := c.checkpointEvery()
	cp := receipts.Checkpointer{Store: store, Key: key, Keys: keys, Retention: time.Duration(c.Receipts.Retention), TSA: c.receiptsTSA()}
	return receipts.NewScheduler(cp, every, interval, log), nil
}
