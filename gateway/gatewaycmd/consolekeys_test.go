package gatewaycmd

import (
	"encoding/base64"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/console"
)

// TestCheckRefusesBadConsoleSessionKeys: a short or malformed key, a
// missing file, keys in both places and a console nobody can sign in to
// are refused by `gateway check` (and start-up), naming what to fix and
// never the key.
func TestCheckRefusesBadConsoleSessionKeys(t *testing.T) {
	base := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\nadmin:\n  token_sha256: " + tokenHash("admin") + "\n"
	short := base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))
	good := base64.StdEncoding.EncodeToString(console.NewSessionKey())
	withFile := func(t *testing.T, keyText string) string {
		path := writeConfig(t, base+"console:\n  session_key_file: console.keys\n")
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), "console.keys"), []byte(keyText), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	noEnv := envOf(nil)
	for _, c := range []struct {
		name     string
		config   func(t *testing.T) string
		env      map[string]string
		errorHas string
	}{
		{"short key in the file", func(t *testing.T) string { return withFile(t, good+"\n"+short+"\n") }, nil, "console.keys: line 2: 16 bytes: want at least 32"},
		{"malformed key in the file", func(t *testing.T) string { return withFile(t, "not a key at all\n") }, nil, "line 1: not hex or base64"},
		{"empty file", func(t *testing.T) string { return withFile(t, "\n") }, nil, "no key"},
		{"short key in the environment", func(t *testing.T) string { return writeConfig(t, base) }, map[string]string{"TOOLGATEWAY_CONSOLE_SESSION_KEY": short}, "TOOLGATEWAY_CONSOLE_SESSION_KEY: line 1: 16 bytes"},
		{"both", func(t *testing.T) string { return withFile(t, good) }, map[string]string{"TOOLGATEWAY_CONSOLE_SESSION_KEY": good}, "both set"},
		{"no way to sign in", func(t *testing.T) string { return writeConfig(t, base+"console:\n  token_sign_in: false\n") }, nil, "console.token_sign_in"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check(c.config(t), envOf(c.env))
			if err == nil || !strings.Contains(err.Error(), c.errorHas) {
				t.Fatalf("check: %v, want an error naming %q", err, c.errorHas)
			}
			if strings.Contains(err.Error(), short) || strings.Contains(err.Error(), good) {
				t.Fatalf("the error echoes a key: %v", err)
			}
		})
	}
	// A key file absent where check runs: a warning, not an error (check
	// and verify never serve the console).
	if r, err := Check(writeConfig(t, base+"console:\n  session_key_file: absent.keys\n"), noEnv); err != nil || len(r.Warnings) == 0 || !strings.Contains(strings.Join(r.Warnings, " "), "console.session_key_file") {
		t.Fatalf("check with an absent key file: %v, warnings %q", err, r.Warnings)
	}
	if r, err := Check(withFile(t, "# current\n"+good+"\n"), noEnv); err != nil || len(r.Warnings) != 0 {
		t.Fatalf("a good key file: %v, report %+v", err, r)
	}
	if r, err := Check(writeConfig(t, base), envOf(map[string]string{"TOOLGATEWAY_CONSOLE_SESSION_KEY": good})); err != nil || len(r.Warnings) != 0 {
		t.Fatalf("a good key in the environment: %v, report %+v", err, r)
	}
	if r, err := Check(writeConfig(t, base), noEnv); err != nil || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "random key") {
		t.Fatalf("no key: %v, report %+v", err, r)
	}
}

var signInCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleSignIn signs a new cookie-keeping client in to the console at
// addr with the admin token.
func consoleSignIn(t *testing.T, addr, token string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	page := consoleGetPage(t, c, "http://"+addr+"/console/signin")
	m := signInCSRF.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form:\n%s", page)
	}
	resp, err := c.PostForm("http://"+addr+"/console/signin", url.Values{"csrf": {m[1]}, "name": {"olga"}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/console/approvals" {
		t.Fatalf("sign-in landed on %s (%d)", resp.Request.URL, resp.StatusCode)
	}
	return c
}

func consoleGetPage(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// TestConsoleSessionKeyFileRotatesByReload: the key file (relative to
// the config) signs the sessions; a reload reads it again, so a session
// signed by a key still listed second survives and one whose key was
// dropped ends. Without a key file the gateway warns at start.
func TestConsoleSessionKeyFileRotatesByReload(t *testing.T) {
	oldKey := base64.StdEncoding.EncodeToString(console.NewSessionKey())
	newKey := base64.StdEncoding.EncodeToString(console.NewSessionKey())
	config := storeSection(t) + "admin:\n  token_sha256: " + tokenHash("admin") + "\nconsole:\n  session_key_file: console.keys\n"
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "console.keys")
	writeKeys := func(keys ...string) {
		if err := os.WriteFile(keyFile, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys(oldKey)
	configPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startReloadingAt(t, configPath)
	for _, l := range g.logs.JSONLines() {
		if msg, _ := l["msg"].(string); strings.Contains(msg, "random key") {
			t.Fatalf("warned of a random key with a key file: %v", l)
		}
	}
	browser := consoleSignIn(t, g.addr, "admin")
	signedIn := func() bool {
		resp, err := browser.Get("http://" + g.addr + "/console/tools")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Request.URL.Path == "/console/tools"
	}

	writeKeys(newKey, oldKey)
	if line := g.reload(t, config); !slices.Contains(strs(line["changed"]), "console session keys") {
		t.Fatalf("reload with a new first key: %v", line)
	}
	if !signedIn() {
		t.Fatal("a session signed by the key now listed second ended")
	}
	writeKeys(newKey)
	g.reload(t, config)
	if signedIn() {
		t.Fatal("a session signed by a dropped key still serves")
	}
	consoleSignIn(t, g.addr, "admin")

	// A bad key file at reload changes nothing: the running keys serve.
	writeKeys("short")
	if line := g.reload(t, config); line["level"] != "ERROR" || !strings.Contains(line["error"].(string), "console.session_key_file") {
		t.Fatalf("reload with a bad key file: %v", line)
	}

	bare := startReloading(t, storeSection(t)+"admin:\n  token_sha256: "+tokenHash("admin")+"\n")
	warned := false
	for _, l := range bare.logs.JSONLines() {
		if msg, _ := l["msg"].(string); l["level"] == "WARN" && strings.Contains(msg, "random key") && strings.Contains(msg, "other replicas") {
			warned = true
		}
	}
	if !warned {
		t.Fatal("no warning of the random session key")
	}
}
