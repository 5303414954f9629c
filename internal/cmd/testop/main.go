// Command testop is test support: it runs internal/oidctest's OpenID
// provider (zitadel/oidc's example OP) on a loopback port for tests in
// other languages, registers one web client whose authorization-code
// access tokens are JWTs for the gateway's audience, prints
// {"issuer": …, "people": […], …} on one line and serves until it is
// killed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolgateway/toolgateway/internal/oidctest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	audience := flag.String("audience", "", "the gateway's resource identifier (aud of the access tokens)")
	clientID := flag.String("client-id", "", "the web client to register")
	clientSecret := flag.String("client-secret", "", "its secret")
	redirect := flag.String("redirect-url", "", "its redirect URL")
	flag.Parse()
	if *audience == "" || *clientID == "" || *redirect == "" {
		fmt.Fprintln(os.Stderr, "testop: -audience, -client-id and -redirect-url are required")
		os.Exit(2)
	}
	p, err := oidctest.Listen(*addr, *audience)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p.RegisterResourceClient(*clientID, *clientSecret, *redirect)
	// people: oidctest.People, who sign in at the login page and carry a
	// groups claim; token_client_*: the service user of the client
	// credentials grant (a "person:<sub>" scope makes its token speak
	// for that person).
	line, _ := json.Marshal(map[string]any{
		"issuer": p.Issuer, "username": p.Username(), "password": oidctest.UserPassword,
		"people": oidctest.People, "token_client_id": oidctest.ServiceClientID, "token_client_secret": oidctest.ServiceClientSecret,
	})
	fmt.Println(string(line))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	p.Server.Close()
}
