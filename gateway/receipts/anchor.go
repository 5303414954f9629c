package receipts

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// An anchor is an RFC 3161 time-stamp token of a checkpoint
// ([Checkpoint.Anchor]): a time-stamping authority (TSA) outside the
// deployment signs that the checkpoint's signed bytes existed at a time.
// Its message imprint is the SHA-256 of [Checkpoint.SignedBytes]. It
// makes a checkpoint's time independent of the gateway: a key stolen
// later cannot sign a checkpoint anchored in the past.

// TSA is the time-stamping authority checkpoints are anchored with
// (receipts.anchor.tsa_url).
type TSA struct {
	URL string
	// Client is the HTTP client (nil: one with a 30 s timeout).
	Client *http.Client
}

// maxTSAReply bounds a TSA's reply.
const maxTSAReply = 1 << 20

// anchorEncoding is how a checkpoint carries its token (DER).
var anchorEncoding = base64.StdEncoding

// Anchor asks the TSA to time-stamp c and answers c with its Anchor. The
// reply must carry the TSA's certificate, be signed by it, echo the
// request's nonce and time-stamp c's imprint.
func (t TSA) Anchor(ctx context.Context, c Checkpoint) (Checkpoint, error) {
	imprint := sha256.Sum256(c.SignedBytes())
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return c, fmt.Errorf("receipts: anchor: nonce: %w", err)
	}
	query, err := (&timestamp.Request{HashAlgorithm: crypto.SHA256, HashedMessage: imprint[:], Certificates: true, Nonce: nonce}).Marshal()
	if err != nil {
		return c, fmt.Errorf("receipts: anchor: request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(query))
	if err != nil {
		return c, fmt.Errorf("receipts: anchor: %w", err)
	}
	req.Header.Set("Content-Type", "application/timestamp-query")
	client := t.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return c, fmt.Errorf("receipts: anchor: %w", err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxTSAReply))
	if err != nil {
		return c, fmt.Errorf("receipts: anchor: read the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("receipts: anchor: the TSA answered %s", resp.Status)
	}
	ts, err := parseAlone(func() (*timestamp.Timestamp, error) { return timestamp.ParseResponse(reply) })
	if err != nil {
		return c, fmt.Errorf("receipts: anchor: %w", err)
	}
	if ts.Nonce == nil || ts.Nonce.Cmp(nonce) != 0 {
		return c, errors.New("receipts: anchor: the TSA's reply does not echo the request's nonce")
	}
	if _, err := checkToken(ts.RawToken, c, nil); err != nil {
		return c, fmt.Errorf("receipts: anchor: the TSA's reply: %w", err)
	}
	c.Anchor = anchorEncoding.EncodeToString(ts.RawToken)
	return c, nil
}

// ErrBadAnchor: a checkpoint's anchor is not a valid time-stamp of it.
var ErrBadAnchor = errors.New("anchor does not verify")

// CheckAnchor verifies c.Anchor: a time-stamp token signed by the
// certificate it carries, of c's imprint, and, with roots, issued by a
// TSA whose certificate chains to roots (valid at the time stamped, for
// time stamping). It answers the time stamped.
func CheckAnchor(c Checkpoint, roots *x509.CertPool) (time.Time, error) {
	token, err := anchorEncoding.DecodeString(c.Anchor)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: not base64", ErrBadAnchor)
	}
	return checkToken(token, c, roots)
}

// pkcs7Parsing serialises the parsing of time-stamp tokens: the pkcs7
// package's BER decoder (under timestamp.Parse and ParseResponse too)
// increments a package-level counter on every call, a data race when two
// verifications parse at once.
var pkcs7Parsing sync.Mutex

// parseAlone runs parse (anything that reaches the pkcs7 decoder) under
// pkcs7Parsing.
func parseAlone[T any](parse func() (T, error)) (T, error) {
	pkcs7Parsing.Lock()
	defer pkcs7Parsing.Unlock()
	return parse()
}

func checkToken(token []byte, c Checkpoint, roots *x509.CertPool) (time.Time, error) {
	ts, err := parseAlone(func() (*timestamp.Timestamp, error) { return timestamp.Parse(token) }) // checks the signature against the token's certificates
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", ErrBadAnchor, err)
	}
	if !ts.AddTSACertificate {
		return time.Time{}, fmt.Errorf("%w: the token carries no TSA certificate", ErrBadAnchor)
	}
	imprint := sha256.Sum256(c.SignedBytes())
	if ts.HashAlgorithm != crypto.SHA256 || !bytes.Equal(ts.HashedMessage, imprint[:]) {
		return time.Time{}, fmt.Errorf("%w: it time-stamps something else than this checkpoint", ErrBadAnchor)
	}
	if roots != nil {
		p7, err := parseAlone(func() (*pkcs7.PKCS7, error) { return pkcs7.Parse(token) })
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: %v", ErrBadAnchor, err)
		}
		intermediates := x509.NewCertPool()
		for _, cert := range p7.Certificates {
			intermediates.AddCert(cert)
		}
		err = p7.VerifyWithOpts(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: ts.Time,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}})
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: the TSA is not trusted: %v", ErrBadAnchor, err)
		}
	}
	return ts.Time, nil
}
