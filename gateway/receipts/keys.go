package receipts

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
)

// SigningKey is the Ed25519 private key that signs checkpoints
// (receipts.signing_key) and its key id.
type SigningKey struct {
	private ed25519.PrivateKey
	id      string
}

// ParseSigningKey reads a PEM PKCS#8 Ed25519 private key: what `openssl
// genpkey -algorithm ed25519` writes.
func ParseSigningKey(pemBytes []byte) (*SigningKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("receipts: signing key: want a PEM \"PRIVATE KEY\" block (PKCS#8, e.g. from openssl genpkey -algorithm ed25519)")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("receipts: signing key: %w", err)
	}
	private, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("receipts: signing key: a %T, want Ed25519", key)
	}
	return NewSigningKey(private), nil
}

// NewSigningKey is the signing key of private.
func NewSigningKey(private ed25519.PrivateKey) *SigningKey {
	return &SigningKey{private: private, id: KeyID(private.Public().(ed25519.PublicKey))}
}

// ID is the key id checkpoints signed by k carry: [KeyID] of its public key.
func (k *SigningKey) ID() string { return k.id }

// Public is k's public key.
func (k *SigningKey) Public() ed25519.PublicKey { return k.private.Public().(ed25519.PublicKey) }

// jwkEncoding is how a JWK writes bytes (RFC 7515: base64url, no padding).
var jwkEncoding = base64.RawURLEncoding

// KeyID is a public key's id: its RFC 7638 JWK thumbprint, the base64url
// SHA-256 of {"crv":"Ed25519","kty":"OKP","x":"<key>"} (RFC 8037).
func KeyID(public ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + jwkEncoding.EncodeToString(public) + `"}`))
	return jwkEncoding.EncodeToString(sum[:])
}

// KeySet is the public keys a verifier trusts, by key id: the signing
// key's and the previous ones (rotation).
type KeySet map[string]ed25519.PublicKey

// Add trusts public.
func (ks KeySet) Add(public ed25519.PublicKey) { ks[KeyID(public)] = public }

// ParsePublicKey reads a PEM Ed25519 key: a "PUBLIC KEY" (SPKI, what
// `openssl pkey -pubout` writes) or a "PRIVATE KEY" (its public half).
func ParsePublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("receipts: public key: not PEM")
	}
	if block.Type == "PRIVATE KEY" {
		k, err := ParseSigningKey(pemBytes)
		if err != nil {
			return nil, err
		}
		return k.Public(), nil
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("receipts: public key: a PEM %q block, want \"PUBLIC KEY\"", block.Type)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("receipts: public key: %w", err)
	}
	public, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("receipts: public key: a %T, want Ed25519", key)
	}
	return public, nil
}

// KeysPath is where a gateway serves its receipt keys' JWKS, without
// auth: anyone verifying an export needs them.
const KeysPath = "/.well-known/toolgateway/receipt-keys"

// jwk is one key of a JWKS (RFC 7517) of Ed25519 keys (RFC 8037).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use,omitempty"`
	Alg string `json:"alg,omitempty"`
}

// JWKS is ks as a JSON Web Key Set: what GET
// /.well-known/toolgateway/receipt-keys and `gateway receipts keys`
// answer, and what `gateway receipts verify -keys` reads.
func (ks KeySet) JWKS() []byte {
	ids := make([]string, 0, len(ks))
	for id := range ks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, id := range ids {
		set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", X: jwkEncoding.EncodeToString(ks[id]), Kid: id, Use: "sig", Alg: "EdDSA"})
	}
	out, err := json.MarshalIndent(set, "", "  ")
	if err != nil { // strings only
		panic(fmt.Sprintf("receipts: marshal JWKS: %v", err))
	}
	return append(out, '\n')
}

// ParseJWKS reads a JWKS of Ed25519 keys. A key whose kid is not its
// thumbprint is refused: key ids are computed, never taken on trust.
func ParseJWKS(b []byte) (KeySet, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&set); err != nil {
		return nil, fmt.Errorf("receipts: JWKS: %w", err)
	}
	ks := KeySet{}
	for i, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			return nil, fmt.Errorf("receipts: JWKS key %d: kty %q crv %q, want OKP Ed25519", i, k.Kty, k.Crv)
		}
		x, err := jwkEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("receipts: JWKS key %d: x is not a base64url Ed25519 public key", i)
		}
		public := ed25519.PublicKey(x)
		if k.Kid != "" && k.Kid != KeyID(public) {
			return nil, fmt.Errorf("receipts: JWKS key %d: kid %q is not the key's RFC 7638 thumbprint %q", i, k.Kid, KeyID(public))
		}
		ks.Add(public)
	}
	if len(ks) == 0 {
		return nil, errors.New("receipts: JWKS: no keys")
	}
	return ks, nil
}

// Errors of [KeySet.Check].
var (
	// ErrUnknownKey: a checkpoint signed by a key the verifier does not
	// trust (or was not given).
	ErrUnknownKey = errors.New("signed by an unknown key")
	// ErrBadSignature: a checkpoint whose signature does not verify.
	ErrBadSignature = errors.New("signature does not verify")
)

// Check verifies c's signature.
func (ks KeySet) Check(c Checkpoint) error {
	public, ok := ks[c.KeyID]
	if !ok {
		return ErrUnknownKey
	}
	sig, err := sigEncoding.DecodeString(c.Sig)
	if err != nil || !ed25519.Verify(public, c.SignedBytes(), sig) {
		return ErrBadSignature
	}
	return nil
}
