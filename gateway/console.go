package gateway

// Attaching the operator console: its options, its session keys and its
// mount on the admin side, beside the admin API. What the console reads
// and does through the gateway is consolebackend.go.

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/console"
)

// ConsoleOptions configure the operator console (config `console`). They
// are the console's, not the engine's: [WithConsole] hands them to the
// Server, which serves the console on the admin side.
type ConsoleOptions struct {
	// OIDC, when set, lets operators sign in through the identity
	// provider beside the admin token; a change needs a restart.
	OIDC *console.OIDC
	// SessionKeys sign the console's sessions and CSRF tokens
	// (console.Options.SessionKeys): the first signs, all verify, each at
	// least console.MinSessionKeyBytes long. None: a random key per
	// process, so sessions end at a restart and other replicas refuse them
	// (a warning is logged when the console is served so).
	// Server.ReloadConsoleKeys replaces them.
	SessionKeys [][]byte
	// SecureCookies marks the console's cookies Secure on plain HTTP too,
	// for TLS terminated in front of the gateway.
	SecureCookies bool
	// TokenSignInOff turns the admin-token sign-in off (sign-in through
	// OIDC only).
	TokenSignInOff bool
}

// WithConsole configures the operator console NewServer serves (with an
// admin token) as c says.
func WithConsole(c ConsoleOptions) ServerOption {
	return func(s *Server) error {
		s.console = c
		return s.ReloadConsoleKeys(c.SessionKeys)
	}
}

// ReloadConsoleKeys replaces the keys that sign the console's sessions
// (the key file read again): sessions signed by a key no longer listed
// end; none: the process's random key. A key shorter than
// console.MinSessionKeyBytes changes nothing.
func (s *Server) ReloadConsoleKeys(keys [][]byte) error {
	own := make([][]byte, 0, len(keys))
	for i, key := range keys {
		if len(key) < console.MinSessionKeyBytes {
			return fmt.Errorf("gateway: console session key %d: %d bytes, want at least %d", i+1, len(key), console.MinSessionKeyBytes)
		}
		own = append(own, slices.Clone(key))
	}
	s.consoleKeys.Store(&own)
	return nil
}

// consoleSessionKeys returns the keys that sign the console's sessions
// now (the first signs, all verify); none: the console signs with a
// random key of its process.
func (s *Server) consoleSessionKeys() [][]byte {
	if keys := s.consoleKeys.Load(); keys != nil {
		return *keys
	}
	return nil
}

// mountConsole serves the operator console at /console/ on the admin
// listener; called only when an admin token is configured.
func (s *Server) mountConsole(r chi.Router) {
	// Without configured keys the process signs with a key of its own:
	// nothing in the configuration derives it, and it dies with the process.
	random := console.NewSessionKey()
	if len(s.consoleSessionKeys()) == 0 {
		s.Logger().Warn("console: no session key configured (console.session_key_file or " + ConsoleSessionKeyEnv +
			"): signing with a random key, so console sessions end at a restart and other replicas do not accept them")
	}
	h := console.New(consoleBackend{s}, console.Options{
		Authenticate: s.adminTokenAccepted,
		SessionKeys: func() [][]byte {
			if keys := s.consoleSessionKeys(); len(keys) > 0 {
				return keys
			}
			return [][]byte{random}
		},
		Secure:         s.console.SecureCookies,
		TokenSignInOff: s.console.TokenSignInOff,
		Log:            s.Logger(),
		OIDC:           s.console.OIDC,
	})
	r.Handle(console.Base, h)
	r.Handle(console.Base+"/*", h)
}

// ConsoleSessionKeyEnv is the environment variable that may hold the
// console's session keys instead of console.session_key_file (the same
// format: console.ParseSessionKeys).
const ConsoleSessionKeyEnv = "TOOLGATEWAY_CONSOLE_SESSION_KEY"

// adminTokenAccepted reports whether token is an admin token the gateway
// accepts now (the current one, or the previous one during a rotation).
func (s *Server) adminTokenAccepted(token string) bool {
	sum := sha256.Sum256([]byte(token))
	ok := false
	for _, h := range s.AdminTokenHashes() {
		ok = subtle.ConstantTimeCompare(sum[:], h[:]) == 1 || ok
	}
	return token != "" && ok
}
